#pragma once
// The bad-input cases of every decode format: one small step's device buffers, holding the step's real inputs and plan
// (upload) while out, lse and the workspace stay poisoned, calls that must each return an error Status and launch
// nothing, and the report that checks both: no call accepted (each refusal names mla_decode, or the bad knob), and not
// one byte of out, lse or the workspace written. Valid inputs and plan make the "nothing written" check mean "nothing
// launched": a kernel that ran would write every row of out and lse.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "decode_device_run.h"

namespace mla::test {

struct DecodeRejections {
  DecodePlanGeometry g;  // of (batch, s_q, h_q), shapes only
  DeviceBuffer q, cache, bt, sl, out, lse, parts, off, ws;
  DecodePlanView plan;
  std::vector<std::pair<std::string, Status>> results;

  // Byte sizes are the caller's (room for the wider dtypes its bad calls view the buffers as).
  Status alloc(int batch, int s_q, int h_q, size_t q_bytes, size_t cache_bytes, size_t bt_bytes, size_t out_bytes,
               size_t lse_bytes) {
    MLA_TRY(decode_plan_geometry(batch, s_q, h_q, device_sm_count(), &g));
    MLA_TRY(q.alloc(q_bytes));
    MLA_TRY(cache.alloc(cache_bytes));
    MLA_TRY(bt.alloc(bt_bytes));
    MLA_TRY(sl.alloc(size_t(batch) * 4));
    MLA_TRY(out.alloc(out_bytes));
    MLA_TRY(lse.alloc(lse_bytes));
    MLA_TRY(parts.alloc(size_t(g.num_parts) * kPlanPartInts * 4));
    MLA_TRY(off.alloc(size_t(batch + 1) * 4));
    MLA_TRY(ws.alloc(decode_workspace_bytes(g)));
    plan = DecodePlanView{parts.as<int32_t>(), off.as<int32_t>(), g.num_parts};
    return Status::ok();
  }

  // The step's inputs (host vectors of the buffers' leading bytes) and its host plan for g, so any launch would write.
  template <class Q, class C>
  Status upload(const std::vector<Q>& q_host, const std::vector<C>& cache_host, const std::vector<int32_t>& bt_host,
                const std::vector<int32_t>& seqlens_host) {
    MLA_TRY(q.upload(q_host));
    MLA_TRY(cache.upload(cache_host));
    MLA_TRY(bt.upload(bt_host));
    MLA_TRY(sl.upload(seqlens_host));
    std::vector<int32_t> parts_host(size_t(g.num_parts) * kPlanPartInts), off_host(size_t(g.batch) + 1);
    std::vector<int32_t> lens = seqlens_host;
    MLA_TRY(ref::plan_decode(TensorView::contiguous(lens.data(), DType::kInt32, {g.batch}), g,
                             DecodePlanView{parts_host.data(), off_host.data(), g.num_parts}));
    MLA_TRY(parts.upload(parts_host));
    MLA_TRY(off.upload(off_host));
    return Status::ok();
  }

  // A block table one column narrower than the step's longest sequence needs, called with a geometry made from the
  // host seqlens (as the engine's and the bench's eager steps make it): mla_decode must refuse it before launching.
  void call_table_too_short(const MlaDecodeParams& good, const std::vector<int32_t>& seqlens_host) {
    DecodePlanGeometry gs;
    const Status st = decode_plan_geometry(g.batch, g.s_q, g.h_q, device_sm_count(), &gs, seqlens_host.data(),
                                           good.format);
    if (!st.is_ok()) {  // not from mla_decode: counted as a failure
      results.emplace_back("block_table too short (setup)", st);
      return;
    }
    MlaDecodeParams p = good;
    p.block_table = TensorView::contiguous(good.block_table.data, DType::kInt32, {g.batch, gs.host_max_seq_pages - 1});
    // The seqlens' grid has at most g's parts (narrow tiles or whole sequences only take fewer), so the plan buffers
    // and workspace sized for g hold it; the plan's contents do not matter to a call that must not launch.
    call("block_table too short", p, gs, DecodePlanView{plan.parts, plan.split_offsets, gs.num_parts}, ws.bytes());
  }

  // Each tensor argument null in turn (validate_mla_decode's check_tensor, before any launch).
  void call_each_null(const MlaDecodeParams& good) {
    const std::pair<const char*, TensorView MlaDecodeParams::*> args[] = {
        {"null q", &MlaDecodeParams::q},           {"null kv_cache", &MlaDecodeParams::kv_cache},
        {"null block_table", &MlaDecodeParams::block_table}, {"null seqlens", &MlaDecodeParams::seqlens},
        {"null out", &MlaDecodeParams::out},       {"null lse", &MlaDecodeParams::lse}};
    for (const auto& [what, member] : args) {
      MlaDecodeParams p = good;
      (p.*member).data = nullptr;
      call(what, p);
    }
  }

  // The calls every format makes: each tensor null, and the block table one column too short.
  void call_shared(const MlaDecodeParams& good, const std::vector<int32_t>& seqlens_host) {
    call_each_null(good);
    call_table_too_short(good, seqlens_host);
  }

  // The step of `h` (tests/common/decode_data.h) in fresh buffers, q and the cache with room for q_bytes / cache_bytes
  // (the wider views some bad calls take), uploaded with its plan; its params in *good; then call_shared.
  Status start(const DecodeHostData& h, float softmax_scale, size_t q_bytes, size_t cache_bytes,
               MlaDecodeParams* good) {
    const DecodeShape& s = h.shape;
    MLA_TRY(alloc(s.batch, s.s_q, s.h_q, q_bytes, cache_bytes, h.block_table.size() * 4, h.out_elems() * 2,
                  h.lse_elems() * 4));
    *good = h.params(q.data(), cache.data(), bt.data(), sl.data(), out.data(), lse.data(), softmax_scale);
    MLA_TRY(upload(h.q, h.cache, h.block_table, h.seqlens));
    call_shared(*good, h.seqlens);
    return Status::ok();
  }

  // One call, kept with its label for report(); the plan, geometry and workspace are this step's unless given.
  void call(const std::string& what, const MlaDecodeParams& p) { call(what, p, g, plan, ws.bytes()); }
  void call(const std::string& what, const MlaDecodeParams& p, const DecodePlanGeometry& gg, const DecodePlanView& pv,
            size_t ws_bytes) {
    results.emplace_back(what, cuda::mla_decode(p, gg, pv, ws.data(), ws_bytes, nullptr));
  }

  // Prints each status. A call labelled "bad MLA_<KNOB>..." must name its knob in the error, any other must come from
  // mla_decode. Reports (accepted or unnamed, bytes of out, lse and workspace written) against (0, 0).
  Status report(CaseReport* rep) const {
    MLA_CUDA_TRY("test", cudaDeviceSynchronize());
    size_t failures = 0;
    for (const auto& [what, st] : results) {
      const bool knob = what.rfind("bad MLA_", 0) == 0;
      const bool unnamed = !st.is_ok() && (knob ? st.to_string().find(what.substr(4, what.find(' ', 4) - 4)) ==
                                                      std::string::npos
                                                : st.op() != "mla_decode");
      failures += st.is_ok() || unnamed;
      std::printf("  %-30s -> %s%s\n", what.c_str(), st.is_ok() ? "ACCEPTED (bad input)" : st.to_string().c_str(),
                  unnamed ? (knob ? " (does not name the knob)" : " (not from mla_decode)") : "");
    }
    size_t written = 0;
    for (const DeviceBuffer* b : {&out, &lse, &ws}) {
      std::vector<uint8_t> bytes(b->bytes());
      MLA_TRY(b->download(&bytes));
      written += std::count_if(bytes.begin(), bytes.end(), [](uint8_t v) { return v != DeviceBuffer::kPoisonByte; });
    }
    const std::vector<double> got{double(failures), double(written)}, want{0, 0};
    rep->add("accepted_or_written", compare_vec(got, want));
    return Status::ok();
  }
};

}  // namespace mla::test
