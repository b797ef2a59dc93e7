#!/usr/bin/env python3
"""Summarizes bench_decode --timeline stderr of the 16-row cp.async kernel (kernel.cuh marks 4-13) per row.

Per row (h, b, s): medians over CTAs of: first page visible after the CTA's start (m4 - start), first S (m5 - m4),
the steady step (m11 - m4) / (pages - 1), the last switch's bubble (m6 - m10: waiting for the new sequence's Q and
first page), the epilogue (m13 - m9 / m13 - m7), the end (m8 - m11), and the spread of CTA ends (m8) against the
combine's done. Usage: tl_analyze.py FILE.err [...]"""
import re
import statistics as st
import sys
from collections import defaultdict


def med(v):
    return st.median(v) if v else float("nan")


def summarize(path):
    rows = defaultdict(list)
    comb = defaultdict(list)
    for line in open(path):
        m = re.match(r"tl h(\d+) b(\d+) s(\d+) decode (\d+) sm (\d+) pages (\d+) pieces (\d+) start ([-\d.]+) chain ([-\d.]+) walked ([-\d.]+)(.*)", line)
        if m:
            marks = {int(k): float(v) for k, v in re.findall(r"m(\d+) ([-\d.]+)", m.group(11))}
            rows[m.group(1, 2, 3)].append(dict(pages=int(m.group(6)), pieces=int(m.group(7)), start=float(m.group(8)),
                                               chain=float(m.group(9)), marks=marks))
            continue
        m = re.match(r"tl h(\d+) b(\d+) s(\d+) combine (\d+) sm \d+ in ([-\d.]+) waited ([-\d.]+) done ([-\d.]+)", line)
        if m:
            comb[m.group(1, 2, 3)].append(tuple(float(x) for x in m.group(5, 6, 7)))
    for key, ctas in rows.items():
        c = [x for x in ctas if 4 in x["marks"] and 8 in x["marks"]]
        if not c:
            continue
        g = lambda f: [f(x) for x in c if f(x) is not None]
        mk = lambda x, k: x["marks"].get(k)
        first = g(lambda x: mk(x, 4) - x["start"])
        s1 = g(lambda x: mk(x, 5) - mk(x, 4) if 5 in x["marks"] else None)
        step = g(lambda x: (mk(x, 11) - mk(x, 4)) / (x["pages"] - 1) if x["pages"] > 1 else None)
        bub = g(lambda x: mk(x, 6) - mk(x, 10) if 6 in x["marks"] and 10 in x["marks"] else None)
        sw = g(lambda x: mk(x, 6) - mk(x, 9) if 6 in x["marks"] and 9 in x["marks"] else None)
        epi = g(lambda x: mk(x, 13) - mk(x, 7) if 7 in x["marks"] and 13 in x["marks"] else None)
        end = g(lambda x: mk(x, 8) - mk(x, 11))
        lastwait = g(lambda x: mk(x, 11) - mk(x, 12))
        ends = g(lambda x: mk(x, 8))
        starts = g(lambda x: x["start"])
        cb = comb.get(key, [])
        cdone = max((d for _, _, d in cb), default=float("nan"))
        cwait = min((w for _, w, _ in cb), default=float("nan"))
        pages = sorted(set(x["pages"] for x in c))
        print(f"h{key[0]} b{key[1]} s{key[2]}: {len(c)} CTAs, pages {pages[0]}-{pages[-1]}; start max {max(starts):.2f}; "
              f"first page +{med(first):.2f} (max {max(first):.2f}); first S +{med(s1):.2f}; step {med(step):.2f}; "
              f"last wait {med(lastwait):.2f}; switch epi->next visible {med(sw):.2f} (wait {med(bub):.2f}, n {len(bub)}); "
              f"last epilogue {med(epi):.2f}; end-after-last-page {med(end):.2f}; CTA done min/med/max "
              f"{min(ends):.2f}/{med(ends):.2f}/{max(ends):.2f}; combine waited {cwait:.2f} done {cdone:.2f}")
        # ends by page count
        byp = defaultdict(list)
        for x in c:
            byp[x["pages"]].append(mk(x, 8))
        print("   ends by pages: " + ", ".join(f"{p}p n{len(v)} {min(v):.1f}/{med(v):.1f}/{max(v):.1f}" for p, v in sorted(byp.items())))


for f in sys.argv[1:]:
    print(f"== {f}")
    summarize(f)
