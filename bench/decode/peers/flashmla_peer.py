#!/usr/bin/env python3
"""The public FlashMLA decode kernels, timed on this machine exactly as bench_decode times ours.

ANCHORS.md's columns were measured once, on one H200, on 2026-11-29; our own rows move 1.5-2.6 % from one machine of
the pool to the next (bench/decode/NOTES_plan.md session 27). This tool times the peers in the same device call as
bench_decode, so a row's ratio no longer mixes two machines:
  flashmla_bf16  upstream FlashMLA's dense sm90 decode (torch.ops._flashmla_C.dense_decode_fwd), from a source tree
                 of the anchor's 9241ae3 era (csrc/kerutils, csrc/sm90/decode/dense) but compiled by vLLM without
                 --use_fast_math (its SASS wraps each MUFU.EX2 of the softmax in the precise exp2f's FSETP / FMULs;
                 upstream's setup.py builds with fast math). Its kernel alone is 13-100 % slower than 9241ae3's
                 whole call (BENCHMARKS.md "Session 43", "Session 48"): not a stand-in for the "FlashMLA bf16" column
                 (the same source built with upstream's flags runs 3-79 % faster: BENCHMARKS.md "Session 73");
  pr54_fp8       the community FP8 kernel vLLM vendors (torch.ops._flashmla_extension_C.fwd_kvcache_mla_fp8), the
                 "PR54 fp8" column (q and cache e4m3, one scale each, bf16 out): within 0.2-3 % of its anchor;
  pr54_bf16      the same op on bf16 q and cache (the "PR54 bf16" column): this build refuses it.
Both libraries come prebuilt in vLLM 0.26.0's wheel (built for torch 2.11 + CUDA 13, the device's stack):
fetch_vllm_flashmla.sh extracts them; nothing of theirs is in this repository.

Timing (bench/common/timing.cu time_graph_median_us, bench_decode's): every sequence = seqlen, q and K from N(0, 1),
the block table a random permutation of the pages; the scheduling metadata computed once beforehand and reused; one
decode call (split-KV kernel + combine) captured in a CUDA graph; before every launch a cudaMemsetAsync of 256 MB
(byte value i & 0xFF) outside the events; 3 warm-up launches, then the median of --reps.

  python3 flashmla_peer.py --lib-dir DIR [--kernels pr54_fp8,flashmla_bf16] [--rows 1-18] [--reps 30]
                           [--check] [--loop ROW --loop-reps N] [--profile] [--unrolled N [--fill]]
--check first compares each kernel with a float32 reference on small mixed-length cases (a timing of a call that
computes something else would be meaningless). --loop ROW times only that row, N launches (for clock sampling).
--profile lists, per row, the kernels of five eager calls (after the flush) with their device times (torch profiler)
instead of timing. --unrolled N times as bench_decode --unrolled N does (the flush and the call N times in one
graph, minus the flushes alone); --fill makes the flush torch's zero_() (a kernel, as triton's do_bench clears L2).
"""
import argparse
import ctypes
import os
import statistics
import sys

import torch

# (h_q, batch, seqlen): ANCHORS.md's grid in DESIGN.md section 6 order; row i is ROWS[i - 1].
ROWS = [(h, b, s) for h in (16, 128) for b in (1, 32, 128) for s in (512, 4096, 8192)]
PAGE = 64
D_QK, D_V = 576, 512
FLUSH_BYTES = 256 << 20
WARMUP = 3
SCALE = 0.0721687836  # bench_decode's softmax scale (576 ** -0.5 up to rounding)
KERNELS = ("flashmla_bf16", "pr54_bf16", "pr54_fp8")


def load_libs(lib_dir):
    for name in ("_flashmla_C.abi3.so", "_flashmla_extension_C.abi3.so"):
        torch.ops.load_library(os.path.join(lib_dir, name))
    # The libraries were linked against torch's libcudart.so.13, which is loaded now: the flush's memset uses it.
    cudart = ctypes.CDLL("libcudart.so.13")
    cudart.cudaMemsetAsync.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t, ctypes.c_void_p]
    cudart.cudaMemsetAsync.restype = ctypes.c_int
    return cudart


class Row:
    """One shape's inputs: q [b, 1, h_q, 576], cache [pages, 64, 1, 576], block table [b, pages / b] int32."""

    def __init__(self, h_q, batch, seqlens, fp8, gen):
        self.h_q, self.batch = h_q, batch
        self.seqlens = torch.tensor(seqlens, dtype=torch.int32, device="cuda")
        per_seq = max(1, max((s + PAGE - 1) // PAGE for s in seqlens))
        pages = batch * per_seq
        cache = torch.randn(pages, PAGE, 1, D_QK, generator=gen, device="cuda", dtype=torch.bfloat16)
        q = torch.randn(batch, 1, h_q, D_QK, generator=gen, device="cuda", dtype=torch.bfloat16)
        perm = torch.randperm(pages, generator=gen, device="cuda").to(torch.int32)
        self.block_table = perm.view(batch, per_seq).contiguous()
        if fp8:
            self.cache = cache.to(torch.float8_e4m3fn)
            self.q = q.to(torch.float8_e4m3fn)
            del cache, q
            self.descale = torch.ones(1, dtype=torch.float32, device="cuda")
        else:
            self.cache, self.q = cache, q
        self.out = torch.empty(batch, 1, h_q, D_V, dtype=torch.bfloat16, device="cuda")


def make_call(kernel, row):
    """Computes the kernel's metadata once and returns the decode call that reuses it."""
    if kernel == "flashmla_bf16":
        op = torch.ops._flashmla_C.dense_decode_fwd
        _, _, md, ns = op(row.q, row.cache, D_V, row.seqlens, row.block_table, SCALE, False, None, None, row.out)
        return lambda: op(row.q, row.cache, D_V, row.seqlens, row.block_table, SCALE, False, md, ns, row.out)[0]
    meta = torch.ops._flashmla_extension_C.get_mla_decoding_metadata_dense_fp8
    md, ns = meta(row.seqlens, row.h_q, 1)
    op = torch.ops._flashmla_extension_C.fwd_kvcache_mla_fp8
    if kernel == "pr54_fp8":
        return lambda: op(row.q, row.cache, D_V, row.seqlens, row.block_table, SCALE, False, md, ns, row.descale,
                          row.descale)[0]
    return lambda: op(row.q, row.cache, D_V, row.seqlens, row.block_table, SCALE, False, md, ns, None, None)[0]


def reference(row):
    """float32 attention of every sequence over its pages (the kernels' inputs as they hold them)."""
    out = torch.empty(row.batch, 1, row.h_q, D_V, dtype=torch.float32, device="cuda")
    for b in range(row.batch):
        n = int(row.seqlens[b])
        pages = row.block_table[b, : (n + PAGE - 1) // PAGE].long()
        k = row.cache[pages].float().reshape(-1, D_QK)[:n]
        q = row.q[b, 0].float()
        p = torch.softmax(q @ k.T * SCALE, dim=-1)
        out[b, 0] = p @ k[:, :D_V]
    return out


def check(kernels, gen):
    """Small mixed-length cases against the float32 reference; returns False if any kernel is off."""
    ok = True
    for kernel in kernels:
        for h_q in (16, 128):
            row = Row(h_q, 3, [1, 700, 3000], kernel == "pr54_fp8", gen)
            try:
                got = make_call(kernel, row)().float()
            except RuntimeError as e:  # e.g. a build that rejects this dtype: say so, check the others
                print(f"check {kernel} h_q {h_q}: FAIL, the call raised: {str(e).splitlines()[0]}", flush=True)
                ok = False
                continue
            want = reference(row)
            rel = float((got - want).norm() / want.norm())
            # bf16 output of an fp32-accumulated product: ~2e-3; fp8 quantizes P to e4m3 as well (ANCHORS.md
            # "Accuracy": 1.1e-2..1.8e-2 against the same quantized inputs).
            limit = 4e-2 if kernel == "pr54_fp8" else 1e-2
            good = rel < limit and torch.isfinite(got).all().item()
            ok &= bool(good)
            print(f"check {kernel} h_q {h_q} seqlens [1, 700, 3000]: rel_l2 {rel:.2e} (limit {limit:.0e}) "
                  f"{'ok' if good else 'FAIL'}", flush=True)
            del row
    return ok


def memset_flush(cudart, flush, i, stream):
    """bench_decode's flush before call i: cudaMemsetAsync of the 256 MB buffer with byte i & 0xFF on `stream`."""
    err = cudart.cudaMemsetAsync(ctypes.c_void_p(flush.data_ptr()), i & 0xFF, FLUSH_BYTES, stream.cuda_stream)
    if err != 0:
        raise RuntimeError(f"cudaMemsetAsync failed: {err}")


def warm_up(call, times):
    """Eager calls on a side stream, as graph capture wants before it records the call."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(times):
            call()
    torch.cuda.current_stream().wait_stream(side)


def time_row(kernel, row, reps, cudart, flush):
    call = make_call(kernel, row)
    warm_up(call, 2)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        call()
    stream = torch.cuda.current_stream()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for i in range(reps + WARMUP):
        memset_flush(cudart, flush, i, stream)
        start.record(stream)
        graph.replay()
        stop.record(stream)
        stop.synchronize()
        if i >= WARMUP:
            times.append(start.elapsed_time(stop) * 1e3)
    return statistics.median(times)


def profile_row(kernel, r, row, cudart, flush):
    """The kernels one decode call launches (after the flush, eager, metadata reused) and their device time."""
    call = make_call(kernel, row)
    call()
    torch.cuda.synchronize()
    stream = torch.cuda.current_stream()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for i in range(5):
            memset_flush(cudart, flush, i, stream)
            call()
        torch.cuda.synchronize()
    print(f"profile {kernel} row {r} (5 calls):", flush=True)
    print(prof.key_averages().table(sort_by="device_time_total", row_limit=8), flush=True)


def time_row_unrolled(kernel, row, n, cudart, flush, fill):
    """bench_decode --unrolled N: per-call median of a graph of n x (flush, call) minus one of n x flush (10 replays
    after one). fill: torch's zero_() as the flush (a kernel, as triton's do_bench clears L2) instead of the memset."""
    call = make_call(kernel, row)
    warm_up(call, 1)

    def flush_op(i):
        if fill:
            flush.zero_()
        else:
            memset_flush(cudart, flush, i, torch.cuda.current_stream())

    graphs = []
    for with_call in (True, False):
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            for i in range(n):
                flush_op(i)
                if with_call:
                    call()
        graphs.append(g)
    stream = torch.cuda.current_stream()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    per_call = []
    for g in graphs:
        t = []
        for i in range(11):
            start.record(stream)
            g.replay()
            stop.record(stream)
            stop.synchronize()
            if i > 0:
                t.append(start.elapsed_time(stop) * 1e3 / n)
        per_call.append(statistics.median(t))
    return per_call[0] - per_call[1]


def parse_rows(text):
    rows = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        rows += range(int(lo), int(hi or lo) + 1)
    if not rows or min(rows) < 1 or max(rows) > len(ROWS):
        raise SystemExit(f"--rows wants numbers in 1-{len(ROWS)}; got '{text}'")
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lib-dir", required=True)
    # PR54 only by default: the wheel's FlashMLA bf16 is not the anchor's kernel (see the docstring).
    ap.add_argument("--kernels", default="pr54_fp8")
    ap.add_argument("--rows", default="1-18")
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--seed", type=int, default=4242)
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--loop", type=int, default=0, help="time only this row, --loop-reps launches")
    ap.add_argument("--loop-reps", type=int, default=5000)
    ap.add_argument("--profile", action="store_true", help="list each row's kernels and their device times (eager)")
    ap.add_argument("--unrolled", type=int, default=0, help="bench_decode --unrolled N: graph of N x (flush, call)")
    ap.add_argument("--fill", action="store_true", help="with --unrolled: flush by torch's zero_() (a kernel)")
    a = ap.parse_args()
    kernels = a.kernels.split(",")
    for k in kernels:
        if k not in KERNELS:
            raise SystemExit(f"--kernels: unknown '{k}' (known: {', '.join(KERNELS)})")
    cudart = load_libs(a.lib_dir)
    gen = torch.Generator(device="cuda")
    gen.manual_seed(a.seed)
    if a.check and not check(kernels, gen):
        sys.exit(1)
    flush = torch.empty(FLUSH_BYTES, dtype=torch.uint8, device="cuda")
    rows = [a.loop] if a.loop else parse_rows(a.rows)
    reps = a.loop_reps if a.loop else a.reps
    if a.unrolled:
        method = (f"--unrolled {a.unrolled}: graph of {a.unrolled} x (256 MB {'zero_()' if a.fill else 'memset'}, call) "
                  f"minus one of the flushes alone, per call, median of 10 replays")
    else:
        method = f"median of {reps} after {WARMUP} warm-up, 256 MB memset before each launch"
    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}, {method}", flush=True)
    print("| kernel | row | h_q | batch | seqlen | us |")
    print("|---|---|---|---|---|---|")
    for kernel in kernels:
        for r in rows:
            h_q, batch, seqlen = ROWS[r - 1]
            row = Row(h_q, batch, [seqlen] * batch, kernel == "pr54_fp8", gen)
            if a.profile:
                profile_row(kernel, r, row, cudart, flush)
                continue
            if a.unrolled:
                us = time_row_unrolled(kernel, row, a.unrolled, cudart, flush, a.fill)
            else:
                us = time_row(kernel, row, reps, cudart, flush)
            print(f"| {kernel} | {r} | {h_q} | {batch} | {seqlen} | {us:.1f} |", flush=True)
            del row
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
