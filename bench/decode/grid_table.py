#!/usr/bin/env python3
"""The standing-table rows of BENCHMARKS.md from one call's grid logs (session 85).

Usage: bench/decode/grid_table.py FOLDER FORMAT
FOLDER holds grid_FORMAT_<pass>.txt (`bench_decode --format FORMAT --reps 30`, one file per pass) and, if it was run,
unrolled_FORMAT.txt (`--unrolled 20`). Prints one markdown row per grid row with the standing table's columns: the
median pass's µs with that pass's TB/s and TFLOP/s, the anchor and its ratio, the passes' range, the anchor over the
slowest pass, and the unrolled µs and ratio ('-' where there is no unrolled log).
"""
import glob
import os
import sys

from bench_rows import bench_cells  # the sibling file: python puts this script's folder on sys.path


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    folder, fmt = sys.argv[1:]
    passes = [bench_cells(p, fmt) for p in sorted(glob.glob(os.path.join(folder, f"grid_{fmt}_*.txt")))]
    passes = [p for p in passes if p]
    if not passes:
        sys.exit(f"no grid_{fmt}_*.txt rows under {folder}")
    unrolled_path = os.path.join(folder, f"unrolled_{fmt}.txt")
    unrolled = bench_cells(unrolled_path, fmt) if os.path.exists(unrolled_path) else []
    n = min(len(p) for p in passes)  # a pass cut short by a timeout limits every row past its end
    print("| format | h_q | batch | seqlen | µs | TB/s | TFLOP/s | anchor µs | anchor µs / ours | µs, passes "
          "| anchor / worst pass | --unrolled 20 µs | anchor / unrolled |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for i in range(n):
        rows = sorted((p[i] for p in passes), key=lambda c: float(c[4]))
        if len({tuple(r[:4]) for r in rows}) != 1:
            sys.exit(f"row {i + 1}: the passes disagree on the shape: {[r[:4] for r in rows]}")
        mid = rows[(len(rows) - 1) // 2]  # the median pass (the lower middle one for an even count)
        us = [float(r[4]) for r in rows]
        anchor = float(mid[7])
        lo, hi = us[0], us[-1]
        spread = f"{lo:.1f}" if lo == hi else f"{lo:.1f}-{hi:.1f}"
        un = "- | -"
        if i < len(unrolled) and unrolled[i][:4] == mid[:4]:
            u = float(unrolled[i][4])
            un = f"{u:.1f} | {anchor / u:.2f}"
        print(f"| {' | '.join(mid[:4])} | {float(mid[4]):.1f} | {mid[5]} | {mid[6]} | {anchor:.1f} | "
              f"{anchor / float(mid[4]):.2f} | {spread} | {anchor / hi:.2f} | {un} |")


if __name__ == "__main__":
    main()
