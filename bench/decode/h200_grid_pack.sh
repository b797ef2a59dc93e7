#!/usr/bin/env bash
# Packs the binaries bench/decode/h200_grid_run.sh needs from build/bin into DIR/pk.tar.xz (stripped: a carry holds
# 64 MiB), with build/flags/ if scripts/flag_builds.sh made it. Usage, after `ninja -C build`:
#   bench/decode/h200_grid_pack.sh DIR
set -eu
DIR=${1:?usage: h200_grid_pack.sh DIR}
rm -rf "$DIR/bin" && mkdir -p "$DIR/bin"
for b in bench_decode gpu_test_mla_decode gpu_test_mla_decode_fp8 gpu_test_mla_decode_fp8ds gpu_test_engine_cuda \
         gpu_test_model_forward; do
  cp build/bin/$b "$DIR/bin/" && strip "$DIR/bin/$b"
done
git rev-parse HEAD > "$DIR/bin/COMMIT"
# The build-flag variants' suites (scripts/flag_builds.sh), when built, for knob_tests.sh --flags at the call's end;
# their own COMMIT says which tree they came from.
if [ -d build/flags ]; then
  cp -r build/flags "$DIR/bin/flags"
  [ "$(cat build/flags/COMMIT 2> /dev/null)" = "$(git rev-parse HEAD)" ] ||
    echo "h200_grid_pack: build/flags was built at $(cat build/flags/COMMIT 2> /dev/null || echo '?'), not HEAD" >&2
fi
tar -cJf "$DIR/pk.tar.xz" -C "$DIR" bin
ls -l "$DIR/pk.tar.xz"
