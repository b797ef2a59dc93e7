#!/usr/bin/env python3
"""What the fp8 decode suite's checks measured, per data class: the numbers its limits are set from.

Reads gpu_test_mla_decode_fp8 logs (one or more: gpu_check.sh's shards) and prints, for each check (out/max|V| rel_l2
and max_abs, out worst row, lse/max(1,|lse|) max_abs, of the cases and of the graph-step cases) and for the notes that
measure without checking (since session 62: the same output against float sums; the spread of each row's split-lse
errors in nats), the median, p99 and max over the cases of each data class -- N(0,1), N(0,1) driven to +-448
(saturating), DeepSeek-like -- and each reference the case was checked against -- "model" (the wgmma kernels: the
reference with the e4m3 wgmma's sums) or "float" (the mma.sync kernels: float sums), from the case's "reference sums:"
note (since session 63; in older logs a case with the "against float sums" note is "model", any other "float") --
with the case that holds the max. The two want different limits once measured: the model takes the wgmma's rounding
out of the comparison, float sums cannot.

usage: fp8_suite_errors.py LOG [LOG ...]
"""
import re
import statistics
import sys

CASE = re.compile(r"^\[case\] mla_decode (\S+) (.+?): n=\d+ rel_l2=([0-9.e+-]+) max_abs=([0-9.e+-]+)")
FLOAT_NOTE = re.compile(r"against float sums: out/max\|V\| rel_l2=([0-9.e+-]+) max_abs=([0-9.e+-]+), worst row "
                        r"([0-9.e+-]+) \(row \d+\), lse max_abs=([0-9.e+-]+)")
SPREAD_NOTE = re.compile(r"split lse spread over weighted pieces: max ([0-9.e+-]+|inf) nats")
NOTE = re.compile(r"^\[note\] mla_decode (\S+): (.*)$")
SUMS_NOTE = re.compile(r"reference sums: (model|float)")


def data_class(name):
    if "_ds" in name:
        return "DeepSeek-like"
    return "saturating" if "_x" in name else "N(0,1)"


def metric_of(what):
    # "out/max|V|", "out worst row", "lse/max(1,|lse|)", and the graph steps' "<tag> out/max|V|" ...
    for base in ("out/max|V|", "out worst row", "lse/max(1,|lse|)"):
        if what.endswith(base):
            return base + (" (graph steps)" if what != base else "")
    return what


def main(paths):
    lines = [line for path in paths for line in open(path, errors="replace")]
    # Each case's reference: its "reference sums:" note, else (older logs) whether it notes its output against float
    # sums, which only the model-checked cases do.
    refs = {}
    for line in lines:
        m = NOTE.match(line)
        if not m:
            continue
        sums = SUMS_NOTE.search(m.group(2))
        if sums:
            refs[m.group(1)] = sums.group(1)
        elif FLOAT_NOTE.search(m.group(2)):
            refs.setdefault(m.group(1), "model")
    values = {}  # (metric, class, reference) -> [(value, case)]

    def add(metric, name, v):
        values.setdefault((metric, data_class(name), refs.get(name, "float")), []).append((v, name))

    for line in lines:
        m = CASE.match(line)
        if m:
            name, what, rel, mx = m.group(1), metric_of(m.group(2)), float(m.group(3)), float(m.group(4))
            if not what.startswith(("out", "lse")):
                continue  # the suite-level and bad-input cases
            if what.startswith("out worst row"):
                add(what, name, rel)  # the worst row's rel_l2 is the check
            elif what.startswith("out/max"):
                add(what + " rel_l2", name, rel)
                add(what + " max_abs", name, mx)
            else:
                add(what + " max_abs", name, mx)
            continue
        m = NOTE.match(line)
        if not m:
            continue
        name, text = m.groups()
        f = FLOAT_NOTE.search(text)
        if f:
            for label, v in zip(("float sums: out rel_l2", "float sums: out max_abs", "float sums: worst row",
                                 "float sums: lse max_abs"), f.groups()):
                add(label, name, float(v))
        s = SPREAD_NOTE.search(text)
        if s:
            add("split lse spread (nats)", name, float(s.group(1)))
    print("| check or note | data | reference | cases | median | p99 | max | case of the max |")
    print("|---|---|---|---|---|---|---|---|")
    for (metric, cls, ref) in sorted(values):
        v = sorted(values[(metric, cls, ref)])
        nums = [x[0] for x in v]
        p99 = nums[min(len(nums) - 1, int(0.99 * len(nums)))]
        print(f"| {metric} | {cls} | {ref} | {len(nums)} | {statistics.median(nums):.2e} | {p99:.2e} | "
              f"{nums[-1]:.2e} | {v[-1][1]} |")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
