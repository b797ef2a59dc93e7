#!/usr/bin/env python3
"""Summarizes bench_decode --timeline stderr of the 16-bit 64-row kernel (kernel_ws.cuh, marks of timeline_ws64.cuh).

Per row (h, b, s), medians over the CTAs with a non-empty part (us after the CTA's own start unless 'abs'):
Q0 landed (m9), first page (m4), first S (m5), per page ((m7 - m5) / (pages - 1): first S to the last epilogue's
start), last epilogue -> CTA done (m8 - m7), epilogue sum (m13), segment starts (m14), P-ready waits (m15); CTA
done abs min / med / max, and the combine's waited / done (abs) against the last decode CTA.
Usage: tl_ws64.py FILE.err[.gz] ..."""
import gzip
import re
import statistics as st
import sys
from collections import defaultdict


def med(v):
    return st.median(v) if v else float("nan")


def summarize(path):
    op = gzip.open if path.endswith(".gz") else open
    rows, comb = defaultdict(list), defaultdict(list)
    for line in op(path, "rt"):
        m = re.match(r"tl h(\d+) b(\d+) s(\d+) decode \d+ sm \d+ pages (\d+) pieces (\d+) start ([-\d.]+) chain "
                     r"[-\d.]+ walked [-\d.]+(.*)", line)
        if m:
            marks = {int(k): float(v) for k, v in re.findall(r"m(\d+) ([-\d.]+)", m.group(7))}
            rows[m.group(1, 2, 3)].append((int(m.group(4)), int(m.group(5)), float(m.group(6)), marks))
            continue
        m = re.match(r"tl h(\d+) b(\d+) s(\d+) combine \d+ sm \d+ in ([-\d.]+) waited ([-\d.]+) done ([-\d.]+)", line)
        if m:
            comb[m.group(1, 2, 3)].append(tuple(float(x) for x in m.group(4, 5, 6)))
    print(f"# {path}")
    print("| row | CTAs | pages med | Q0 | page0 | S0 | us/page | epi->done | epi sum | seg starts | P-ready | "
          "done abs min/med/max | combine waited max / done max (after last CTA) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for key, ctas in rows.items():
        c = [x for x in ctas if x[0] > 0 and 8 in x[3]]
        if not c:
            continue
        rel = lambda k: [x[3][k] - x[2] for x in c if k in x[3]]
        step = [(x[3][7] - x[3][5]) / (x[0] - 1) for x in c if x[0] > 1 and 7 in x[3] and 5 in x[3]]
        e2d = [x[3][8] - x[3][7] for x in c if 7 in x[3]]
        done = [x[3][8] for x in c]
        cb = comb.get(key, [])
        last = max(done)
        cw = max(y[1] for y in cb) - last if cb else float("nan")
        cd = max(y[2] for y in cb) - last if cb else float("nan")
        print(f"| h{key[0]} b{key[1]} s{key[2]} | {len(c)} | {med([x[0] for x in c])} | {med(rel(9)):.2f} | "
              f"{med(rel(4)):.2f} | {med(rel(5)):.2f} | {med(step):.3f} | {med(e2d):.2f} | {med(rel(13)):.2f} | "
              f"{med(rel(14)):.2f} | {med(rel(15)):.2f} | {min(done):.1f} / {med(done):.1f} / {last:.1f} | "
              f"{cw:+.1f} / {cd:+.1f} (done {max(y[2] for y in cb) if cb else float('nan'):.1f}) |")


for p in sys.argv[1:]:
    summarize(p)
