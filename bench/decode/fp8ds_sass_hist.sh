#!/usr/bin/env bash
# Opcode histograms of every fp8_ds decode kernel in a binary: what the dequantization costs in instructions, per
# kernel (16-row exact-code ws kernels, the dequantizing mma.sync tiles, the 64-row ws kernels that convert in the
# producer or in the owner). Runs here, on the CPU: cuobjdump reads the SASS from the file, no GPU needed.
#   bench/decode/fp8ds_sass_hist.sh [BINARY] [TOP]   (default build/bin/gpu_test_mla_decode_fp8ds, 25 opcodes a kernel)
# Kernels are matched by name (mangled names holding Fp8DsTraits or decode_fp8ds), not spelled out, so a new template
# argument does not drop one; none found is an error. Split out of fp8ds_h200_check.sh (session 93), whose test,
# bench and sanitizer parts scripts/gpu_check.sh and bench_decode now do.
set -u
BIN=${1:-build/bin/gpu_test_mla_decode_fp8ds}
TOP=${2:-25}
command -v cuobjdump > /dev/null || { echo "fp8ds_sass_hist: cuobjdump not on PATH (the CUDA toolkit's bin, or pip install --target DIR nvidia-cuda-cuobjdump and add DIR/nvidia/cu13/bin)" >&2; exit 2; }
[ -f "$BIN" ] || { echo "fp8ds_sass_hist: no binary $BIN" >&2; exit 2; }
hist() {  # SASS on stdin -> "count OPCODE" pairs on one line, most frequent first
  # An instruction line is "/*addr*/ [@P0 ] OPCODE.mods ..."; addresses past 0xffff have five or six hex digits.
  grep -oE '^\s+/\*[0-9a-f]{4,6}\*/\s+(@!?U?P[0-9T] )?[A-Z][A-Z0-9_.]*' | awk '{print $NF}' | sed 's/\..*//' |
    sort | uniq -c | sort -rn | head -"$TOP" | tr '\n' ' '
  echo
}
kernels=$(cuobjdump -sass "$BIN" | grep -oE 'Function : \S+' | awk '{print $3}' | grep -E 'Fp8DsTraits|decode_fp8ds' |
          sort -u)
[ -n "$kernels" ] || { echo "fp8ds_sass_hist: no fp8_ds kernel found in $BIN" >&2; exit 1; }
for k in $kernels; do
  sass=$(cuobjdump -sass -fun "$k" "$BIN" 2> /dev/null)  # quiet: it warns for every cubin without the kernel
  echo "== $k ($(grep -cE '^\s+/\*[0-9a-f]{4,6}\*/' <<< "$sass") instructions)"
  hist <<< "$sass"
done
