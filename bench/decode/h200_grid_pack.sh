#!/usr/bin/env bash
# Packs the binaries bench/decode/h200_grid_run.sh needs from build/bin into DIR/pk.tar.xz (stripped: a carry holds
# 64 MiB). Usage, on this machine after `ninja -C build`:  bench/decode/h200_grid_pack.sh DIR
set -eu
DIR=${1:?usage: h200_grid_pack.sh DIR}
rm -rf "$DIR/bin" && mkdir -p "$DIR/bin"
for b in bench_decode gpu_test_mla_decode gpu_test_mla_decode_fp8 gpu_test_mla_decode_fp8ds gpu_test_engine_cuda \
         gpu_test_model_forward; do
  cp build/bin/$b "$DIR/bin/" && strip "$DIR/bin/$b"
done
git rev-parse HEAD > "$DIR/bin/COMMIT"
tar -cJf "$DIR/pk.tar.xz" -C "$DIR" bin
ls -l "$DIR/pk.tar.xz"
