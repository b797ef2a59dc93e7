#!/usr/bin/env python3
"""Averages the WSPH lines of a -DMLA_FP8_WS_PHASES build of bench_decode (src/ops/cuda/sm90/decode_fp8/phases_ws.cuh).

Usage: bench_decode --format fp8 --rows 14-18 --reps 30 | python3 scripts/ws_phases_summary.py
Device printf lines come out at the bench's synchronizations, before the table row of their decode calls: each row's
lines are the ones printed since the previous row. Prints, per row, the mean SM cycles per own page of every consumer
phase (both warpgroups, the three sampled CTAs, every call of the row) and per page of every transposer phase.
"""
import re
import sys

CONSUMER = ["k_full wait", "S issue", "P(j-1) wait", "S tail", "rescale", "V^T(j-1) wait", "PV(j-1) issue",
            "releases", "softmax", "vote+signal", "V^T(j) wait", "PV(j) issue", "PV(j-1) wait", "PV(j) drain",
            "between own pages", "sequence switch"]
TRANSPOSER = ["vt_empty wait", "k_full wait", "transpose", "loop"]


def mean_columns(rows):
    n = len(rows)
    return [sum(r[i] for r in rows) / n for i in range(len(rows[0]))] if n else []


def report(label, cons, trans):
    if not cons:
        return
    c = mean_columns(cons)
    print(f"{label}: {len(cons)} consumer lines, {sum(c):.0f} cycles per own page")
    print("  " + ", ".join(f"{name} {v:.0f}" for name, v in zip(CONSUMER, c)))
    if trans:
        t = mean_columns(trans)
        print(f"  transposer ({len(trans)} lines, {sum(t):.0f} cycles per page): " +
              ", ".join(f"{name} {v:.0f}" for name, v in zip(TRANSPOSER, t)))


def main():
    cons, trans = [], []
    for line in sys.stdin:
        m = re.match(r"WSPH consumer cta \d+ wg \d+ pages (\d+) \| (.*)", line)
        if m:
            if int(m.group(1)) > 0:
                cons.append([float(x) for x in m.group(2).split()])
            continue
        m = re.match(r"WSPH transposer cta \d+ pages (\d+) \| (.*)", line)
        if m:
            if int(m.group(1)) > 0:
                trans.append([float(x) for x in m.group(2).split()])
            continue
        if line.startswith("| fp8 |"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            report(f"h_q {cells[1]} batch {cells[2]} seqlen {cells[3]} ({cells[4]} us in this build)", cons, trans)
            cons, trans = [], []


if __name__ == "__main__":
    main()
