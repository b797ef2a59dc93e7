#pragma once
// The plan's DecodePlanTuning from the command line, as `bench_decode --tune` and `mlaserve plan decode --tune` take
// it: one syntax and one range check for both.
#include <string>
#include <vector>

#include "common/args.h"
#include "mla/core/status.h"
#include "mla/ops/plan_decode.h"

namespace mla::bench {

// "SEQ_COST,SPLIT_COST,MIN_PART_COST[,SHORT_STEP_PAGES]" (0..64, 0..64, 1..4096, 0..64) into *tune; a value left out
// keeps tune's. op names the caller in the error.
inline Status parse_plan_tuning(const char* op, const std::string& v, DecodePlanTuning* tune) {
  const std::vector<int64_t> t = parse_int_list(v);
  if ((t.size() != 3 && t.size() != 4) || t[0] < 0 || t[1] < 0 || t[2] < 1 || t[0] > 64 || t[1] > 64 || t[2] > 4096 ||
      (t.size() == 4 && (t[3] < 0 || t[3] > 64)))
    return Status::invalid(op, "--tune wants SEQ_COST,SPLIT_COST,MIN_PART_COST[,SHORT_STEP_PAGES] (0..64, 0..64, "
                               "1..4096, 0..64); got '" + v + "'");
  tune->seq_cost = static_cast<int>(t[0]);
  tune->split_cost = static_cast<int>(t[1]);
  tune->min_part_cost = static_cast<int>(t[2]);
  if (t.size() == 4) tune->short_step_pages = static_cast<int>(t[3]);
  return Status::ok();
}

}  // namespace mla::bench
