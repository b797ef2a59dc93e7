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
head=$(git rev-parse HEAD)
echo "$head" > "$DIR/bin/COMMIT"
# The build-flag variants' suites (scripts/flag_builds.sh), when built, for knob_tests.sh --flags at the call's end;
# each variant's COMMIT says which tree it came from (said here when that is not HEAD).
if [ -d build/flags ]; then
  cp -r build/flags "$DIR/bin/flags"
  for d in build/flags/*/; do
    built=$(cat "$d/COMMIT" 2> /dev/null || echo "an unknown commit (no COMMIT)")
    [ "$built" = "$head" ] || echo "h200_grid_pack: ${d%/} was built at $built" >&2
  done
fi
tar -cJf "$DIR/pk.tar.xz" -C "$DIR" bin
ls -l "$DIR/pk.tar.xz"
