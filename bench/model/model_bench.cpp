// bench_model: the CUDA DeepSeek-V2 forward with dummy weights (issue 7's numbers): weight creation and
// upload time, prefill tokens/s for one step of `prefill_seqs` × `prefill_len` tokens, and decode step
// time at several batch sizes over `context`-token sequences. Wall clock around forward + stream sync
// (with MLA_MOE_PATH=per_expert the step includes the MoE layers' host syncs, which a real step pays
// too); warm-up steps first; median of the timed steps. `--moe-path both` times every prefill and decode
// measurement under the grouped MoE and the per-expert MoE (MLA_MOE_PATH, set before each step) in one
// process, so before/after share the weights, the KV cache and the sequences. `--variants` generalizes it:
// "label:KEY=VAL+KEY=VAL;label2:..." times every measurement once per variant with those environment
// variables set (every key any variant names is unset first), e.g.
// --variants 'before:MLA_GEMM_TUNE=0+MLA_MOE_BLOCK_M=legacy;after:' for the decode-GEMM changes.
//
//   bench_model [--preset deepseek-v2-lite] [--layers N] [--prefill-seqs 8] [--prefill-len 2048]
//               [--context 1024] [--batches 1,64,256] [--steps 10] [--kv-cache-dtype auto|fp8|auto,fp8]
//               [--moe-path grouped|per_expert|both] [--variants 'label:K=V+K=V;label2:']
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "common/args.h"
#include "mla/loader/weights_loader.h"
#include "mla/model/cuda_backend.h"
#include "mla/model/deepseek_v2.h"

namespace {

using namespace mla;
using Clock = std::chrono::steady_clock;

double secs(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

struct Args {
  std::string preset = "deepseek-v2-lite";
  int64_t layers = 0;  // 0: the preset's
  int64_t prefill_seqs = 8, prefill_len = 2048, context = 1024, steps = 10;
  std::vector<int64_t> batches = {1, 64, 256};
  std::vector<KvFormat> kvs = {KvFormat::kBf16};  // one backend each, in turn, over one set of host weights
  // One timed run per variant: a label and the environment it sets (--moe-path makes MLA_MOE_PATH ones).
  struct Variant {
    std::string label;
    std::vector<std::pair<std::string, std::string>> env;
  };
  std::vector<Variant> variants = {{"grouped", {{"MLA_MOE_PATH", "grouped"}}}};
};

// Sets variant v's environment after unsetting every key any variant names.
void apply(const Args& a, const Args::Variant& v) {
  for (const Args::Variant& o : a.variants)
    for (const auto& kv : o.env) unsetenv(kv.first.c_str());
  for (const auto& kv : v.env) setenv(kv.first.c_str(), kv.second.c_str(), 1);
}

// "before:A=1+B=2;after:" → variants; false when an item lacks its ':' or a pair its '='.
bool parse_variants(const std::string& spec, std::vector<Args::Variant>* out) {
  out->clear();
  size_t p = 0;
  while (p < spec.size()) {
    size_t q = spec.find(';', p);
    if (q == std::string::npos) q = spec.size();
    const std::string item = spec.substr(p, q - p);
    p = q + 1;
    const size_t colon = item.find(':');
    if (colon == std::string::npos || colon == 0) return false;
    Args::Variant v{item.substr(0, colon), {}};
    std::string rest = item.substr(colon + 1);
    for (size_t r = 0; r < rest.size();) {
      size_t e = rest.find('+', r);
      if (e == std::string::npos) e = rest.size();
      const std::string kv = rest.substr(r, e - r);
      r = e + 1;
      const size_t eq = kv.find('=');
      if (eq == std::string::npos || eq == 0) return false;
      v.env.emplace_back(kv.substr(0, eq), kv.substr(eq + 1));
    }
    out->push_back(std::move(v));
  }
  return !out->empty();
}

bool parse(int argc, char** argv, Args* a) {
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    if (i + 1 >= argc) return false;
    const std::string v = argv[++i];
    if (k == "--preset") a->preset = v;
    else if (k == "--layers") a->layers = std::atoll(v.c_str());
    else if (k == "--prefill-seqs") a->prefill_seqs = std::atoll(v.c_str());
    else if (k == "--prefill-len") a->prefill_len = std::atoll(v.c_str());
    else if (k == "--context") a->context = std::atoll(v.c_str());
    else if (k == "--steps") a->steps = std::atoll(v.c_str());
    else if (k == "--moe-path") {
      if (v != "grouped" && v != "per_expert" && v != "both") return false;
      a->variants.clear();
      for (const char* path : {"grouped", "per_expert"})
        if (v == "both" || v == path) a->variants.push_back({path, {{"MLA_MOE_PATH", path}}});
    }
    else if (k == "--variants") {
      if (!parse_variants(v, &a->variants)) return false;
    }
    else if (k == "--kv-cache-dtype") {
      a->kvs.clear();
      for (const std::string& name : bench::split_commas(v)) {
        KvFormat f;
        if (!parse_kv_format(name, &f).is_ok()) return false;
        a->kvs.push_back(f);
      }
    }
    else if (k == "--batches") {
      a->batches = bench::parse_int_list(v);
    } else {
      return false;
    }
  }
  return true;
}

int fail(const Status& s) {
  std::fprintf(stderr, "bench_model: %s\n", s.to_string().c_str());
  return 1;
}

// One forward step, synchronized; seconds.
Status timed_step(model::CudaBackend& be, const model::ForwardBatch& b, double* sec) {
  model::DeepseekV2 m(&be);
  TensorView logits;
  const auto t0 = Clock::now();
  MLA_TRY(m.forward(b, &logits));
  if (cudaStreamSynchronize(reinterpret_cast<cudaStream_t>(be.stream())) != cudaSuccess)
    return Status::cuda("bench_model", "stream sync failed");
  *sec = secs(t0, Clock::now());
  return Status::ok();
}

model::ForwardBatch prefill_batch(int64_t first_seq, int64_t seqs, int64_t len, int64_t vocab) {
  model::ForwardBatch b;
  for (int64_t s = 0; s < seqs; ++s) {
    b.seqs.push_back({.seq_id = first_seq + s, .start_pos = 0, .num_tokens = len});
    for (int64_t i = 0; i < len; ++i) b.token_ids.push_back(static_cast<int32_t>((s * 7919 + i * 104729) % vocab));
    b.logits_rows.push_back(static_cast<int32_t>(b.token_ids.size() - 1));  // as sampling would
  }
  return b;
}

// One backend with KV format `kv` over host weights `w`: prefill tokens/s, then decode steps per batch.
Status run_format(const Args& a, const model::ModelConfig& c, const model::ModelWeights& w, KvFormat kv,
                  int64_t max_batch, int64_t max_tokens) {
  model::CudaBackendOptions o;
  // Pages: the prefill sequences, then every decode batch's sequences (released after each batch).
  const int64_t paths = static_cast<int64_t>(a.variants.size());
  const int64_t pages_per_seq = (std::max(a.prefill_len, a.context + paths * (a.steps + 2) + 8) + 63) / 64;
  o.num_pages = pages_per_seq * std::max(a.prefill_seqs, max_batch);
  o.max_batch_tokens = max_tokens;
  o.kv_format = kv;
  // The model allocates per layer and frees at the next step: activation memory grows with layers × tokens.
  o.activation_bytes = size_t{14} << 30;
  o.scratch_bytes = size_t{4} << 30;
  std::unique_ptr<model::CudaBackend> be;
  const auto t1 = Clock::now();
  MLA_TRY(model::CudaBackend::create(w, o, &be));
  const auto t2 = Clock::now();
  std::printf("model %s, %lld layers, kv %s, %lld pages\n", a.preset.c_str(),
              static_cast<long long>(c.num_hidden_layers), std::string(kv_format_name(kv)).c_str(),
              static_cast<long long>(o.num_pages));
  std::printf("upload + allocation: %.1f s\n", secs(t1, t2));

  // Prefill: warm up once, then time fresh sequences (each step starts from position 0).
  std::vector<double> times;
  int64_t next_seq = 0;
  for (const Args::Variant& var : a.variants) {
    apply(a, var);
    times.clear();
    for (int64_t r = 0; r < 4; ++r) {
      const model::ForwardBatch b = prefill_batch(next_seq, a.prefill_seqs, a.prefill_len, c.vocab_size);
      double t = 0;
      MLA_TRY(timed_step(*be, b, &t));
      if (r > 0) times.push_back(t);
      for (int64_t q = 0; q < a.prefill_seqs; ++q) be->release_sequence(next_seq + q);
      next_seq += a.prefill_seqs;
    }
    std::sort(times.begin(), times.end());
    const double tp = times[times.size() / 2];
    std::printf("prefill %lld x %lld tokens, %s: %.1f ms, %.0f tokens/s (median of %zu)\n",
                static_cast<long long>(a.prefill_seqs), static_cast<long long>(a.prefill_len), var.label.c_str(),
                tp * 1e3, double(a.prefill_seqs * a.prefill_len) / tp, times.size());
  }

  std::printf("| batch | context | variant | decode step ms | tokens/s |\n|---|---|---|---|---|\n");
  for (int64_t B : a.batches) {
    // Contexts through prefill steps of at most max_tokens tokens.
    std::vector<int64_t> ids;
    for (int64_t q = 0; q < B; ++q) ids.push_back(next_seq++);
    apply(a, a.variants[0]);
    for (int64_t q0 = 0; q0 < B;) {
      const int64_t n = std::max<int64_t>(1, std::min(B - q0, max_tokens / a.context));
      model::ForwardBatch b = prefill_batch(ids[static_cast<size_t>(q0)], n, a.context, c.vocab_size);
      double t = 0;
      MLA_TRY(timed_step(*be, b, &t));
      q0 += n;
    }
    int64_t pos = a.context;
    for (const Args::Variant& var : a.variants) {
      apply(a, var);
      times.clear();
      for (int64_t step = 0; step < a.steps + 2; ++step, ++pos) {
        model::ForwardBatch b;
        for (int64_t q = 0; q < B; ++q) {
          b.seqs.push_back({.seq_id = ids[static_cast<size_t>(q)], .start_pos = pos, .num_tokens = 1});
          b.token_ids.push_back(static_cast<int32_t>((q * 31 + pos) % c.vocab_size));
        }
        double t = 0;
        MLA_TRY(timed_step(*be, b, &t));
        if (step >= 2) times.push_back(t);
      }
      std::sort(times.begin(), times.end());
      const double td = times[times.size() / 2];
      std::printf("| %lld | %lld | %s | %.2f | %.0f |\n", static_cast<long long>(B), static_cast<long long>(a.context),
                  var.label.c_str(), td * 1e3, double(B) / td);
      std::fflush(stdout);
    }
    for (int64_t id : ids) be->release_sequence(id);
  }
  return Status::ok();
}

}  // namespace

int model_bench_main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // rows reach a log even if a time limit stops the run
  Args a;
  if (!parse(argc, argv, &a)) {
    std::fprintf(stderr, "usage: bench_model [--preset P] [--layers N] [--prefill-seqs S] [--prefill-len L] "
                         "[--context C] [--batches 1,64,256] [--steps N] [--kv-cache-dtype auto|fp8|auto,fp8] "
                         "[--moe-path grouped|per_expert|both] [--variants 'label:K=V+K=V;label2:']\n");
    return 2;
  }
  model::ModelConfig c;
  Status s = model::preset_config(a.preset, &c);
  if (!s.is_ok()) return fail(s);
  if (a.layers > 0) c.num_hidden_layers = a.layers;
  const int64_t max_batch = *std::max_element(a.batches.begin(), a.batches.end());
  const int64_t max_tokens = std::max(a.prefill_seqs * a.prefill_len, int64_t{8192});

  const auto t0 = Clock::now();
  model::ModelWeights w;
  s = loader::make_dummy_weights(c, 1, DType::kBf16, &w);
  if (!s.is_ok()) return fail(s);
  const auto t1 = Clock::now();
  std::printf("dummy weights on the host: %.1f s\n", secs(t0, t1));
  for (KvFormat kv : a.kvs) {
    s = run_format(a, c, w, kv, max_batch, max_tokens);
    if (!s.is_ok()) return fail(s);
  }
  return 0;
}
