#!/usr/bin/env python3
"""Averages the WSPH lines of a -DMLA_DECODE_PHASES build of bench_decode (src/ops/cuda/sm90/decode/phase_sums.cuh).

Usage: bench_decode --format fp8 --rows 14-18 --reps 30 | python3 scripts/ws_phases_summary.py [--kernel fp8|ws64]
                                                                                                 [--per-warp]
  --kernel fp8  (default) the fp8 64-row kernel's phases (decode_fp8/phases_ws.cuh; producer side = V^T transposers)
  --kernel ws64 the 16-bit / fp8_ds 64-row kernel's phases (decode/phases_ws64.cuh; producer side = the TMA thread)
  --kernel ws3_16 the 16-bit scorer split (bench/decode/patches/ws3_scorer_split.patch, -DMLA_WS3=1): scorer "wg 0"
                (slots 0-7), accumulator 0 "wg 1" (slots 8-15)
  --kernel ws3  the fp8 scorer-split kernel's (decode_fp8/phases_ws.cuh Ws3Phase; run bench_decode with
                MLA_DECODE_FP8_VARIANT64=ws3): the scorer ("wg 0", slots 0-8) and accumulator 0 ("wg 1", slots 9-15)
                on separate lines, the transposers as the producer side
  --per-warp    also one line per consumer warp and per producer-side warp (a build with -DMLA_DECODE_PHASES_PER_WARP
                stores every warp's sums; otherwise only warp 0 of each consumer warpgroup's and the producer side's
                first timing warp's); the first line of a row averages every consumer line printed (all warps in such
                a build), the producer-side line its first warp's (as without the flag)
Device printf lines come out at the bench's synchronizations, before the table row of their decode calls: each row's
lines are the ones printed since the previous row. Prints, per row, the mean SM cycles per own page of every consumer
phase (both warpgroups, the three sampled CTAs, every call of the row) and per page of every producer-side phase.
"""
import argparse
import re
import sys

NAMES = {
    "fp8": (["k_full wait", "S issue", "P(j-1) wait", "S tail", "rescale", "V^T(j-1) wait", "PV(j-1) issue",
             "releases", "softmax", "vote+signal", "V^T(j) wait", "PV(j) issue", "PV(j-1) wait", "PV(j) drain",
             "between own pages", "sequence switch"],
            ["vt_empty wait", "k_full wait", "transpose", "loop"], None),  # producer side = the V^T transposers
    "ws3": (["scorer: top / Q wait", "k_full wait", "S issue", "P(j-1) signal", "S wait", "release + lengths",
             "P slot wait", "softmax", "fence", "acc: P wait", "rescale", "V^T wait", "PV issue", "PV wait",
             "release", "loop / epilogue"],
            ["vt_empty wait", "k_full wait", "transpose", "loop"],
            # (warpgroup of the lines, role, its slots): the two roles print separately
            ((0, "scorer", 0, 9), (1, "accumulator 0", 9, 16))),
    "ws3_16": (["scorer: top / Q wait", "early signal + tail zero", "S (slab waits, issue, deferred signal, wait)",
                "Q release", "softmax", "P / maxima / sums stored + fence", "signal + loop", "-",
                "acc: P wait", "rescale", "PV issue", "PV wait", "release / epilogue", "loop", "go wait", "-"],
               ["Q slot + stage wait", "TMA issue", "loop"],
               ((0, "scorer", 0, 8), (1, "accumulator 0", 8, 16))),
    "ws64": (["P(j-1) wait", "PV(j-1) rescale+issue", "sequence switch", "Q wait (+tail zero)",
              "PV(j-1) wait + S (slab waits, issue, wait)", "Q release", "softmax", "signal",
              "own PV (rescale, issue, wait)", "stage release / epilogue", "between own pages"],
             ["Q slot + stage wait", "TMA issue", "loop"], None),
}


def mean_columns(rows):
    n = len(rows)
    return [sum(r[i] for r in rows) / n for i in range(len(rows[0]))] if n else []


def report(label, cons, prod_warps, names, per_warp):
    if not cons:
        return
    prod = [v for w, v in prod_warps if w == 0]  # the producer side's first timing warp
    cnames, pnames, roles = names
    if roles:
        for wg, role, lo, hi in roles:
            c = mean_columns([v for k, v in cons if k[0] == wg])
            if c:
                print(f"{label}: {role}, {sum(c[lo:hi]):.0f} cycles per page")
                print("  " + ", ".join(f"{name} {v:.0f}" for name, v in zip(cnames[lo:hi], c[lo:hi])))
    else:
        c = mean_columns([v for _, v in cons])[:len(cnames)]
        print(f"{label}: {len(cons)} consumer lines, {sum(c):.0f} cycles per own page")
        print("  " + ", ".join(f"{name} {v:.0f}" for name, v in zip(cnames, c)))
    if prod:
        p = mean_columns(prod)[:len(pnames)]
        print(f"  producer side ({len(prod)} lines, {sum(p):.0f} cycles per page): " +
              ", ".join(f"{name} {v:.0f}" for name, v in zip(pnames, p)))
    if per_warp and not roles:  # ws3 prints its roles above
        for key in sorted({k for k, _ in cons}):
            w = mean_columns([v for k, v in cons if k == key])[:len(cnames)]
            print(f"  warpgroup {key[0]} warp {key[1]}: {sum(w):.0f} | " +
                  ", ".join(f"{name} {v:.0f}" for name, v in zip(cnames, w)))
    if per_warp:
        for warp in sorted({w for w, _ in prod_warps}):
            p = mean_columns([v for w, v in prod_warps if w == warp])[:len(pnames)]
            print(f"  producer-side warp {warp}: {sum(p):.0f} | " +
                  ", ".join(f"{name} {v:.0f}" for name, v in zip(pnames, p)))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kernel", choices=sorted(NAMES), default="fp8")
    ap.add_argument("--per-warp", action="store_true")
    args = ap.parse_args()
    names = NAMES[args.kernel]
    cons, prod_warps = [], []
    for line in sys.stdin:
        m = re.match(r"WSPH consumer cta \d+ wg (\d+)(?: warp (\d+))? pages (\d+) \| (.*)", line)
        if m:
            if int(m.group(3)) > 0:
                key = (int(m.group(1)), int(m.group(2) or 0))
                cons.append((key, [float(x) for x in m.group(4).split()]))
            continue
        m = re.match(r"WSPH producer cta \d+ (?:warp (\d+) )?pages (\d+) \| (.*)", line)
        if m:
            if int(m.group(2)) > 0:
                prod_warps.append((int(m.group(1) or 0), [float(x) for x in m.group(3).split()]))
            continue
        m = re.match(r"\|\s*(\w+)\s*\|\s*(\d+)\s*\|\s*(\d+)\s*\|\s*(\d+)\s*\|\s*([\d.]+)\s*\|", line)
        if m:
            report(f"{m.group(1)} h_q {m.group(2)} batch {m.group(3)} seqlen {m.group(4)} ({m.group(5)} us in this build)",
                   cons, prod_warps, names, args.per_warp)
            cons, prod_warps = [], []


if __name__ == "__main__":
    main()
