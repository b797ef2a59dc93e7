#pragma once
// One CUDA graph of plan + decode, captured once and replayed over steps of other seqlens: the engine's use of it
// (src/model/cuda/cuda_backend_step.cpp: a graph step's geometry is its shapes' alone, and each step's seqlens are
// copied into the addresses the graph knows before it is launched). The other tests capture a graph and replay it on
// the inputs it was captured with, under the geometry of those seqlens; here nothing the kernels or the plan decide
// may stay behind from the capture. Each replay's plan must equal the host plan of its step under the shape-only
// geometry, its rows that see no key must be exactly 0 / -inf, and its out / lse go to the caller's comparison
// against the split reference of that step.
#include <cuda_runtime_api.h>

#include <functional>
#include <string>
#include <vector>

#include "decode_device_run.h"

namespace mla::test {

// A step's kernel results and the split reference of the same step, for the caller to report with its tolerances.
struct GraphStepResult {
  std::string tag;  // "step k"
  const std::vector<int32_t>* seqlens = nullptr;
  std::vector<uint16_t> out, out_ref;
  std::vector<float> lse, lse_ref;
};

// h: the step of the longest seqlens, whose cache holds every step's keys (step k reads the first steps[k][b] tokens
// of sequence b, steps[k][b] <= h.seqlens[b]). report: adds the caller's metrics for one step.
// ref_options (optional): the reference's options for the graph's geometry (the fp8 suite's sums per kernel).
using GraphRefOptions = std::function<Status(const DecodePlanGeometry&, MlaDecodeRefOptions*)>;
inline Status run_graph_over_steps(const std::string& name, const DecodeHostData& h, float softmax_scale,
                                   const std::vector<std::vector<int32_t>>& steps,
                                   const std::function<void(const GraphStepResult&)>& report,
                                   const GraphRefOptions& ref_options = {}) {
  const DecodeShape& s = h.shape;
  for (const auto& lens : steps)
    for (int b = 0; b < s.batch; ++b)
      if (lens.size() != size_t(s.batch) || lens[b] > h.seqlens[b] || lens[b] < 0)
        return Status::internal("test", "a step's seqlens must stay within the cached ones (" + name + ")");
  DecodePlanGeometry g;
  MLA_TRY(decode_plan_geometry(s.batch, s.s_q, s.h_q, device_sm_count(), &g));  // shapes only, as a graph step
  MlaDecodeRefOptions ref_opts;  // one geometry for every step: one choice of the reference's arithmetic
  if (ref_options) MLA_TRY(ref_options(g, &ref_opts));
  const size_t parts_ints = size_t(g.num_parts) * kPlanPartInts;
  DecodeStepBuffers d;  // no merge counters: the engine passes none
  MLA_TRY(d.alloc(h, g, /*counters=*/false));

  cudaStream_t stream;
  MLA_CUDA_TRY("test", cudaStreamCreate(&stream));
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  auto finish = [&](Status st) {
    if (exec) cudaGraphExecDestroy(exec);
    if (graph) cudaGraphDestroy(graph);
    cudaStreamDestroy(stream);
    return st;
  };
  // The engine's calls: the plan with the block table (page hints), no merge counters (the combine merges).
  const DecodePlanView plan{d.parts.as<int32_t>(), d.off.as<int32_t>(), g.num_parts};
  const MlaDecodeParams p = d.params(h, softmax_scale);
  const TensorView d_seqlens = TensorView::contiguous(d.sl.data(), DType::kInt32, {s.batch});
  MLA_TRY(d.sl.upload(steps.front()));  // what the capture sees is never read: it is not run
  if (cudaError_t e = cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal); e != cudaSuccess)
    return finish(Status::cuda("test", cudaGetErrorString(e)));
  const Status planned = cuda::plan_decode(d_seqlens, p.block_table, g, plan, stream);
  const Status cap = planned.is_ok() ? cuda::mla_decode(p, g, plan, d.ws.data(), d.ws.bytes(), stream) : planned;
  const cudaError_t end = cudaStreamEndCapture(stream, &graph);
  if (!cap.is_ok()) return finish(cap);
  if (end != cudaSuccess) return finish(Status::cuda("test", cudaGetErrorString(end)));
  if (cudaError_t e = cudaGraphInstantiate(&exec, graph, 0); e != cudaSuccess)
    return finish(Status::cuda("test", cudaGetErrorString(e)));

  std::vector<int32_t> parts_ref(parts_ints), off_ref(size_t(s.batch) + 1), parts_dev(parts_ints),
      off_dev(size_t(s.batch) + 1);
  std::vector<float> o_acc(size_t(g.max_splits) * s.s_q * s.h_q * kDimV), lse_acc(size_t(g.max_splits) * s.s_q * s.h_q);
  // One step: its seqlens in, the graph launched, its plan, empty rows and reference; every error returns to the loop
  // below, which releases the graph and the stream.
  auto run_step = [&](size_t k) -> Status {
    std::vector<int32_t> lens = steps[k];
    GraphStepResult r;
    r.tag = "step " + std::to_string(k);
    r.seqlens = &steps[k];
    MLA_TRY(d.sl.upload(lens));
    MLA_TRY(d.out.poison());
    MLA_TRY(d.lse.poison());
    MLA_TRY(d.parts.poison());
    MLA_TRY(d.off.poison());
    MLA_TRY(d.ws.poison());
    if (cudaError_t e = cudaGraphLaunch(exec, stream); e != cudaSuccess)
      return Status::cuda("mla_decode", cudaGetErrorString(e));
    if (cudaError_t e = cudaStreamSynchronize(stream); e != cudaSuccess)
      return Status::cuda("mla_decode", std::string(cudaGetErrorString(e)) + " (" + name + ", " + r.tag + ")");
    r.out.assign(h.out_elems(), 0);
    r.lse.assign(h.lse_elems(), 0.f);
    MLA_TRY(d.out.download(&r.out));
    MLA_TRY(d.lse.download(&r.lse));
    MLA_TRY(d.parts.download(&parts_dev));
    MLA_TRY(d.off.download(&off_dev));

    const TensorView host_lens = TensorView::contiguous(lens.data(), DType::kInt32, {s.batch});
    MLA_TRY(ref::plan_decode(host_lens,
                             TensorView::contiguous(const_cast<int32_t*>(h.block_table.data()), DType::kInt32,
                                                    {s.batch, h.max_pages}),
                             g, DecodePlanView{parts_ref.data(), off_ref.data(), g.num_parts}));
    if (parts_dev != parts_ref || off_dev != off_ref)
      return Status::internal("plan_decode",
                              "the graph's plan differs from the host plan of " + r.tag + " (" + name + ")");
    if (Status st = check_empty_rows(s.batch, s.s_q, s.h_q, s.causal, lens, r.out, r.lse, name + ", " + r.tag);
        !st.is_ok())
      return st;
    r.out_ref.assign(h.out_elems(), 0xFFFFu);
    r.lse_ref.assign(h.lse_elems(), NAN);
    MLA_TRY(ref::mla_decode_split(h.params(const_cast<uint8_t*>(h.q.data()), const_cast<uint8_t*>(h.cache.data()),
                                           const_cast<int32_t*>(h.block_table.data()), lens.data(), r.out_ref.data(),
                                           r.lse_ref.data(), softmax_scale),
                                  DecodePlanView{parts_ref.data(), off_ref.data(), g.num_parts}, o_acc.data(),
                                  lse_acc.data(), ref_opts));
    MLA_TRY(check_reference_complete(s.format, r.out_ref, r.lse_ref, name + ", " + r.tag));
    report(r);
    return Status::ok();
  };
  for (size_t k = 0; k < steps.size(); ++k)
    if (Status st = run_step(k); !st.is_ok()) return finish(st);
  if (Status st = d.check_guards(name); !st.is_ok()) return finish(st);
  return finish(Status::ok());
}

// Steps for run_graph_over_steps over the cached seqlens `longest`: the longest themselves, each sequence some pages
// shorter (a few to zero), and every other sequence emptied -- other plans (cuts, pieces, empty rows) for one graph.
inline std::vector<std::vector<int32_t>> graph_steps_within(const std::vector<int32_t>& longest) {
  std::vector<std::vector<int32_t>> steps(3, longest);
  for (size_t b = 0; b < longest.size(); ++b) {
    steps[1][b] = std::max(0, longest[b] - static_cast<int32_t>((97 * b + 131) % 700));
    if (b % 2 == 1) steps[2][b] = 0;
  }
  return {steps[1], steps[0], steps[2], steps[1]};  // step 1 again last: the same plan after others
}

}  // namespace mla::test
