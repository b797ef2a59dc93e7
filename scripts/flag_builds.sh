#!/usr/bin/env bash
# Builds the decode kernels that only a build flag reaches (scripts/flag_variants.txt), each in its own build tree with
# the flag on every nvcc command, and copies each variant's suites, stripped, to OUT/NAME/. Run here, on the CPU machine
# (no GPU needed; a variant rebuilds the CUDA library and its suites, ~2 min on 2 cores). scripts/knob_tests.sh
# --flags OUT then runs them on the GPU machine.
#
#   scripts/flag_builds.sh [--out DIR] [--trees DIR] [NAME...]     (default: every variant, OUT build/flags)
#
# --trees DIR  where the build trees live (default build-flags/; kept, so a second run rebuilds only what changed).
# Each build configures like the main one (scripts/setup.sh's CUTLASS, Release, Ninja). A variant that does not
# build stops the script with its name; the earlier ones stay in OUT.
set -euo pipefail
cd "$(dirname "$0")/.."
out=build/flags trees=build-flags names=()
while [ $# -gt 0 ]; do
  case "$1" in
    --out) out=$2; shift 2 ;;
    --trees) trees=$2; shift 2 ;;
    -*) echo "flag_builds: unknown option $1" >&2; exit 2 ;;
    *) names+=("$1"); shift ;;
  esac
done
list=scripts/flag_variants.txt
known=$(grep -v '^#' "$list" | awk 'NF {print $1}')
for n in "${names[@]}"; do
  grep -qx "$n" <<< "$known" || { echo "flag_builds: no variant '$n' in $list" >&2; exit 2; }
done
[ ${#names[@]} -gt 0 ] || mapfile -t names <<< "$known"
command -v nvcc > /dev/null || export PATH=/usr/local/cuda/bin:$PATH
mkdir -p "$out" "$trees"
for n in "${names[@]}"; do
  read -r _ suites flags <<< "$(awk -v n="$n" '$1 == n' "$list" | sed 's/#.*//')"
  tree=$trees/$n
  echo "flag_builds: $n ($flags) -> $out/$n/ [$(date -u +%T)]"
  cmake -S . -B "$tree" -G Ninja -DMLA_CUDA=ON -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_FLAGS="$flags" > "$tree.cmake.log" 2>&1 ||
    { echo "flag_builds: $n: cmake failed (see $tree.cmake.log)" >&2; exit 1; }
  # shellcheck disable=SC2086
  ninja -C "$tree" ${suites//,/ } > "$tree.ninja.log" 2>&1 ||
    { tail -20 "$tree.ninja.log" >&2; echo "flag_builds: $n: build failed (see $tree.ninja.log)" >&2; exit 1; }
  # A variant whose wgmma ptxas serialized would test a kernel nobody would time (bench/decode/mkvariant.sh refuses it).
  if grep -q "instructions are serialized" "$tree.ninja.log"; then
    echo "flag_builds: $n: ptxas serialized wgmma (see $tree.ninja.log); built anyway" >&2
  fi
  rm -rf "${out:?}/$n" && mkdir -p "$out/$n"
  for s in ${suites//,/ }; do cp "$tree/bin/$s" "$out/$n/" && strip "$out/$n/$s"; done
  echo "$flags" > "$out/$n/FLAGS"
  echo "$(git rev-parse HEAD)$(git diff --quiet HEAD -- src tests || echo ' + uncommitted src/tests changes')" \
    > "$out/$n/COMMIT"
done
echo "flag_builds: ${#names[@]} variant(s) in $out [$(date -u +%T)]"
