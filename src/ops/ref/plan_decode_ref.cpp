// Host plan: the shared compute_decode_plan over host seqlens.
#include <string>

#include "mla/core/check.h"
#include "mla/ops/plan_decode.h"
#include "mla/ops/plan_decode_schedule.h"

namespace mla::ref {

Status plan_decode(const TensorView& seqlens, const DecodePlanGeometry& g, DecodePlanView plan, DecodePlanTuning tune) {
  return plan_decode(seqlens, TensorView{}, g, plan, tune);
}

Status plan_decode(const TensorView& seqlens, const TensorView& block_table, const DecodePlanGeometry& g,
                   DecodePlanView plan, DecodePlanTuning tune) {
  DecodePlanPages pages;
  MLA_TRY(check_plan_block_table(block_table, g.batch, &pages));
  MLA_TRY(check_tensor("plan_decode", "seqlens", seqlens, DType::kInt32, {g.batch}));
  if (plan.parts == nullptr || plan.split_offsets == nullptr)
    return Status::invalid("plan_decode", "plan buffers must be non-null (parts [" + std::to_string(g.num_parts) +
                                              ", 8], split_offsets [" + std::to_string(g.batch + 1) + "])");
  if (plan.num_parts != g.num_parts)
    return Status::invalid("plan_decode", "plan.num_parts " + std::to_string(plan.num_parts) +
                                              " != geometry num_parts " + std::to_string(g.num_parts));
  MLA_TRY(check_decode_plan_tuning(tune, g));
  const auto* sl = seqlens.ptr<const int32_t>();
  for (int b = 0; b < g.batch; ++b)
    if (sl[b] < 0)
      return Status::invalid("plan_decode", "seqlens[" + std::to_string(b) + "] = " + std::to_string(sl[b]) + " < 0");
  // The page hints read block_table[b][blk] for the blocks of a sequence: the row must hold them.
  if (pages.data != nullptr)
    for (int b = 0; b < g.batch; ++b)
      if (decode_num_blocks(sl[b]) > block_table.shape[1])
        return Status::invalid("plan_decode", "seqlens[" + std::to_string(b) + "] = " + std::to_string(sl[b]) +
                                                  " needs more blocks than block_table " + block_table.str() +
                                                  " holds");
  compute_decode_plan(sl, g.batch, g.num_parts, g.split_price, tune, plan.parts, plan.split_offsets, pages);
  if (plan.merge_counters != nullptr)
    for (int64_t i = 0; i < decode_plan_counters(g); ++i) plan.merge_counters[i] = 0;
  return Status::ok();
}

}  // namespace mla::ref
