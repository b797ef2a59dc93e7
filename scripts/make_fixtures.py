#!/usr/bin/env python3
# Builds the tiny DeepSeek-V2 fixtures of tests/fixtures/ with Hugging Face transformers' DeepseekV2:
# random weights (rounded to bf16 and saved as bf16 safetensors), the config.json that transformers
# writes, and transformers' fp32 logits for a few prompts (logits.safetensors). The C++ CPU backend must
# reproduce those logits (tests/cpu/test_model_fixtures.cpp).
#
# Pinned: torch==2.11.0 transformers==5.17.0 safetensors==0.8.0 numpy (CPU is enough; ~15 s). Output is bit-reproducible.
#   python3 -m venv /tmp/fxenv && /tmp/fxenv/bin/pip install torch==2.11.0 transformers==5.17.0 safetensors
#   /tmp/fxenv/bin/python scripts/make_fixtures.py [--out tests/fixtures]
#
# Two models, each kv_lora_rank 512 and qk_rope_head_dim 64 (the real latent), d_qk 192, d_v 128:
#   tiny        V2-Lite shape: q_proj, greedy softmax top-k routing          (= C++ preset "tiny")
#   tiny-qlora  V2 shape: q_a_proj/q_a_layernorm/q_b_proj, group-limited routing (= preset "tiny-qlora")
import argparse
import json
import math
import os

import torch
from safetensors.torch import save_file
from transformers import DeepseekV2Config, DeepseekV2ForCausalLM

COMMON = dict(
    vocab_size=512, hidden_size=128, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4,
    max_position_embeddings=2048, kv_lora_rank=512, qk_nope_head_dim=128, qk_rope_head_dim=64, v_head_dim=128,
    intermediate_size=256, moe_intermediate_size=64, n_routed_experts=8, n_shared_experts=2,
    num_experts_per_tok=3, first_k_dense_replace=1, moe_layer_freq=1, norm_topk_prob=False,
    rms_norm_eps=1e-6, tie_word_embeddings=False, bos_token_id=0, eos_token_id=1, pad_token_id=None,
    rope_parameters=dict(rope_type="yarn", rope_theta=10000.0, factor=4.0, original_max_position_embeddings=512,
                         beta_fast=32.0, beta_slow=1.0, mscale=0.707, mscale_all_dim=0.707),
)
MODELS = {
    "tiny": dict(q_lora_rank=None, topk_method="greedy", n_group=1, topk_group=1, routed_scaling_factor=1.0),
    # mscale != mscale_all_dim, so YaRN's cos/sin factor (attention_factor) is not 1 here.
    "tiny-qlora": dict(q_lora_rank=96, topk_method="group_limited_greedy", n_group=4, topk_group=2,
                       routed_scaling_factor=2.5, max_position_embeddings=4096,  # = factor × original
                       rope_parameters=dict(COMMON["rope_parameters"], factor=8.0, mscale=1.0, mscale_all_dim=0.8)),
}
PROMPT_LENGTHS = [1, 7, 20, 48]


def init_weights(model, gen):
    # Not HF's init (std 0.02 makes every logit ~0): unit-variance activations through the layers, norm
    # weights near 1, and a sharp router, so routing decisions are far from ties.
    for name, p in model.named_parameters():
        with torch.no_grad():
            if name.endswith("layernorm.weight") or name.endswith("norm.weight"):
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=gen))
            elif "embed_tokens" in name:
                p.copy_(torch.randn(p.shape, generator=gen))
            elif name.endswith("gate.weight"):
                p.copy_(torch.randn(p.shape, generator=gen) * (2.0 / math.sqrt(p.shape[-1])))
            else:
                p.copy_(torch.randn(p.shape, generator=gen) / math.sqrt(p.shape[-1]))
            p.copy_(p.to(torch.bfloat16).to(torch.float32))  # bf16-exact, so the bf16 files hold the truth


def router_margin(model, ids):
    # Smallest gap between the k-th and (k+1)-th routing score over all tokens and MoE layers.
    margins = []

    def hook(mod, inp, out):
        x = inp[0].reshape(-1, inp[0].shape[-1]).float()
        s = torch.softmax(x @ mod.weight.float().t(), dim=-1)
        if mod.topk_method == "group_limited_greedy":
            g = s.view(-1, mod.num_group, mod.num_experts // mod.num_group).max(-1).values
            gs = g.sort(-1, descending=True).values
            margins.append((gs[:, mod.topk_group - 1] - gs[:, mod.topk_group]).min().item())
            idx = g.topk(mod.topk_group, -1).indices
            mask = torch.zeros_like(g).scatter_(1, idx, 1).repeat_interleave(mod.num_experts // mod.num_group, 1)
            s = s.masked_fill(mask == 0, 0.0)
        ss = s.sort(-1, descending=True).values
        margins.append((ss[:, mod.top_k - 1] - ss[:, mod.top_k]).min().item())

    hs = [m.register_forward_hook(hook) for n, m in model.named_modules() if n.endswith("mlp.gate")]
    model(ids)
    for h in hs:
        h.remove()
    return min(margins)


def build(name, out_dir, seed):
    cfg = DeepseekV2Config(**dict(COMMON, **MODELS[name]))
    torch.manual_seed(seed)
    model = DeepseekV2ForCausalLM(cfg).eval().to(torch.float32)
    gen = torch.Generator().manual_seed(seed)
    init_weights(model, gen)
    prompts = [torch.randint(2, cfg.vocab_size, (n,), generator=gen) for n in PROMPT_LENGTHS]
    with torch.no_grad():
        margin = min(router_margin(model, p[None]) for p in prompts if len(p) > 0)
        tensors = {}
        for i, p in enumerate(prompts):
            logits = model(p[None]).logits[0].float().contiguous()
            assert torch.isfinite(logits).all()
            tensors[f"prompt{i}.input_ids"] = p.to(torch.int64).contiguous()
            tensors[f"prompt{i}.logits"] = logits
        # The rotary tables transformers used, so the C++ YaRN table is checked on its own too.
        rotary = model.model.rotary_emb
        tensors["rope.inv_freq"] = rotary.inv_freq.float().contiguous()
        tensors["rope.attention_scaling"] = torch.tensor([float(rotary.attention_scaling)], dtype=torch.float32)
    d = os.path.join(out_dir, name)
    os.makedirs(d, exist_ok=True)
    model.to(torch.bfloat16).save_pretrained(d, safe_serialization=True)
    gen_cfg = os.path.join(d, "generation_config.json")  # not used by the tests
    if os.path.exists(gen_cfg):
        os.remove(gen_cfg)
    save_file(tensors, os.path.join(d, "logits.safetensors"), metadata={"seed": str(seed)})
    with open(os.path.join(d, "config.json")) as f:
        written = json.load(f)
    print(f"{name}: seed {seed}, router margin {margin:.2e}, rope: {written.get('rope_parameters')}")
    return margin


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures"))
    args = ap.parse_args()
    torch.set_num_threads(2)
    for name in MODELS:
        # Retry seeds until no routing decision is within 1e-4 of a tie (fp error must not flip experts).
        for seed in range(1234, 1334):
            if build(name, args.out, seed) > 1e-4:
                break


if __name__ == "__main__":
    main()
