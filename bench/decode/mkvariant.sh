#!/usr/bin/env bash
# Builds a variant of a bench binary with one CUDA translation unit recompiled under extra flags, for A/B timing of
# compile-time variants from one tree (code placement moves these kernels by 1-3 %, so the base is built the same way,
# with the flag's neutral value). Nothing in build/ changes: the TU's object and a copy of libmla_cuda.a go to a
# temporary directory of its own under OUT (so runs for several targets may share OUT at once), the relinked binary
# is OUT/TARGET (stripped).
#   bench/decode/mkvariant.sh BUILD TU_SUFFIX[,TU_SUFFIX...] "FLAGS" OUT [TARGET]
#   e.g. bench/decode/mkvariant.sh build decode_fp8_h16.cu "-DMLA_FP8_H16_KO=16" /tmp/v16
# (session 46: the knock-outs of bench/decode/patches/h16_knockouts.patch.)
# Then check that the variant changed the kernels the timed rows launch (session 67: an A/B rebuilt a TU those rows
# never ran): bench/decode/sass_diff.py BASE_OUT/TARGET VARIANT_OUT/TARGET.
set -euo pipefail
[ $# -ge 4 ] || { echo "usage: $0 BUILD TU_SUFFIX[,TU_SUFFIX...] FLAGS OUT [TARGET]" >&2; exit 2; }
BUILD=$(cd "$1" && pwd); TU=$2; FLAGS=$3; OUT=$4; TARGET=${5:-bench_decode}
mkdir -p "$OUT"; OUT=$(cd "$OUT" && pwd)
tmp=$(mktemp -d "$OUT/.mkvariant.XXXXXX"); trap 'rm -rf "$tmp"' EXIT
cp "$BUILD/src/libmla_cuda.a" "$tmp/libmla_cuda.a"
for tu in ${TU//,/ }; do  # TU_SUFFIX may name several, comma-separated (a type used across them: both rebuilt)
  obj=$(basename "$tu").o
  cmd=$(python3 "$(dirname "$0")/tu_command.py" "$BUILD/compile_commands.json" --suffix "$tu" --obj "$tmp/$obj" |
    cut -f2-)
  # A variant whose wgmma ptxas serialized (C7510-C7520's "are serialized") measures that, not the change (session 65:
  # session 64's END_EARLY build ran row 17 16 % slower for it): refuse it unless MKVARIANT_ALLOW_SERIAL=1.
  (cd "$BUILD" && eval "$cmd $FLAGS") 2>&1 | tee "$tmp/ptxas.log"
  if grep -q "instructions are serialized" "$tmp/ptxas.log" && [ "${MKVARIANT_ALLOW_SERIAL:-0}" != 1 ]; then
    echo "mkvariant: ptxas serialized wgmma in $tu under '$FLAGS' (set MKVARIANT_ALLOW_SERIAL=1 to build it anyway)" >&2
    exit 1
  fi
  ar t "$tmp/libmla_cuda.a" | grep -qx "$obj" || { echo "$obj is not a member of libmla_cuda.a" >&2; exit 1; }
  (cd "$tmp" && ar r libmla_cuda.a "$obj")
done
link=$(ninja -C "$BUILD" -t commands "$TARGET" | tail -1)
link=$(sed -E "s#^: && ##; s# && :\$##; s# src/libmla_cuda.a # $tmp/libmla_cuda.a #; s# -o bin/$TARGET # -o $OUT/$TARGET #" <<<"$link")
(cd "$BUILD" && eval "$link")
strip "$OUT/$TARGET"
