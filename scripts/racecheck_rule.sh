# Sourced by scripts/gpu_check.sh and scripts/knob_tests.sh (from the repo root): racecheck_verdict LOG passes a
# compute-sanitizer racecheck log when its tests passed and every reported access is a marked hand-off.
#
# racecheck reports the bar.arrive -> bar.sync hand-offs of shared memory between warpgroups (the writer arrives, the
# reader syncs on the same named barrier, which orders the writes before the reads) as hazards. Each such access carries
# a "racecheck: hand-off" comment on its line or one of the 3 lines above (in the source, so it moves with the code: a
# line-number list broke with every edit above the lines). A reported location base:line is known when some file of
# that name under src/ has the marker there; a racecheck run passes when its tests pass and every reported access is
# known. Any other location fails the run: check the report, and mark the line only if it is such a hand-off.
# racecheck also reports accesses ordered by an mbarrier release that lane 0 makes for its warp after __syncwarp (the
# PTX model orders the other lanes' accesses before it; racecheck does not): a build with -DMLA_RC_ALL_ARRIVE=1 (tma.h;
# scripts/flag_variants.txt's rc-all-arrive-1) has every thread arrive, and tells such a report from a missing order.
racecheck_known_loc() {
  local base=${1%%:*} line=${1##*:} f
  for f in $(find src -name "$base" -type f); do
    awk -v l="$line" 'NR >= l - 3 && NR <= l && /racecheck: hand-off/ {found = 1} END {exit !found}' "$f" && return 0
  done
  return 1
}
racecheck_verdict() {
  local log=$1 locs loc unknown=""
  grep -q '^\[  FAILED  \]' "$log" && { echo "a test failed under racecheck"; return 1; }
  grep -qE '^\[  PASSED  \] [1-9]' "$log" || { echo "no test passed under racecheck"; return 1; }
  locs=$(grep -E '(Read|Write) access at' "$log" | grep -oE 'in [A-Za-z0-9_.]+:[0-9]+' | sed 's/^in //' | sort -u)
  # an error exit with no access located (an API or barrier error, a report without file:line) is not a hand-off
  [ -n "$locs" ] || { echo "racecheck errors with no file:line to check"; return 1; }
  for loc in $locs; do racecheck_known_loc "$loc" || unknown="$unknown $loc"; done
  if [ -n "$unknown" ]; then echo "hazards at lines without a 'racecheck: hand-off' marker:$unknown"; return 1; fi
  echo "only marked hand-offs ($(echo "$locs" | sed '/^$/d' | wc -l) lines)"
}
