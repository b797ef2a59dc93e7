// mla_model_logits: the CUDA model's logits for given token ids, from a Hugging Face checkpoint directory,
// for comparing against another implementation (scripts/check_v2lite_vs_transformers.py compares them with
// transformers'). Loads the checkpoint once (memory mapped, bf16 tensors stay in the mapping), then for each
// KV-cache format uploads it to the GPU and writes:
//   OUT.<kv>.prefill.safetensors  "logits" f32 [P, T, V]: one step holding all P prompts, each a whole-prompt
//                                 prefill chunk (expanded attention), every row's logits
//   OUT.<kv>.decode.safetensors   (with --decode-from N, 0 < N < T) rows < N from one step prefilling the first
//                                 N tokens of every prompt, rows >= N from T - N decode steps of one token per
//                                 prompt (absorbed attention over the paged cache written by the steps before)
// The prompts file is a safetensors file with "input_ids" (i64 or i32, [P, T]). --device cpu runs the CPU
// backend instead (fp32 activations and cache; "auto" only), so the comparison can be tried on a small model
// on a machine without a GPU.
//
//   mla_model_logits --model DIR --prompts FILE --out PREFIX [--device cuda|cpu] [--kv-cache-dtype auto,fp8]
//                    [--decode-from N]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "mla/core/kv_format.h"
#include "mla/loader/safetensors.h"
#include "mla/loader/weights_loader.h"
#include "mla/model/cpu_backend.h"
#include "mla/model/deepseek_v2.h"
#if defined(MLA_WITH_CUDA)
#include "mla/model/cuda_backend.h"
#endif

namespace {

using namespace mla;
using Clock = std::chrono::steady_clock;
constexpr const char* kOp = "mla_model_logits";

double secs(Clock::time_point a) { return std::chrono::duration<double>(Clock::now() - a).count(); }

struct Args {
  std::string model, prompts, out, device = "cuda";
  std::vector<std::string> kv = {"auto"};
  int64_t decode_from = 0;  // 0: no decode run
};

std::vector<std::string> split_commas(const std::string& v) {
  std::vector<std::string> r;
  size_t p = 0;
  while (p <= v.size()) {
    const size_t q = std::min(v.find(',', p), v.size());
    if (q > p) r.push_back(v.substr(p, q - p));
    p = q + 1;
  }
  return r;
}

bool parse(int argc, char** argv, Args* a) {
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--model") a->model = v;
    else if (k == "--prompts") a->prompts = v;
    else if (k == "--out") a->out = v;
    else if (k == "--device") a->device = v;
    else if (k == "--kv-cache-dtype") a->kv = split_commas(v);
    else if (k == "--decode-from") a->decode_from = std::atoll(v.c_str());
    else return false;
  }
  return argc % 2 == 1 && !a->model.empty() && !a->prompts.empty() && !a->out.empty() && !a->kv.empty();
}

// Peak and current host memory of this process (kB), from /proc/self/status: RssAnon is what the process
// allocated itself; RssFile is the mapped checkpoint's page cache, shared with the kernel's cache.
std::string host_memory() {
  std::ifstream f("/proc/self/status");
  std::string line, r;
  while (std::getline(f, line))
    for (const char* key : {"VmHWM", "RssAnon", "RssFile"})
      if (line.rfind(key, 0) == 0) r += line.substr(0, line.find_last_not_of(" \t") + 1) + "; ";
  return r;
}

// Prompts [P, T] as int32 rows.
Status read_prompts(const std::string& path, std::vector<std::vector<int32_t>>* out) {
  std::shared_ptr<loader::SafetensorsFile> f;
  MLA_TRY(loader::SafetensorsFile::open(path, &f));
  const loader::TensorInfo* t = f->find("input_ids");
  if (!t || t->shape.size() != 2 || (t->dtype != DType::kInt64 && t->dtype != DType::kInt32))
    return Status::invalid(kOp, path + ": expected \"input_ids\" i64 or i32 [P, T]");
  for (int64_t p = 0; p < t->shape[0]; ++p) {
    std::vector<int32_t> row;
    for (int64_t i = 0; i < t->shape[1]; ++i) {
      const int64_t j = p * t->shape[1] + i;
      row.push_back(t->dtype == DType::kInt64 ? static_cast<int32_t>(static_cast<const int64_t*>(f->data(*t))[j])
                                               : static_cast<const int32_t*>(f->data(*t))[j]);
    }
    out->push_back(std::move(row));
  }
  return Status::ok();
}

// A backend and how to read its logits into host floats, row-major [rows · V].
struct Runner {
  std::unique_ptr<model::Backend> be;
  bool on_gpu = false;

  Status step(const model::ForwardBatch& b, std::vector<float>* logits) {
    model::DeepseekV2 m(be.get());
    TensorView out;
    MLA_TRY(m.forward(b, &out));
#if defined(MLA_WITH_CUDA)
    if (on_gpu) return static_cast<model::CudaBackend*>(be.get())->download(out, logits);
#endif
    logits->resize(static_cast<size_t>(out.shape[0] * out.shape[1]));
    for (int64_t r = 0; r < out.shape[0]; ++r)
      std::copy_n(out.ptr<const float>() + r * out.stride[0], out.shape[1], logits->begin() + r * out.shape[1]);
    return Status::ok();
  }
};

Status make_runner(const std::string& device, const model::ModelWeights& w, KvFormat kv, int64_t P, int64_t T,
                   Runner* r) {
  if (device == "cpu") {
    if (kv != KvFormat::kBf16)
      return Status::unsupported(kOp, "--device cpu keeps an fp32 cache: --kv-cache-dtype auto only");
    std::unique_ptr<model::CpuBackend> be;
    MLA_TRY(model::CpuBackend::create(w, &be));
    r->be = std::move(be);
    return Status::ok();
  }
  if (device != "cuda") return Status::invalid(kOp, "--device must be cuda or cpu, not " + device);
#if defined(MLA_WITH_CUDA)
  const model::ModelConfig& c = w.config;
  model::CudaBackendOptions o;
  o.kv_format = kv;
  o.num_pages = P * ((T + 63) / 64) + 8;
  o.max_batch_tokens = P * T;
  // Per-layer activations of one step of P·T tokens (engine_setup's sizing) plus the fp32 logits [P·T, V],
  // 50 % headroom; MoE scratch for P·T·(top-k + shared) sorted rows.
  const int64_t mlp =
      std::max(c.intermediate_size, c.moe_intermediate_size * (c.num_experts_per_tok + c.n_shared_experts));
  const int64_t per_layer =
      c.num_attention_heads * (c.qk_head_dim() + c.v_head_dim) + c.latent_dim() + 3 * mlp + 6 * c.hidden_size;
  o.activation_bytes =
      static_cast<size_t>(1.5 * double(P * T) * double(c.num_hidden_layers * per_layer * 2 + 4 * c.vocab_size)) +
      (size_t{256} << 20);
  o.scratch_bytes = static_cast<size_t>(1.5 * double(P * T) * double(c.num_experts_per_tok + c.n_shared_experts) *
                                        double(c.hidden_size + 3 * c.moe_intermediate_size) * 2.0) +
                    (size_t{256} << 20);
  std::unique_ptr<model::CudaBackend> be;
  MLA_TRY(model::CudaBackend::create(w, o, &be));
  r->be = std::move(be);
  r->on_gpu = true;
  return Status::ok();
#else
  return Status::unsupported(kOp, "built without CUDA: use --device cpu");
#endif
}

// Logits [P, T, V] for the prompts: all prompts prefilled whole in one step (decode_from == 0), or the
// first `decode_from` tokens prefilled and the rest decoded one token per prompt per step.
Status run_prompts(Runner& r, const std::vector<std::vector<int32_t>>& prompts, int64_t decode_from,
                   int64_t seq0, int64_t V, std::vector<float>* out) {
  const int64_t P = static_cast<int64_t>(prompts.size()), T = static_cast<int64_t>(prompts[0].size());
  const int64_t first = decode_from > 0 ? decode_from : T;
  out->assign(static_cast<size_t>(P * T * V), 0.f);
  auto place = [&](const std::vector<float>& got, int64_t row, int64_t p, int64_t pos) {
    std::copy_n(got.begin() + row * V, V, out->begin() + (p * T + pos) * V);
  };
  model::ForwardBatch b;
  for (int64_t p = 0; p < P; ++p) {
    b.seqs.push_back({.seq_id = seq0 + p, .start_pos = 0, .num_tokens = first});
    b.token_ids.insert(b.token_ids.end(), prompts[p].begin(), prompts[p].begin() + first);
  }
  std::vector<float> got;
  MLA_TRY(r.step(b, &got));
  for (int64_t p = 0; p < P; ++p)
    for (int64_t i = 0; i < first; ++i) place(got, p * first + i, p, i);
  for (int64_t pos = first; pos < T; ++pos) {
    model::ForwardBatch d;
    for (int64_t p = 0; p < P; ++p) {
      d.seqs.push_back({.seq_id = seq0 + p, .start_pos = pos, .num_tokens = 1});
      d.token_ids.push_back(prompts[p][pos]);
    }
    MLA_TRY(r.step(d, &got));
    for (int64_t p = 0; p < P; ++p) place(got, p, p, pos);
  }
  for (int64_t p = 0; p < P; ++p) r.be->release_sequence(seq0 + p);
  return Status::ok();
}

Status write_logits(const std::string& path, const std::vector<float>& v, int64_t P, int64_t T, int64_t V) {
  return loader::write_safetensors(path, {{"logits", DType::kFp32, {P, T, V}, v.data()}});
}

Status run(const Args& a) {
  std::vector<std::vector<int32_t>> prompts;
  MLA_TRY(read_prompts(a.prompts, &prompts));
  const int64_t P = static_cast<int64_t>(prompts.size()), T = P ? static_cast<int64_t>(prompts[0].size()) : 0;
  if (P == 0 || T == 0) return Status::invalid(kOp, "no prompts in " + a.prompts);
  if (a.decode_from < 0 || a.decode_from >= T)
    return Status::invalid(kOp, "--decode-from must be in [0, " + std::to_string(T) + ")");

  auto t0 = Clock::now();
  model::ModelWeights w;
  MLA_TRY(loader::load_model(a.model, &w, {.progress = loader::ProgressMode::kOff}));
  const model::ModelConfig& c = w.config;
  const int64_t V = c.vocab_size;
  std::printf("loaded %s (%lld layers, vocab %lld) in %.1f s (mapped); %lld prompts x %lld tokens\n", a.model.c_str(),
              static_cast<long long>(c.num_hidden_layers), static_cast<long long>(V), secs(t0),
              static_cast<long long>(P), static_cast<long long>(T));

  for (const std::string& kv_name : a.kv) {
    KvFormat kv = KvFormat::kBf16;
    MLA_TRY(parse_kv_format(kv_name, &kv));
    t0 = Clock::now();
    Runner r;
    MLA_TRY(make_runner(a.device, w, kv, P, T, &r));
    std::printf("[%s] backend %s created (upload + allocation): %.1f s\n", kv_name.c_str(), a.device.c_str(), secs(t0));
    std::vector<int64_t> modes = {0};
    if (a.decode_from > 0) modes.push_back(a.decode_from);
    for (int64_t from : modes) {
      std::vector<float> logits;
      t0 = Clock::now();
      MLA_TRY(run_prompts(r, prompts, from, from == 0 ? 0 : 1000, V, &logits));
      const double tr = secs(t0);
      const std::string path = a.out + "." + kv_name + (from == 0 ? ".prefill" : ".decode") + ".safetensors";
      MLA_TRY(write_logits(path, logits, P, T, V));
      std::printf("[%s] %s: %.2f s (incl. logits download) -> %s\n", kv_name.c_str(),
                  from == 0 ? "prefill of whole prompts" : ("prefill " + std::to_string(from) + " then decode").c_str(),
                  tr, path.c_str());
    }
  }
  std::printf("host memory: %s\n", host_memory().c_str());
  return Status::ok();
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // progress lines reach a log file as they happen
  Args a;
  if (!parse(argc, argv, &a)) {
    std::fprintf(stderr, "usage: mla_model_logits --model DIR --prompts FILE --out PREFIX [--device cuda|cpu] "
                         "[--kv-cache-dtype auto,fp8] [--decode-from N]\n");
    return 2;
  }
  const Status s = run(a);
  if (!s.is_ok()) {
    std::fprintf(stderr, "%s\n", s.to_string().c_str());
    return 1;
  }
  return 0;
}
