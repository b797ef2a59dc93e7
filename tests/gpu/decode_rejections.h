#pragma once
// The bad-input cases of every decode format: one small step's device buffers (out allocated poisoned), calls that must
// each return an error Status and launch nothing, and the report that checks both: no call accepted, and not one byte
// of out written.
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

  // One call, kept with its label for report(); the plan, geometry and workspace are this step's unless given.
  void call(const std::string& what, const MlaDecodeParams& p) { call(what, p, g, plan, ws.bytes()); }
  void call(const std::string& what, const MlaDecodeParams& p, const DecodePlanGeometry& gg, const DecodePlanView& pv,
            size_t ws_bytes) {
    results.emplace_back(what, cuda::mla_decode(p, gg, pv, ws.data(), ws_bytes, nullptr));
  }

  // Prints each status. A call labelled "bad MLA_<KNOB>..." must also name its knob in the error. Reports (accepted or
  // unnamed, bytes of out written) against (0, 0).
  Status report(CaseReport* rep) const {
    MLA_CUDA_TRY("test", cudaDeviceSynchronize());
    std::vector<uint8_t> bytes(out.bytes());
    MLA_TRY(out.download(&bytes));
    size_t failures = 0;
    for (const auto& [what, st] : results) {
      const bool unnamed = !st.is_ok() && what.rfind("bad MLA_", 0) == 0 &&
                           st.to_string().find(what.substr(4, what.find(' ', 4) - 4)) == std::string::npos;
      failures += st.is_ok() || unnamed;
      std::printf("  %-30s -> %s%s\n", what.c_str(), st.is_ok() ? "ACCEPTED (bad input)" : st.to_string().c_str(),
                  unnamed ? " (does not name the knob)" : "");
    }
    const size_t written =
        std::count_if(bytes.begin(), bytes.end(), [](uint8_t v) { return v != DeviceBuffer::kPoisonByte; });
    const std::vector<double> got{double(failures), double(written)}, want{0, 0};
    rep->add("accepted_or_written", compare_vec(got, want));
    return Status::ok();
  }
};

}  // namespace mla::test
