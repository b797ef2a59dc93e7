#!/usr/bin/env bash
# Extracts the prebuilt FlashMLA libraries of vLLM 0.26.0 (built for torch 2.11 + CUDA 13, the H200 machine's stack)
# into DIR, for flashmla_peer.py: _flashmla_C (upstream FlashMLA's dense decode) and _flashmla_extension_C (the
# community FP8 decode kernel, "PR54"). Run it here (the GPU machine has no network) and carry DIR.
#   bash bench/decode/peers/fetch_vllm_flashmla.sh DIR
set -euo pipefail
dest=${1:?usage: fetch_vllm_flashmla.sh DIR}
url=https://files.pythonhosted.org/packages/20/96/86edd288415aafc2952bbb969b5ef4e8c58e5525185b60320730276921e6/vllm-0.26.0-cp38-abi3-manylinux_2_28_x86_64.whl
sha=adb1e4c9b46d0dfdb094121ae5aad670a42412dd813ed4e5db069ed6a15006de
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
curl -sSfL -o "$tmp/vllm.whl" "$url"
echo "$sha  $tmp/vllm.whl" | sha256sum -c --quiet
unzip -q -o -j "$tmp/vllm.whl" vllm/_flashmla_C.abi3.so vllm/_flashmla_extension_C.abi3.so -d "$dest"
echo "fetch_vllm_flashmla: $(ls "$dest" | tr '\n' ' ')in $dest"
