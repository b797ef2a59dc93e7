#!/usr/bin/env python3
# Summarizes bench_decode logs named b_<format>_<variant>_p<pass>.txt in a directory: per format, one row per
# (h_q, batch, seqlen), one column per variant (mean of the passes, pass spread), and the delta to the first variant.
import glob, os, re, sys
from collections import defaultdict

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # bench/decode: bench_rows.py
from bench_rows import bench_rows

d = sys.argv[1]
order = sys.argv[2].split(",") if len(sys.argv) > 2 else None
data = defaultdict(lambda: defaultdict(list))  # (fmt) -> (variant, shape) -> [us]
variants = defaultdict(list)
for path in sorted(glob.glob(os.path.join(d, "b_*_p*.txt"))):
    m = re.match(r"b_(.+)_([^_]+)_p(\d+)\.txt", os.path.basename(path))
    if not m:
        continue
    fmt, var = m.group(1), m.group(2)
    if var not in variants[fmt]:
        variants[fmt].append(var)
    for _, h_q, batch, seqlen, us in bench_rows(path, fmt):
        data[fmt][(var, (h_q, batch, seqlen))].append(us)
for fmt in data:
    vs = [v for v in (order or variants[fmt]) if v in variants[fmt]]
    shapes = sorted({k[1] for k in data[fmt]}, key=lambda s: (s[0], s[1], s[2]))
    print(f"## {fmt} (us, mean of passes [spread]; d = minus {vs[0]})")
    print("| shape | " + " | ".join(vs) + " |")
    for s in shapes:
        base = data[fmt].get((vs[0], s))
        b = sum(base) / len(base) if base else None
        cells = []
        for v in vs:
            x = data[fmt].get((v, s))
            if not x:
                cells.append("-")
                continue
            mean = sum(x) / len(x)
            cell = f"{mean:.2f} [{max(x) - min(x):.1f}]"
            if v != vs[0] and b is not None:
                cell += f" d{mean - b:+.2f}"
            cells.append(cell)
        print(f"| h{s[0]} b{s[1]} s{s[2]} | " + " | ".join(cells) + " |")
    print()
