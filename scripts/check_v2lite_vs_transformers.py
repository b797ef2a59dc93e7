#!/usr/bin/env python3
# Full-size DeepSeek-V2-Lite: mlaserve's CUDA model against Hugging Face transformers (issue 7's GPU test:
# logits of 4 prompts x 256 tokens within 3e-2 relative, >= 98 % top-1 agreement).
#
#  1. transformers (5.17, DeepseekV2ForCausalLM) builds V2-Lite (15.7 B parameters) on the GPU with random
#     weights of make_fixtures.py's scale, rounded to bf16, and saves them as a sharded bf16 checkpoint
#     (safetensors + index json + config.json) under --work.
#  2. transformers' logits for P random prompts x T tokens, teacher forced (one forward of the whole batch):
#     in fp32 from the bf16-rounded weights (the reference) and in bf16 (transformers' own bf16 run: the
#     noise floor a bf16 implementation sits at).
#  3. mla_model_logits (tools/model_logits) loads the checkpoint directory and writes its logits for the same
#     ids: whole-prompt prefill, and prefill of the first half then one-token decode steps (the absorbed decode
#     path over the paged cache), for each --kv-cache-dtype.
#  4. Per prompt: relative L2 error (over all T x V logits of the prompt), top-1 agreement, max |diff|; a
#     markdown table and a JSON file under --out.
#
# On the H200 (python3 there has torch 2.11 + transformers 5.17 + safetensors):
#   python3 scripts/check_v2lite_vs_transformers.py --bin build/gpu-h3b/mla_model_logits --out $OUT/v2lite
# Tried on a machine without a GPU on the tiny fixture shape (a minute):
#   python3 scripts/check_v2lite_vs_transformers.py --preset tiny --device cpu --prompts 4 --tokens 96 \
#       --bin build-h3b/bin/mla_model_logits --bin-device cpu --kv auto --work /tmp/v2tiny --out /tmp/v2tiny/out
import argparse
import gc
import json
import math
import os
import shutil
import subprocess
import sys
import time

import torch
from safetensors.torch import load_file, save_file
from transformers import DeepseekV2Config, DeepseekV2ForCausalLM

T0 = time.time()
LOG = None


def log(msg):
    line = f"[{time.time() - T0:7.1f} s] {msg}"
    print(line, flush=True)
    if LOG:
        LOG.write(line + "\n")
        LOG.flush()


# DeepSeek-V2-Lite's published config.json (= the C++ preset deepseek-v2-lite).
V2_LITE = dict(
    vocab_size=102400, hidden_size=2048, num_hidden_layers=27, num_attention_heads=16, num_key_value_heads=16,
    max_position_embeddings=163840, q_lora_rank=None, kv_lora_rank=512, qk_nope_head_dim=128, qk_rope_head_dim=64,
    v_head_dim=128, intermediate_size=10944, moe_intermediate_size=1408, n_routed_experts=64, n_shared_experts=2,
    num_experts_per_tok=6, first_k_dense_replace=1, moe_layer_freq=1, norm_topk_prob=False,
    routed_scaling_factor=1.0, topk_method="greedy", n_group=1, topk_group=1, rms_norm_eps=1e-6,
    tie_word_embeddings=False, bos_token_id=100000, eos_token_id=100001, pad_token_id=None,
    rope_parameters=dict(rope_type="yarn", rope_theta=10000.0, factor=40.0, original_max_position_embeddings=4096,
                         beta_fast=32.0, beta_slow=1.0, mscale=0.707, mscale_all_dim=0.707),
)
# make_fixtures.py's "tiny" (= preset tiny): for trying this script without a GPU.
TINY = dict(V2_LITE, vocab_size=512, hidden_size=128, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=4, max_position_embeddings=2048, intermediate_size=256, moe_intermediate_size=64,
            n_routed_experts=8, n_shared_experts=2, num_experts_per_tok=3, bos_token_id=0, eos_token_id=1,
            rope_parameters=dict(V2_LITE["rope_parameters"], factor=4.0, original_max_position_embeddings=512))
PRESETS = {"v2-lite": V2_LITE, "tiny": TINY}


def init_weights(model, seed):
    # make_fixtures.py's scale, not HF's (std 0.02 makes every logit ~0): unit-variance embeddings and
    # projections (1/sqrt(fan_in), the last dim; the fused experts are [E, out, in]), norm weights near 1,
    # a sharper router (2/sqrt(hidden)) so routing is far from ties. Values are drawn in fp32 and rounded
    # to the model's dtype (bf16): the saved checkpoint holds exactly the weights the fp32 reference uses.
    dev = next(model.parameters()).device
    gen = torch.Generator(device=dev).manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            x = torch.randn(p.shape, generator=gen, device=dev, dtype=torch.float32)
            if name.endswith("norm.weight"):
                x = 1.0 + 0.1 * x
            elif "embed_tokens" in name:
                pass
            elif name.endswith("mlp.gate.weight"):
                x *= 2.0 / math.sqrt(p.shape[-1])
            else:
                x /= math.sqrt(p.shape[-1])
            p.copy_(x)
            del x


def router_margins(model):
    # Hooks on every MoE router: the gap between the k-th and (k+1)-th routing probability of every token.
    # Tokens whose gap is below bf16's noise may route differently in a bf16 implementation.
    gaps = []

    def hook(mod, inp, out):
        x = inp[0].reshape(-1, inp[0].shape[-1]).float()
        s = torch.softmax(x @ mod.weight.float().t(), dim=-1).sort(-1, descending=True).values
        gaps.append((s[:, mod.top_k - 1] - s[:, mod.top_k]).cpu())

    handles = [m.register_forward_hook(hook) for n, m in model.named_modules() if n.endswith("mlp.gate")]
    return gaps, handles


def logit_stats(logits):
    # Spread of the reference logits, so a degenerate model (all logits equal, ties everywhere) is visible.
    flat = logits.reshape(-1, logits.shape[-1]).float()
    top2 = flat.topk(2, dim=-1).values
    gap = top2[:, 0] - top2[:, 1]
    return dict(row_std_mean=flat.std(-1).mean().item(), row_max_mean=top2[:, 0].mean().item(),
                top2_gap_mean=gap.mean().item(), top2_gap_median=gap.median().item(),
                rows_gap_below_1em2=int((gap < 1e-2).sum()), rows=int(flat.shape[0]),
                finite=bool(torch.isfinite(flat).all()))


def reference(args, cfg_kw, dev):
    """Steps 1 and 2; frees the GPU before returning."""
    cfg = DeepseekV2Config(**cfg_kw)
    torch.backends.cuda.matmul.allow_tf32 = False  # the fp32 reference is fp32 arithmetic
    torch.backends.cudnn.allow_tf32 = False
    torch.manual_seed(args.seed)
    with torch.device(dev):
        model = DeepseekV2ForCausalLM._from_config(cfg, dtype=torch.bfloat16).eval()
    log(f"built {type(model).__name__} on {dev}: {sum(p.numel() for p in model.parameters()) / 1e9:.2f} B parameters, "
        f"attn {model.config._attn_implementation}")
    init_weights(model, args.seed)
    gen = torch.Generator().manual_seed(args.seed + 1)
    ids = torch.randint(0, cfg.vocab_size, (args.prompts, args.tokens), generator=gen, dtype=torch.int64)
    save_file({"input_ids": ids.contiguous()}, os.path.join(args.work, "prompts.safetensors"))
    log("weights initialised (bf16-exact); prompts drawn")

    ckpt = os.path.join(args.work, "ckpt")
    shutil.rmtree(ckpt, ignore_errors=True)
    model.save_pretrained(ckpt, safe_serialization=True, max_shard_size=args.max_shard_size)
    gc_path = os.path.join(ckpt, "generation_config.json")
    if os.path.exists(gc_path):
        os.remove(gc_path)
    files = sorted(os.listdir(ckpt))
    size = sum(os.path.getsize(os.path.join(ckpt, f)) for f in files)
    log(f"saved {ckpt}: {len(files)} files, {size / 1e9:.1f} GB ({', '.join(files[:3])}{', ...' if len(files) > 3 else ''})")

    with torch.no_grad():
        x = ids.to(dev)
        out = model(x)
        ref_bf16 = out.logits.float().cpu()
        del out
        log(f"transformers bf16 forward of {args.prompts} x {args.tokens}: done")
        model.float()  # the bf16 values, now fp32 arithmetic
        if dev.type == "cuda":
            torch.cuda.synchronize()
            log(f"converted to fp32: {torch.cuda.memory_allocated() / 2**30:.1f} GiB allocated")
        gaps, handles = router_margins(model)
        out = model(x, output_hidden_states=True)
        for h in handles:
            h.remove()
        ref = out.logits.float().cpu()
        hidden_rms = [h.float().pow(2).mean().sqrt().item() for h in out.hidden_states]
        del out
    gaps = torch.cat(gaps)
    peak = torch.cuda.max_memory_allocated() / 2**30 if dev.type == "cuda" else 0.0
    info = dict(logits=logit_stats(ref), residual_rms_per_layer=[round(v, 3) for v in hidden_rms],
                router_gap_min=gaps.min().item(), router_decisions=int(gaps.numel()),
                router_gaps_below_1em3=int((gaps < 1e-3).sum()), router_gaps_below_1em4=int((gaps < 1e-4).sum()),
                gpu_peak_gib=round(peak, 1))
    log(f"transformers fp32 forward: done; reference {json.dumps(info['logits'])}")
    log(f"residual rms by layer: {info['residual_rms_per_layer']}")
    log(f"router: {info['router_decisions']} top-k decisions, min gap {info['router_gap_min']:.2e}, "
        f"{info['router_gaps_below_1em3']} below 1e-3, {info['router_gaps_below_1em4']} below 1e-4; GPU peak {peak:.1f} GiB")
    save_file({"logits": ref.contiguous()}, os.path.join(args.work, "ref_fp32.safetensors"))
    save_file({"logits": ref_bf16.contiguous()}, os.path.join(args.work, "ref_bf16.safetensors"))
    del model
    gc.collect()
    if dev.type == "cuda":
        torch.cuda.empty_cache()
    return info


def compare(got, ref, rows_from=0, dev=torch.device("cpu")):
    # got, ref: [P, T, V] float32; rows_from: compare positions >= rows_from only. In float64 on `dev`.
    g, r = got[:, rows_from:].to(dev).double(), ref[:, rows_from:].to(dev).double()
    per = []
    for p in range(g.shape[0]):
        d = g[p] - r[p]
        gi, ri = g[p].argmax(-1), r[p].argmax(-1)
        miss = gi != ri
        # Misses whose reference margin (its winner over ours) is within 3 sigma of the noise that row's own
        # RMS logit error e puts on a difference of two logits (sqrt(2)·e): the rule of
        # tests/gpu/test_model_forward.cu, reported beside the raw rate, which is the number judged here.
        margin = (r[p].gather(-1, ri[:, None]) - r[p].gather(-1, gi[:, None]))[:, 0]
        e = d.pow(2).mean(-1).sqrt()
        noise = int((miss & (margin < 3 * math.sqrt(2) * e)).sum())
        per.append(dict(rel_l2=(d.norm() / r[p].norm()).item(), top1=(~miss).double().mean().item(),
                        max_abs=d.abs().max().item(), misses=int(miss.sum()), noise_misses=noise,
                        row_rms_err_mean=e.mean().item(),
                        rows=int(g.shape[1]), nonfinite=int((~torch.isfinite(g[p])).sum())))
    d = g - r
    total = dict(rel_l2=(d.norm() / r.norm()).item(), top1=sum(x["top1"] * x["rows"] for x in per) / sum(x["rows"] for x in per),
                 max_abs=max(x["max_abs"] for x in per), misses=sum(x["misses"] for x in per),
                 nonfinite=sum(x["nonfinite"] for x in per))
    return dict(per_prompt=per, all=total)


def run_ours(args):
    cmd = [args.bin, "--model", os.path.join(args.work, "ckpt"), "--prompts", os.path.join(args.work, "prompts.safetensors"),
           "--out", os.path.join(args.work, "ours"), "--device", args.bin_device, "--kv-cache-dtype", args.kv]
    if args.decode_from > 0:
        cmd += ["--decode-from", str(args.decode_from)]
    log("running " + " ".join(cmd))
    env = dict(os.environ, LD_LIBRARY_PATH="/usr/local/cuda/lib64:" + os.environ.get("LD_LIBRARY_PATH", ""))
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    for line in p.stdout:
        log("  ours: " + line.rstrip())
    return p.wait()


def main():
    global LOG
    ap = argparse.ArgumentParser()
    ap.add_argument("--preset", choices=sorted(PRESETS), default="v2-lite")
    ap.add_argument("--device", default="cuda", help="where transformers runs")
    ap.add_argument("--prompts", type=int, default=4)
    ap.add_argument("--tokens", type=int, default=256)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--work", default="/tmp/v2lite", help="checkpoint, prompts and logits (31 GB for V2-Lite)")
    ap.add_argument("--out", required=True, help="report directory (log, JSON, markdown)")
    ap.add_argument("--bin", required=True, help="mla_model_logits")
    ap.add_argument("--bin-device", default="cuda")
    ap.add_argument("--kv", default="auto,fp8", help="--kv-cache-dtype list for mla_model_logits")
    ap.add_argument("--decode-from", type=int, default=-1, help="prefill this many tokens, decode the rest (-1: T/2, 0: off)")
    ap.add_argument("--max-shard-size", default="4GB")
    args = ap.parse_args()
    if args.decode_from < 0:
        args.decode_from = args.tokens // 2
    os.makedirs(args.work, exist_ok=True)
    os.makedirs(args.out, exist_ok=True)
    LOG = open(os.path.join(args.out, "check.log"), "w")
    dev = torch.device(args.device)
    log(f"torch {torch.__version__}, transformers {__import__('transformers').__version__}, device {dev}"
        + (f" ({torch.cuda.get_device_name(dev)})" if dev.type == "cuda" else ""))

    report = dict(preset=args.preset, prompts=args.prompts, tokens=args.tokens, seed=args.seed, decode_from=args.decode_from)
    report["reference"] = reference(args, PRESETS[args.preset], dev)
    ref = load_file(os.path.join(args.work, "ref_fp32.safetensors"))["logits"]
    ref_bf16 = load_file(os.path.join(args.work, "ref_bf16.safetensors"))["logits"]
    results = {"transformers bf16": compare(ref_bf16, ref, dev=dev)}

    rc = run_ours(args)
    report["ours_rc"] = rc
    for kv in args.kv.split(","):
        for mode in ["prefill", "decode"]:
            path = os.path.join(args.work, f"ours.{kv}.{mode}.safetensors")
            if not os.path.exists(path):
                continue
            got = load_file(path)["logits"]
            if got.shape != ref.shape:
                log(f"{path}: shape {tuple(got.shape)} != reference {tuple(ref.shape)}")
                continue
            results[f"mlaserve {kv} {mode}"] = compare(got, ref, dev=dev)
            if mode == "decode":
                results[f"mlaserve {kv} decode rows only (pos >= {args.decode_from})"] = compare(got, ref, args.decode_from, dev)
            results[f"mlaserve {kv} {mode} vs transformers bf16"] = compare(got, ref_bf16, dev=dev)
            log(f"compared {path}")
    report["results"] = results

    lines = [f"{args.preset}, {args.prompts} prompts x {args.tokens} tokens, against transformers fp32 (bf16-rounded weights)"
             f" unless stated", "", "| run | prompt | rel L2 | top-1 | max abs | misses (within 3 sigma of the row's error) |", "|---|---|---|---|---|---|"]
    for name, r in results.items():
        for i, x in enumerate(r["per_prompt"]):
            lines.append(f"| {name} | {i} | {x['rel_l2']:.3e} | {100 * x['top1']:.2f} % | {x['max_abs']:.3f} | "
                         f"{x['misses']} ({x['noise_misses']}) |")
        a = r["all"]
        lines.append(f"| {name} | all | {a['rel_l2']:.3e} | {100 * a['top1']:.2f} % | {a['max_abs']:.3f} | {a['misses']} |")
    table = "\n".join(lines)
    with open(os.path.join(args.out, "report.md"), "w") as f:
        f.write(table + "\n")
    with open(os.path.join(args.out, "report.json"), "w") as f:
        json.dump(report, f, indent=1)
    log("\n" + table)
    # The bar, on whole-prompt prefill with the bf16 cache (fp8 and decode reported).
    key = "mlaserve auto prefill"
    ok = rc == 0 and key in results and all(x["rel_l2"] <= 3e-2 and x["top1"] >= 0.98 and x["nonfinite"] == 0
                                            for x in results[key]["per_prompt"])
    log(f"issue 7 bar (every prompt: rel L2 <= 3e-2, top-1 >= 98 %, finite) on '{key}': {'PASS' if ok else 'FAIL'}")
    # Random weights at full depth: transformers' own bf16 run misses that bar too (bench/model/NOTES_v2lite.md).
    # Relative to it: per prompt, no larger error, no lower top-1, every miss within its row's noise.
    floor = results["transformers bf16"]["per_prompt"]
    if key in results:
        rel_ok = all(x["rel_l2"] <= f["rel_l2"] and x["top1"] >= f["top1"] and x["misses"] == x["noise_misses"]
                     for x, f in zip(results[key]["per_prompt"], floor))
        log(f"against transformers' bf16 floor on '{key}': {'PASS' if rel_ok else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
