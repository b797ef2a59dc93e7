// KV-cache ops on the H200 against their CPU references (issue 5): concat_and_cache_mla and
// gather_and_maybe_dequant_cache_mla byte for byte over every format, page sizes 16/32/64, t in {1, 42, 4096},
// random slot mappings with padding (untouched slots must keep the harness poison), saturation, NaN/inf,
// random block tables, seq_starts != 0, the 8 x 512 tokens at scale 0.1 round trip; merge_attn_states within
// float rounding (empty sides included); fp8 per-tensor quantization and absmax exactly.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "common/fp8_cases.h"
#include "common/random.h"
#include "harness/device_buffer.h"
#include "harness/registry.h"
#include "mla/core/cuda_check.h"
#include "mla/core/half.h"
#include "mla/ops/concat_and_cache_mla.h"
#include "mla/ops/gather_cache_mla.h"
#include "mla/ops/merge_attn_states.h"
#include "mla/ops/quantize_fp8.h"

namespace mla::test {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr uint8_t kPoison = DeviceBuffer::kPoisonByte;

// Concat, gather and quantize are byte-level: the kernels call the same codecs as the reference
// (src/ops/common/cache_codec.h; the e4m3 instruction is proven equal to the host codec by test_fp8_convert).
constexpr Tolerance kExact{0.0, 0.0, "byte-level op sharing the reference's codecs: any differing byte is a bug"};

// Storage of floats in dtype dt (bf16, fp16, fp32) as raw bytes.
std::vector<uint8_t> to_raw(DType dt, const std::vector<float>& v) {
  std::vector<uint8_t> out(v.size() * dtype_size(dt));
  for (size_t i = 0; i < v.size(); ++i) {
    if (dt == DType::kFp32) {
      std::memcpy(&out[i * 4], &v[i], 4);
    } else {
      const uint16_t h = dt == DType::kBf16 ? float_to_bf16(v[i]) : float_to_fp16(v[i]);
      std::memcpy(&out[i * 2], &h, 2);
    }
  }
  return out;
}

double raw_value(DType dt, const uint8_t* p) {
  if (dt == DType::kFp32) { float f; std::memcpy(&f, p, 4); return f; }
  uint16_t h;
  std::memcpy(&h, p, 2);
  return dt == DType::kBf16 ? bf16_to_float(h) : fp16_to_float(h);
}

ErrorStats compare_bytes(const std::vector<uint8_t>& got, const std::vector<uint8_t>& want) {
  return compare(want.size(), [&](size_t i) { return double(got[i]); }, [&](size_t i) { return double(want[i]); });
}

template <class T>
Status upload_new(DeviceBuffer* d, const std::vector<T>& host) {
  MLA_TRY(d->alloc(std::max<size_t>(host.size() * sizeof(T), 16)));
  return host.empty() ? Status::ok() : d->upload(host);
}

Status sync(const char* op) {
  MLA_CUDA_TRY(op, cudaDeviceSynchronize());
  return Status::ok();
}

// ---------------------------------------------------------------------------------------------------
// concat_and_cache_mla

struct ConcatSpec {
  KvFormat format;
  DType in;
  int page_size;
  int t;
  float k_scale;
  bool split;  // kv_c / k_pe as column slices of one [t, 576] buffer
};

// [t, 576] values, N(0, 2), with planted specials: NaN, ±inf, values beyond ±448·scale (fp8) and beyond
// the fp8_ds tile amax of their neighbours, zeros and an all-zero fp8_ds tile.
std::vector<float> concat_rows(int t, float k_scale, std::mt19937_64& rng) {
  std::vector<float> v = randn(rng, size_t(t) * kDimQK, 2.f);
  for (int i = 0; i < t; i += 7) {
    float* r = &v[size_t(i) * kDimQK];
    r[(i * 13 + 1) % kDimQK] = std::nanf("");
    r[(i * 29 + 2) % kDimQK] = kInf;
    r[(i * 31 + 3) % kDimQK] = -kInf;
    r[(i * 37 + 4) % kDimQK] = 600.f * k_scale;
    r[(i * 41 + 5) % kDimQK] = -1e4f * k_scale;
    r[(i * 43 + 6) % kDimQK] = -0.f;
  }
  if (t > 1)
    for (int j = 256; j < 384; ++j) v[kDimQK + j] = 0.f;  // token 1, tile 2
  return v;
}

Status run_concat(const ConcatSpec& s, const std::string& name, CaseReport* rep) {
  auto rng = case_rng(name);
  const int t = s.t;
  const int64_t num_pages = (int64_t(t) * 5 / 4 + s.page_size - 1) / s.page_size + 1;
  const int64_t capacity = num_pages * s.page_size;
  const int tb = kv_bytes_per_token(s.format);
  const size_t es = dtype_size(s.in);

  const std::vector<float> rows = concat_rows(t, s.k_scale, rng);
  std::vector<float> kvc(size_t(t) * kDimLatent), kpe(size_t(t) * kDimRope);
  for (int i = 0; i < t; ++i) {
    std::copy_n(&rows[size_t(i) * kDimQK], kDimLatent, &kvc[size_t(i) * kDimLatent]);
    std::copy_n(&rows[size_t(i) * kDimQK + kDimLatent], kDimRope, &kpe[size_t(i) * kDimRope]);
  }
  const std::vector<uint8_t> raw_rows = to_raw(s.in, rows), raw_kvc = to_raw(s.in, kvc), raw_kpe = to_raw(s.in, kpe);
  std::vector<int64_t> perm(capacity);
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng);
  std::vector<int64_t> slots(perm.begin(), perm.begin() + t);
  for (int i = 1; i < t; ++i)
    if (rng() % 5 == 0) slots[i] = -1;  // padding; token 0 always written

  auto bind = [&](ConcatAndCacheMlaParams& p, const void* rows_p, const void* kvc_p, const void* kpe_p,
                  const void* slots_p, void* cache_p) {
    p.format = s.format;
    p.k_scale = s.k_scale;
    if (s.split) {
      p.kv_c = TensorView::contiguous(rows_p, s.in, {t, kDimLatent});
      p.kv_c.stride[0] = kDimQK;
      p.k_pe = TensorView::contiguous(static_cast<const uint8_t*>(rows_p) + kDimLatent * es, s.in, {t, kDimRope});
      p.k_pe.stride[0] = kDimQK;
    } else {
      p.kv_c = TensorView::contiguous(kvc_p, s.in, {t, kDimLatent});
      p.k_pe = TensorView::contiguous(kpe_p, s.in, {t, kDimRope});
    }
    p.slot_mapping = TensorView::contiguous(slots_p, DType::kInt64, {t});
    p.kv_cache =
        TensorView::contiguous(cache_p, kv_cache_dtype(s.format), {num_pages, s.page_size, kv_token_elems(s.format)});
  };

  // Reference on a cache holding the same poison the device buffer starts with.
  std::vector<uint8_t> want(size_t(capacity) * tb, kPoison);
  ConcatAndCacheMlaParams hp;
  bind(hp, raw_rows.data(), raw_kvc.data(), raw_kpe.data(), slots.data(), want.data());
  MLA_TRY(ref::concat_and_cache_mla(hp));

  DeviceBuffer d_rows, d_kvc, d_kpe, d_slots, d_cache;
  MLA_TRY(upload_new(&d_rows, raw_rows));
  MLA_TRY(upload_new(&d_kvc, raw_kvc));
  MLA_TRY(upload_new(&d_kpe, raw_kpe));
  MLA_TRY(upload_new(&d_slots, slots));
  MLA_TRY(d_cache.alloc(want.size()));  // poisoned by the harness
  ConcatAndCacheMlaParams dp;
  bind(dp, d_rows.data(), d_kvc.data(), d_kpe.data(), d_slots.data(), d_cache.data());
  MLA_TRY(cuda::concat_and_cache_mla(dp, nullptr));
  MLA_TRY(sync("concat_and_cache_mla"));
  std::vector<uint8_t> got(want.size());
  MLA_TRY(d_cache.download(&got));
  for (const auto* b : {&d_rows, &d_kvc, &d_kpe, &d_slots, &d_cache}) MLA_TRY(b->check_guards("concat buffers"));

  rep->add("cache_bytes", compare_bytes(got, want));
  // The slots no token maps to (padding included) must still hold the poison, byte for byte.
  std::vector<bool> written(capacity, false);
  for (int64_t sl : slots)
    if (sl >= 0) written[sl] = true;
  std::vector<uint8_t> untouched_got, untouched_want;
  for (int64_t sl = 0; sl < capacity; ++sl) {
    if (written[sl]) continue;
    untouched_got.insert(untouched_got.end(), got.begin() + sl * tb, got.begin() + (sl + 1) * tb);
    untouched_want.insert(untouched_want.end(), tb, kPoison);
  }
  rep->add("untouched_slots", compare_bytes(untouched_got, untouched_want));
  return Status::ok();
}

// ---------------------------------------------------------------------------------------------------
// gather_and_maybe_dequant_cache_mla

struct GatherSpec {
  KvFormat format;
  DType out;
  int page_size;
  int batch;
  int max_len;     // lengths uniform in [0, max_len]
  bool starts;     // random seq_starts in [0, 200]
  float k_scale;
  int row_offset;  // cu_seq_lens[0]: dst rows before it must keep the poison
};

// A cache of random bytes: every pattern is a legal bf16/fp16/e4m3 value (NaNs included); fp8_ds tile scales
// are overwritten with positive floats 2^-8 .. 2^3.
std::vector<uint8_t> random_cache(KvFormat f, int64_t slots, std::mt19937_64& rng) {
  const int tb = kv_bytes_per_token(f);
  std::vector<uint8_t> c(size_t(slots) * tb);
  for (size_t i = 0; i < c.size(); i += 8) {
    const uint64_t r = rng();
    std::memcpy(&c[i], &r, std::min<size_t>(8, c.size() - i));
  }
  if (f == KvFormat::kFp8Ds) {
    std::uniform_real_distribution<float> u(-8.f, 3.f);
    for (int64_t s = 0; s < slots; ++s)
      for (int tile = 0; tile < 4; ++tile) {
        const float sc = std::exp2(u(rng));
        std::memcpy(&c[size_t(s) * tb + Fp8DsLayout::kScalesOffset + 4 * tile], &sc, 4);
      }
  }
  return c;
}

struct Sequences {
  std::vector<int32_t> block_table, cu, starts;
  int max_pages = 0;
  int64_t num_pages = 0;
};

// Random lengths and starts; pages handed out from a random permutation; unused entries are -1 sentinels.
Sequences random_sequences(const std::vector<int>& lens, const std::vector<int>& starts, int page_size,
                           std::mt19937_64& rng) {
  Sequences q;
  const int b = static_cast<int>(lens.size());
  for (int i = 0; i < b; ++i) q.max_pages = std::max(q.max_pages, (starts[i] + lens[i] + page_size - 1) / page_size);
  q.max_pages += 1;
  q.num_pages = int64_t(b) * q.max_pages + 2;
  std::vector<int32_t> perm(q.num_pages);
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng);
  q.block_table.assign(size_t(b) * q.max_pages, -1);
  q.cu.assign(b + 1, 0);
  int next = 0;
  for (int i = 0; i < b; ++i) {
    for (int blk = starts[i] / page_size; blk < (starts[i] + lens[i] + page_size - 1) / page_size; ++blk)
      q.block_table[size_t(i) * q.max_pages + blk] = perm[next++];
    q.cu[i + 1] = q.cu[i] + lens[i];
  }
  q.starts = starts;
  return q;
}

// Runs the reference and the kernel over the same cache; dst of both starts as the harness poison.
Status gather_both(KvFormat format, DType out, int page_size, float k_scale, const Sequences& q, bool with_starts,
                   const std::vector<uint8_t>& host_cache, const DeviceBuffer* dev_cache, int64_t n_rows,
                   std::vector<uint8_t>* got, std::vector<uint8_t>* want) {
  const int b = static_cast<int>(q.cu.size()) - 1;
  auto bind = [&](GatherCacheMlaParams& p, const void* cache, void* dst, const void* bt, const void* cu,
                  const void* st) {
    p.format = format;
    p.k_scale = k_scale;
    p.kv_cache =
        TensorView::contiguous(cache, kv_cache_dtype(format), {q.num_pages, page_size, kv_token_elems(format)});
    p.dst = TensorView::contiguous(dst, out, {n_rows, kDimQK});
    p.block_table = TensorView::contiguous(bt, DType::kInt32, {b, q.max_pages});
    p.cu_seq_lens = TensorView::contiguous(cu, DType::kInt32, {b + 1});
    if (with_starts) p.seq_starts = TensorView::contiguous(st, DType::kInt32, {b});
  };
  want->assign(size_t(n_rows) * kDimQK * dtype_size(out), kPoison);
  GatherCacheMlaParams hp;
  bind(hp, host_cache.data(), want->data(), q.block_table.data(), q.cu.data(), q.starts.data());
  MLA_TRY(ref::gather_and_maybe_dequant_cache_mla(hp));

  DeviceBuffer d_dst, d_bt, d_cu, d_st;
  MLA_TRY(d_dst.alloc(want->size()));
  MLA_TRY(upload_new(&d_bt, q.block_table));
  MLA_TRY(upload_new(&d_cu, q.cu));
  MLA_TRY(upload_new(&d_st, q.starts));
  GatherCacheMlaParams dp;
  bind(dp, dev_cache->data(), d_dst.data(), d_bt.data(), d_cu.data(), d_st.data());
  MLA_TRY(cuda::gather_and_maybe_dequant_cache_mla(dp, nullptr));
  MLA_TRY(sync("gather_and_maybe_dequant_cache_mla"));
  got->resize(want->size());
  MLA_TRY(d_dst.download(got));
  for (const DeviceBuffer* x : std::initializer_list<const DeviceBuffer*>{&d_dst, &d_bt, &d_cu, &d_st, dev_cache})
    MLA_TRY(x->check_guards("gather buffers"));
  return Status::ok();
}

Status run_gather(const GatherSpec& s, const std::string& name, CaseReport* rep) {
  auto rng = case_rng(name);
  std::vector<int> lens(s.batch), starts(s.batch, 0);
  for (int i = 0; i < s.batch; ++i) {
    lens[i] = static_cast<int>(rng() % (s.max_len + 1));
    if (s.starts) starts[i] = static_cast<int>(rng() % 201);
  }
  if (s.batch > 0) lens[0] = s.max_len;  // at least one full-length sequence
  Sequences q = random_sequences(lens, starts, s.page_size, rng);
  for (int32_t& c : q.cu) c += s.row_offset;
  const std::vector<uint8_t> cache = random_cache(s.format, q.num_pages * s.page_size, rng);
  DeviceBuffer d_cache;
  MLA_TRY(upload_new(&d_cache, cache));
  const int64_t n_rows = q.cu.back() + 3;  // 3 spare rows: must keep the poison
  std::vector<uint8_t> got, want;
  MLA_TRY(gather_both(s.format, s.out, s.page_size, s.k_scale, q, s.starts, cache, &d_cache, n_rows, &got, &want));
  rep->add("dst_bytes", compare_bytes(got, want));
  return Status::ok();
}

// vLLM's case: 8 sequences x 512 tokens written at scale 0.1 by concat, read back by gather (kernels end to end
// against references end to end).
Status run_round_trip(KvFormat format, DType out, const std::string& name, CaseReport* rep) {
  auto rng = case_rng(name);
  constexpr int kBatch = 8, kLen = 512, kPage = 64;
  const float k_scale = 0.1f;
  const Sequences q = random_sequences(std::vector<int>(kBatch, kLen), std::vector<int>(kBatch, 0), kPage, rng);
  const int t = kBatch * kLen;
  std::vector<int64_t> slots(t);
  for (int b = 0; b < kBatch; ++b)
    for (int i = 0; i < kLen; ++i)
      slots[b * kLen + i] = int64_t(q.block_table[size_t(b) * q.max_pages + i / kPage]) * kPage + i % kPage;
  const std::vector<uint8_t> raw = to_raw(DType::kBf16, concat_rows(t, k_scale, rng));
  const int tb = kv_bytes_per_token(format);

  std::vector<uint8_t> host_cache(size_t(q.num_pages) * kPage * tb, kPoison);
  DeviceBuffer d_rows, d_slots, d_cache;
  MLA_TRY(upload_new(&d_rows, raw));
  MLA_TRY(upload_new(&d_slots, slots));
  MLA_TRY(d_cache.alloc(host_cache.size()));
  auto bind = [&](ConcatAndCacheMlaParams& p, const void* rows, const void* sl, void* cache) {
    p.format = format;
    p.k_scale = k_scale;
    p.kv_c = TensorView::contiguous(rows, DType::kBf16, {t, kDimLatent});
    p.kv_c.stride[0] = kDimQK;
    p.k_pe = TensorView::contiguous(static_cast<const uint8_t*>(rows) + 2 * kDimLatent, DType::kBf16, {t, kDimRope});
    p.k_pe.stride[0] = kDimQK;
    p.slot_mapping = TensorView::contiguous(sl, DType::kInt64, {t});
    p.kv_cache = TensorView::contiguous(cache, kv_cache_dtype(format), {q.num_pages, kPage, kv_token_elems(format)});
  };
  ConcatAndCacheMlaParams hp, dp;
  bind(hp, raw.data(), slots.data(), host_cache.data());
  bind(dp, d_rows.data(), d_slots.data(), d_cache.data());
  MLA_TRY(ref::concat_and_cache_mla(hp));
  MLA_TRY(cuda::concat_and_cache_mla(dp, nullptr));
  MLA_TRY(sync("concat_and_cache_mla"));
  std::vector<uint8_t> dev_cache(host_cache.size());
  MLA_TRY(d_cache.download(&dev_cache));
  rep->add("cache_bytes", compare_bytes(dev_cache, host_cache));

  std::vector<uint8_t> got, want;
  MLA_TRY(gather_both(format, out, kPage, k_scale, q, false, host_cache, &d_cache, t, &got, &want));
  rep->add("dst_bytes", compare_bytes(got, want));
  return Status::ok();
}

// ---------------------------------------------------------------------------------------------------
// merge_attn_states

struct MergeSpec {
  DType dt;
  int n, h, d;
};

Status run_merge(const MergeSpec& s, const std::string& name, CaseReport* rep) {
  auto rng = case_rng(name);
  const size_t numel = size_t(s.n) * s.h * s.d, nl = size_t(s.n) * s.h;
  std::vector<float> a = randn(rng, numel), b = randn(rng, numel), la = randn(rng, nl, 3.f), lb = randn(rng, nl, 3.f);
  // Special (token, head) rows; an empty side's out is NaN and must not leak into the result.
  auto row = [&](std::vector<float>& o, int t, int k) {
    std::fill_n(&o[(size_t(t) * s.h + k) * s.d], s.d, std::nanf(""));
  };
  auto l = [&](int t, int k) { return size_t(k) * s.n + t; };
  for (int t = 0; t < s.n; t += 5) {
    const int k = t % s.h;
    switch ((t / 5) % 5) {
      case 0: la[l(t, k)] = -kInf; row(a, t, k); break;
      case 1: lb[l(t, k)] = kInf; row(b, t, k); break;
      case 2: la[l(t, k)] = lb[l(t, k)] = -kInf; row(a, t, k); row(b, t, k); break;
      case 3: la[l(t, k)] = std::nanf(""); break;
      case 4: lb[l(t, k)] = la[l(t, k)] + 60.f; break;
    }
  }
  const std::vector<uint8_t> ra = to_raw(s.dt, a), rb = to_raw(s.dt, b);
  const size_t bytes = numel * dtype_size(s.dt);
  std::vector<uint8_t> want_out(bytes, kPoison);
  std::vector<float> want_lse(nl);
  auto bind = [&](MergeAttnStatesParams& p, void* o, void* lse, const void* pa, const void* pla, const void* pb,
                  const void* plb) {
    p.out = TensorView::contiguous(o, s.dt, {s.n, s.h, s.d});
    p.lse = TensorView::contiguous(lse, DType::kFp32, {s.h, s.n});
    p.out_a = TensorView::contiguous(pa, s.dt, {s.n, s.h, s.d});
    p.lse_a = TensorView::contiguous(pla, DType::kFp32, {s.h, s.n});
    p.out_b = TensorView::contiguous(pb, s.dt, {s.n, s.h, s.d});
    p.lse_b = TensorView::contiguous(plb, DType::kFp32, {s.h, s.n});
  };
  MergeAttnStatesParams hp, dp;
  bind(hp, want_out.data(), want_lse.data(), ra.data(), la.data(), rb.data(), lb.data());
  MLA_TRY(ref::merge_attn_states(hp));
  DeviceBuffer d_out, d_lse, d_a, d_la, d_b, d_lb;
  MLA_TRY(d_out.alloc(bytes));
  MLA_TRY(d_lse.alloc(nl * 4));
  MLA_TRY(upload_new(&d_a, ra));
  MLA_TRY(upload_new(&d_la, la));
  MLA_TRY(upload_new(&d_b, rb));
  MLA_TRY(upload_new(&d_lb, lb));
  bind(dp, d_out.data(), d_lse.data(), d_a.data(), d_la.data(), d_b.data(), d_lb.data());
  MLA_TRY(cuda::merge_attn_states(dp, nullptr));
  MLA_TRY(sync("merge_attn_states"));
  std::vector<uint8_t> got_out(bytes);
  std::vector<float> got_lse(nl);
  MLA_TRY(d_out.download(&got_out));
  MLA_TRY(d_lse.download(&got_lse));
  for (const auto* x : {&d_out, &d_lse, &d_a, &d_la, &d_b, &d_lb}) MLA_TRY(x->check_guards("merge buffers"));
  const size_t es = dtype_size(s.dt);
  rep->add("out", compare(numel, [&](size_t i) { return raw_value(s.dt, &got_out[i * es]); },
                          [&](size_t i) { return raw_value(s.dt, &want_out[i * es]); }));
  rep->add("lse", compare_vec(got_lse, want_lse));
  return Status::ok();
}

// ---------------------------------------------------------------------------------------------------
// quantize_fp8_per_tensor / fp8_absmax

Status run_quant(DType dt, int64_t n, int offset_elems, float scale, const std::string& name, CaseReport* rep) {
  auto rng = case_rng(name);
  std::vector<float> v = randn(rng, size_t(n), 40.f);
  const std::vector<float> edges = e4m3_edge_inputs();
  for (size_t i = 0; i < edges.size() && i < v.size(); ++i) v[(i * 7919) % v.size()] = edges[i] * scale;
  const std::vector<uint8_t> raw = to_raw(dt, v);
  const size_t es = dtype_size(dt);
  std::vector<uint8_t> want(size_t(n), kPoison);
  QuantizeFp8Params hp;
  hp.x = TensorView::contiguous(raw.data(), dt, {n});
  hp.out = TensorView::contiguous(want.data(), DType::kE4m3, {n});
  hp.scale = scale;
  MLA_TRY(ref::quantize_fp8_per_tensor(hp));
  float want_amax = -1.f;
  MLA_TRY(ref::fp8_absmax(hp.x, &want_amax));

  // offset_elems shifts both pointers off 16-byte alignment: the launcher must fall back to its scalar path.
  DeviceBuffer d_x, d_out, d_amax;
  MLA_TRY(d_x.alloc(raw.size() + offset_elems * es));
  MLA_TRY(d_x.upload(raw.data(), raw.size(), offset_elems * es));
  MLA_TRY(d_out.alloc(size_t(n) + offset_elems));
  MLA_TRY(d_amax.alloc(4));
  QuantizeFp8Params dp = hp;
  dp.x.data = d_x.as<uint8_t>() + offset_elems * es;
  dp.out.data = d_out.as<uint8_t>() + offset_elems;
  MLA_TRY(cuda::quantize_fp8_per_tensor(dp, nullptr));
  MLA_TRY(cuda::fp8_absmax(dp.x, d_amax.as<float>(), nullptr));
  MLA_TRY(sync("quantize_fp8_per_tensor"));
  std::vector<uint8_t> got(static_cast<size_t>(n));
  MLA_TRY(d_out.download(got.data(), got.size(), offset_elems));
  float got_amax = -2.f;
  MLA_TRY(d_amax.download(&got_amax, 4));
  for (const auto* x : {&d_x, &d_out, &d_amax}) MLA_TRY(x->check_guards("quant buffers"));
  rep->add("codes", compare_bytes(got, want));
  rep->add("amax", compare(1, [&](size_t) { return double(got_amax); }, [&](size_t) { return double(want_amax); }));
  return Status::ok();
}

// ---------------------------------------------------------------------------------------------------
// The CUDA launchers run the shared host validation (and merge's 16-byte alignment check) before any launch.

Status run_launcher_rejections(CaseReport* rep) {
  DeviceBuffer buf;
  MLA_TRY(buf.alloc(1 << 20));
  uint8_t* d = buf.as<uint8_t>();
  std::vector<Status> got;
  ConcatAndCacheMlaParams c;
  c.kv_c = TensorView::contiguous(d, DType::kInt32, {4, kDimLatent});  // wrong dtype
  c.k_pe = TensorView::contiguous(d, DType::kInt32, {4, kDimRope});
  c.slot_mapping = TensorView::contiguous(d, DType::kInt64, {4});
  c.kv_cache = TensorView::contiguous(d, DType::kBf16, {2, 16, kDimQK});
  got.push_back(cuda::concat_and_cache_mla(c, nullptr));
  GatherCacheMlaParams g;
  g.kv_cache = TensorView::contiguous(d, DType::kBf16, {2, 8, kDimQK});  // page size 8
  g.dst = TensorView::contiguous(d, DType::kBf16, {4, kDimQK});
  g.block_table = TensorView::contiguous(d, DType::kInt32, {1, 2});
  g.cu_seq_lens = TensorView::contiguous(d, DType::kInt32, {2});
  got.push_back(cuda::gather_and_maybe_dequant_cache_mla(g, nullptr));
  MergeAttnStatesParams m;
  m.out = TensorView::contiguous(d + 2, DType::kBf16, {2, 2, 8});  // not 16-byte aligned
  m.out_a = TensorView::contiguous(d, DType::kBf16, {2, 2, 8});
  m.out_b = TensorView::contiguous(d, DType::kBf16, {2, 2, 8});
  m.lse_a = TensorView::contiguous(d, DType::kFp32, {2, 2});
  m.lse_b = TensorView::contiguous(d, DType::kFp32, {2, 2});
  got.push_back(cuda::merge_attn_states(m, nullptr));
  QuantizeFp8Params q;
  q.x = TensorView::contiguous(d, DType::kBf16, {64});
  q.out = TensorView::contiguous(d, DType::kE4m3, {64});
  q.scale = 0.f;  // invalid
  got.push_back(cuda::quantize_fp8_per_tensor(q, nullptr));
  got.push_back(cuda::fp8_absmax(q.x, nullptr, nullptr));
  MLA_TRY(sync("launcher_rejections"));  // nothing was launched, nothing can have failed
  size_t accepted = 0;
  for (const Status& st : got) {
    if (st.is_ok()) ++accepted;
    else rep->note += st.to_string() + "; ";
  }
  rep->add("accepted_bad_calls", compare(1, [&](size_t) { return double(accepted); }, [](size_t) { return 0.0; }));
  return buf.check_guards("launcher_rejections");
}

// ---------------------------------------------------------------------------------------------------
// Registry

std::string fmt_name(KvFormat f) { return std::string(kv_format_name(f)); }
std::string dt_name(DType d) { return std::string(dtype_name(d)); }
constexpr KvFormat kFormats[] = {KvFormat::kBf16, KvFormat::kFp16, KvFormat::kFp8, KvFormat::kFp8Ds};

// MLA_SMALL_CASES=1 (compute-sanitizer runs in scripts/gpu_check.sh; harness small_cases()): only the cases that stay
// small.

void register_cases(std::vector<GpuCase>& cases) {
  const bool small = small_cases();
  for (KvFormat f : kFormats) {
    for (int ps : {16, 32, 64}) {
      for (int t : {1, 42, 4096}) {
        if (small && t > 42) continue;
        const ConcatSpec s{f, DType::kBf16, ps, t, f == KvFormat::kFp8 ? 0.1f : 1.f, t == 42};
        const std::string name =
            fmt_name(f) + "_bf16_p" + std::to_string(ps) + "_t" + std::to_string(t) + (s.split ? "_split" : "");
        cases.push_back(
            {"concat_and_cache_mla", name, kExact, [s, name](CaseReport* r) { return run_concat(s, name, r); }});
      }
    }
    // Other input dtypes (conversion paths) and a second fp8 scale.
    for (DType in : {DType::kFp16, DType::kFp32}) {
      const ConcatSpec s{f, in, 64, 333, f == KvFormat::kFp8 ? 0.37f : 1.f, in == DType::kFp32};
      const std::string name = fmt_name(f) + "_" + dt_name(in) + "_p64_t333" + (s.split ? "_split" : "");
      cases.push_back(
          {"concat_and_cache_mla", name, kExact, [s, name](CaseReport* r) { return run_concat(s, name, r); }});
    }
  }
  for (KvFormat f : kFormats) {
    for (DType out : {DType::kBf16, DType::kFp32}) {
      for (int ps : {16, 32, 64}) {
        for (bool starts : {false, true}) {
          const GatherSpec s{f, out, ps, 5, ps == 32 ? 700 : 300, starts, f == KvFormat::kFp8 ? 0.1f : 1.f, 0};
          const std::string name =
              fmt_name(f) + "_" + dt_name(out) + "_p" + std::to_string(ps) + (starts ? "_starts" : "");
          cases.push_back(
              {"gather_cache_mla", name, kExact, [s, name](CaseReport* r) { return run_gather(s, name, r); }});
        }
      }
      // The kernel works on tiles of 32 dst rows, one row resolved per lane: many short (and empty)
      // sequences put several sequence boundaries into every tile, and cu_seq_lens[0] = 45 starts the
      // first sequence inside a tile whose leading rows must stay untouched.
      const GatherSpec many{f, out, 16, 70, 23, true, f == KvFormat::kFp8 ? 0.37f : 1.f, 0};
      const std::string mname = fmt_name(f) + "_" + dt_name(out) + "_p16_70_short_seqs";
      cases.push_back(
          {"gather_cache_mla", mname, kExact, [many, mname](CaseReport* r) { return run_gather(many, mname, r); }});
      const GatherSpec offs{f, out, 64, 3, 100, false, f == KvFormat::kFp8 ? 0.1f : 1.f, 45};
      const std::string oname = fmt_name(f) + "_" + dt_name(out) + "_p64_rows_from_45";
      cases.push_back(
          {"gather_cache_mla", oname, kExact, [offs, oname](CaseReport* r) { return run_gather(offs, oname, r); }});
      if (small) continue;
      const GatherSpec big{f, out, 64, 1, 4096, true, f == KvFormat::kFp8 ? 0.1f : 1.f, 0};
      const std::string bname = fmt_name(f) + "_" + dt_name(out) + "_one_seq_4096_starts";
      cases.push_back(
          {"gather_cache_mla", bname, kExact, [big, bname](CaseReport* r) { return run_gather(big, bname, r); }});
      const std::string rname = fmt_name(f) + "_" + dt_name(out) + "_8x512_scale0.1";
      cases.push_back({"cache_round_trip", rname, kExact,
                       [f, out, rname](CaseReport* r) { return run_round_trip(f, out, rname, r); }});
    }
  }
  // merge: identical float formulas on both sides; they differ only by expf/logf (<= 2 ulp) and FMA
  // contraction, so outputs differ by a few float ulps, or one output-dtype ulp where that flips a rounding.
  const Tolerance merge_bf16{2e-3, 0.07, "a few values may round to the neighbouring bf16 (ulp 2^-5 at |x| ~ 4-8)"};
  const Tolerance merge_fp16{2e-4, 0.01, "a few values may round to the neighbouring fp16 (ulp 2^-8 at |x| ~ 4-8)"};
  const Tolerance merge_fp32{1e-6, 2e-5, "float rounding only: expf/logf ulps and FMA contraction (lse up to ~20)"};
  for (const MergeSpec& s : {MergeSpec{DType::kBf16, 1, 16, 128}, MergeSpec{DType::kBf16, 37, 16, 128},
                             MergeSpec{DType::kBf16, 4096, 16, 128}, MergeSpec{DType::kFp16, 513, 8, 128},
                             MergeSpec{DType::kFp32, 100, 128, 512}, MergeSpec{DType::kBf16, 77, 128, 512},
                             MergeSpec{DType::kFp32, 3, 5, 8}}) {
    if (small && int64_t(s.n) * s.h * s.d > (1 << 20)) continue;
    const std::string name =
        dt_name(s.dt) + "_n" + std::to_string(s.n) + "_h" + std::to_string(s.h) + "_d" + std::to_string(s.d);
    const Tolerance tol = s.dt == DType::kBf16 ? merge_bf16 : (s.dt == DType::kFp16 ? merge_fp16 : merge_fp32);
    cases.push_back({"merge_attn_states", name, tol, [s, name](CaseReport* r) { return run_merge(s, name, r); }});
  }
  cases.push_back({"cache_ops_validation", "launchers_reject_bad_args", kExact, run_launcher_rejections});
  struct Q { DType dt; int64_t n; int offset; float scale; };
  for (const Q& q : {Q{DType::kBf16, 128 * 4 * 576, 0, 0.05f}, Q{DType::kFp16, 100003, 0, 1.f},
                     Q{DType::kFp32, 1 << 20, 0, 0.37f}, Q{DType::kBf16, 4097, 1, 0.5f}, Q{DType::kFp32, 1, 0, 2.f},
                     // the decode tests' scales (q codes 50x and a third of the data): mostly pinned, and fine
                     Q{DType::kBf16, 65536, 0, 0.02f}, Q{DType::kFp16, 65537, 0, 3.f}}) {
    if (small && q.n > (1 << 17)) continue;
    const std::string name = dt_name(q.dt) + "_n" + std::to_string(q.n) + (q.offset ? "_unaligned" : "");
    cases.push_back({"quantize_fp8", name, kExact,
                     [q, name](CaseReport* r) { return run_quant(q.dt, q.n, q.offset, q.scale, name, r); }});
  }
}
MLA_GPU_CASES(register_cases);

}  // namespace
}  // namespace mla::test
