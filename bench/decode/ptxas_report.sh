#!/usr/bin/env bash
# Spills and wgmma pipeline notes (ptxas C75xx: serialized, waits or fences inserted) per CUDA translation unit, compiled
# with the build's own command from compile_commands.json plus -Xptxas -v and any extra flags. Nothing in BUILD changes.
# Why the build's command: `nvcc -arch=sm_90a` writes `.target sm_90` PTX, and ptxas then reports other spills and
# serializations than the build gets (bench/decode/NOTES.md "Session 65" 2).
#   bench/decode/ptxas_report.sh BUILD [FILE_REGEX] [EXTRA_FLAGS]
#   e.g. bench/decode/ptxas_report.sh build 'decode_fp8_ws' '-DMLA_FP8_WS_QREG_STEPS=8'
# One line per TU: path, then counts ("2 C7514", "1 spill 44 bytes"); nothing after "::" means clean.
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: $0 BUILD [FILE_REGEX] [EXTRA_FLAGS]" >&2; exit 2; }
BUILD=$(cd "$1" && pwd); RE=${2:-.}; EXTRA=${3:-}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
python3 "$(dirname "$0")/tu_command.py" "$BUILD/compile_commands.json" --match "$RE" --obj "$tmp/tu.o" > "$tmp/cmds"
while IFS=$'\t' read -r file cmd; do
  notes=$( (cd "$BUILD" && eval "$cmd -Xptxas -v $EXTRA") 2>&1 |
    sed -nE 's/.*\((C75[0-9]+)\).*/\1/p; s/.* ([1-9][0-9]*) bytes spill stores.*/spill \1 bytes/p' | sort | uniq -c |
    tr -s ' \n' ' ')
  echo "${file#"$(dirname "$BUILD")/"} ::$notes"
done < "$tmp/cmds"
