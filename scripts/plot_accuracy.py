#!/usr/bin/env python3
"""Plot mla_accuracy's CSV: relative L2 error of the decode output per KV-cache format.

usage: scripts/plot_accuracy.py accuracy.csv docs/accuracy.png   (needs matplotlib)
"""
import csv
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main(src: str, dst: str) -> None:
    rows = list(csv.DictReader(open(src)))
    formats = list(dict.fromkeys(r["format"] for r in rows))
    series = defaultdict(dict)  # (data, h_q) -> format -> error
    for r in rows:
        series[(r["data"], r["h_q"])][r["format"]] = float(r["out_rel_l2"])
    fig, ax = plt.subplots(figsize=(9, 4.5))
    width = 0.8 / len(series)
    for k, (key, errs) in enumerate(sorted(series.items())):
        xs = [i + (k - (len(series) - 1) / 2) * width for i in range(len(formats))]
        ax.bar(xs, [errs.get(f, float("nan")) for f in formats], width, label=f"{key[0]}, h_q {key[1]}")
    ax.set_xticks(range(len(formats)), formats, rotation=15)
    ax.set_yscale("log")
    ax.set_ylabel("relative L2 error of out vs float64")
    ax.set_title("MLA decode: error by KV-cache format (unquantized inputs as reference)")
    ax.axhline(1.5e-2, color="gray", ls="--", lw=0.8)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(dst, dpi=110)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
