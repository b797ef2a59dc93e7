#!/usr/bin/env python3
"""Per-CTA ends of bench_decode --timeline stderr (64-row kernels: mark 4 first page landed, mark 8 CTA done), by SM.

Per row (h, b, s) of each file: CTA ends (min / median / max), each CTA's streaming rate (m8 - m4) / pages (us per
page, plan pages), the SMs whose rate is >= 2.5 % above the median ("slow"), and what a perfect balance of the same
pages over the same per-CTA rates would end at (median first page + sum(pages) / sum(1 / rate)). A CTA's rate
includes its fixed costs (last epilogue, CTA end) spread over its pages, so the `over` term below is 0 by construction
and the bound charges those costs per page: CTAs with few pages look slower than they stream.
With several files (or rows), the overlap of the slow-SM sets says whether slowness follows the SM id.
Usage: tl_tail.py FILE.err [...]"""
import re
import statistics as st
import sys
from collections import defaultdict

LINE = re.compile(r"tl h(\d+) b(\d+) s(\d+) decode (\d+) sm (\d+) pages (\d+) pieces (\d+) start ([-\d.]+) "
                  r"chain ([-\d.]+) walked ([-\d.]+)(.*)")


def load(path):
    rows = defaultdict(list)
    for line in open(path, errors="replace"):
        m = LINE.match(line)
        if not m:
            continue
        marks = {int(k): float(v) for k, v in re.findall(r"m(\d+) ([-\d.]+)", m.group(11))}
        rows["h%s b%s s%s" % m.group(1, 2, 3)].append(dict(
            cta=int(m.group(4)), sm=int(m.group(5)), pages=int(m.group(6)), start=float(m.group(8)),
            walked=float(m.group(10)), marks=marks))
    return rows


def summarize(tag, ctas):
    c = [x for x in ctas if x["pages"] > 0 and 4 in x["marks"]]
    if not c:
        return None
    for x in c:
        x["end"] = x["marks"].get(8, x["walked"])
        x["rate"] = (x["end"] - x["marks"][4]) / x["pages"]
    ends = [x["end"] for x in c]
    med_rate = st.median(x["rate"] for x in c)
    slow = sorted(x["sm"] for x in c if x["rate"] >= 1.025 * med_rate)
    first = st.median(x["marks"][4] for x in c)
    over = st.median(x["end"] - x["marks"][4] - x["pages"] * x["rate"] for x in c)  # 0 by construction of rate
    ideal = first + sum(x["pages"] for x in c) / sum(1.0 / x["rate"] for x in c) + over
    by_pages = defaultdict(list)
    for x in c:
        by_pages[x["pages"]].append(x)
    print("%s: %d CTAs, end min %.1f med %.1f max %.1f | perfect balance ~%.1f (max - that %.1f us) | rate med %.3f "
          "us/page, slow (>= +2.5 %%) %d SMs, their rate med %.3f" % (
              tag, len(c), min(ends), st.median(ends), max(ends), ideal, max(ends) - ideal, med_rate, len(slow),
              st.median([x["rate"] for x in c if x["sm"] in slow]) if slow else float("nan")))
    for pg, xs in sorted(by_pages.items()):
        e = [x["end"] for x in xs]
        r = [x["rate"] for x in xs]
        print("   %4d pages: %3d CTAs, end min %.1f med %.1f max %.1f, rate min %.3f med %.3f max %.3f" % (
            pg, len(xs), min(e), st.median(e), max(e), min(r), st.median(r), max(r)))
    print("   slow SMs: %s" % " ".join(map(str, slow)))
    late = sorted(c, key=lambda x: -x["end"])[:8]
    print("   latest CTAs (cta/sm/pages/end): %s" % "  ".join(
        "%d/%d/%d/%.1f" % (x["cta"], x["sm"], x["pages"], x["end"]) for x in late))
    return dict((x["sm"], x["rate"] / med_rate) for x in c), set(slow)


def main():
    sets = []
    for path in sys.argv[1:]:
        for row, ctas in load(path).items():
            r = summarize("%s %s" % (path.split("/")[-1], row), ctas)
            if r:
                sets.append(("%s %s" % (path.split("/")[-1], row), r[0], r[1]))
    for i in range(len(sets)):
        for j in range(i + 1, len(sets)):
            a, b = sets[i], sets[j]
            inter = len(a[2] & b[2])
            union = len(a[2] | b[2]) or 1
            common = sorted(set(a[1]) & set(b[1]))
            if len(common) > 2:
                xa = [a[1][s] for s in common]
                xb = [b[1][s] for s in common]
                ma, mb = st.mean(xa), st.mean(xb)
                cov = sum((p - ma) * (q - mb) for p, q in zip(xa, xb))
                va = sum((p - ma) ** 2 for p in xa) ** 0.5
                vb = sum((q - mb) ** 2 for q in xb) ** 0.5
                corr = cov / (va * vb) if va > 0 and vb > 0 else float("nan")
            else:
                corr = float("nan")
            print("overlap %s | %s: slow sets %d / %d, common %d (Jaccard %.2f), per-SM rate correlation %.2f" % (
                a[0], b[0], len(a[2]), len(b[2]), inter, inter / union, corr))


if __name__ == "__main__":
    main()
