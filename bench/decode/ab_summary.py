#!/usr/bin/env python3
"""Medians of bench/decode/ab_pages.sh's runs, and each variant's change against the first (session 75).

Usage: bench/decode/ab_summary.py FOLDER VAR [VAR ...]   (FOLDER: where ab.tgz was unpacked, holding r/)
Prints, per page kind (DRAM, L2), each variant's median µs per row over the passes, then its change in % against
the first variant, and the test lines of r/rc.txt.
"""
import glob
import os
import statistics
import sys

from bench_rows import bench_rows  # the sibling file: python puts this script's folder on sys.path


def row_us(path):
    """The µs column of every table row in one bench_decode log."""
    return [row[4] for row in bench_rows(path)]


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    folder, variants = os.path.join(sys.argv[1], "r"), sys.argv[2:]
    for mode in ("dram", "l2"):
        med = {}
        for v in variants:
            runs = [row_us(p) for p in sorted(glob.glob(os.path.join(folder, f"{mode}_{v}_*.txt")))]
            runs = [r for r in runs if r]
            if runs:
                med[v] = [statistics.median(col) for col in zip(*runs)]
        if variants[0] not in med:
            continue
        base = med[variants[0]]
        print(f"{mode} pages")
        for v, m in med.items():
            change = " ".join(f"{(x / b - 1) * 100:+5.1f}%" for x, b in zip(m, base))
            print(f"  {v:6} {' '.join(f'{x:7.1f}' for x in m)} | {change}")
    rc = os.path.join(folder, "rc.txt")
    if os.path.exists(rc):
        with open(rc) as f:
            print("".join(line for line in f if line.startswith("test ")), end="")


if __name__ == "__main__":
    main()
