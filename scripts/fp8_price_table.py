#!/usr/bin/env python3
"""The price of FP8 per tested shape class, from a gpu_test_mla_decode_fp8 log (issue 4: "the error of fp8 against the
bf16 reference is reported beside each tested shape class").

Each fp8 case whose price check is on prints a note: its kernel's output against the unquantized problem (bf16 q and K
from the same draws, exact softmax), rel_l2 and max_abs in output units. This groups those notes by what sets the price
-- head count, query rows (s_q, causal), the data (N(0,1) or DeepSeek-like), q_scale / k_scale and saturation -- over
every kernel variant a case runs on, and prints one markdown row per class, beside the kernel's own error (against the
quantized CPU reference, the test's check) over the same runs.

usage: fp8_price_table.py gpu_test_mla_decode_fp8.log
"""
import re
import statistics
import sys

CASE = re.compile(r"^\[case\] mla_decode (\S+) out/max\|V\|: n=\d+ rel_l2=([0-9.e+-]+)")
NOTE = re.compile(r"^\[note\] mla_decode (\S+): price of FP8 \(vs bf16 inputs, exact softmax\): "
                  r"out rel_l2=([0-9.e+-]+) max_abs=([0-9.e+-]+)")
NAME = re.compile(r"^fp8_b(\d+)_h(\d+)_sq(\d+)(_causal)?_(.+?)_s([0-9p]+)(?:_k([0-9p]+))?(?:_x([0-9p]+))?(_ds)?(?:_|$)")


def num(tag):
    return float(tag.replace("p", "."))


def main(path):
    classes, own = {}, {}
    lines = open(path, errors="replace").read().splitlines()
    for line in lines:
        m = CASE.match(line)
        if m:
            own[m.group(1)] = float(m.group(2))
    for line in lines:
        m = NOTE.match(line)
        if not m:
            continue
        n = NAME.match(m.group(1))
        if not n:
            print(f"unparsed case name: {m.group(1)}", file=sys.stderr)
            continue
        _, h_q, s_q, causal, _, qs, ks, xs, ds = n.groups()
        q_scale = num(qs)
        k_scale = num(ks) if ks else q_scale
        data_scale = num(xs) if xs else 1.0
        sat = [side for side, sc in (("q", q_scale), ("K", k_scale)) if data_scale / sc > 448]
        key = (int(h_q), int(s_q), bool(causal), "DeepSeek-like" if ds else "N(0,1)",
               f"{q_scale:g} / {k_scale:g}", " + ".join(sat) if sat else "no")
        classes.setdefault(key, []).append((float(m.group(2)), own.get(m.group(1), float("nan")), int(n.group(1))))
    print("| h_q | s_q | causal | data | q_scale / k_scale | driven to ±448 | runs | batches | vs bf16: rel_l2 median | "
          "max | kernel vs quantized ref: median | max |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for key in sorted(classes):
        v = classes[key]
        rel = [x[0] for x in v]
        batches = ",".join(str(b) for b in sorted({x[2] for x in v}))
        h_q, s_q, causal, data, scales, sat = key
        print(f"| {h_q} | {s_q} | {'yes' if causal else 'no'} | {data} | {scales} | {sat} | {len(v)} | {batches} | "
              f"{statistics.median(rel):.2e} | {max(rel):.2e} | {statistics.median(x[1] for x in v):.1e} | "
              f"{max(x[1] for x in v):.1e} |")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
