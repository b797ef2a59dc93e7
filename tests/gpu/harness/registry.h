#pragma once
// The GPU case registry (in the spirit of ggml's test-backend-ops): every case names its op, carries its
// own tolerance with a comment saying why, and a run function that fills a report. The harness main
// registers each case as its own GoogleTest test, checks the report against the tolerance, prints one
// summary line per case, and fails on NaN, tolerance or guard violations.
#include <functional>
#include <string>
#include <vector>

#include "common/metrics.h"
#include "mla/core/status.h"

namespace mla::test {

struct CaseMetric {
  std::string what;             // "out", "lse", ...
  ErrorStats stats;
  const Tolerance* tol = nullptr;  // its own limits (a static Tolerance), else the case's
};

struct CaseReport {
  std::vector<CaseMetric> metrics;  // one per checked output (out, lse, bytes...)
  std::string note;                 // anything worth printing (e.g. error vs bf16)
  void add(std::string what, ErrorStats s, const Tolerance* own = nullptr) {
    metrics.push_back({std::move(what), s, own});
  }
};

struct GpuCase {
  std::string op;     // "mla_decode", "fp8_convert", ...
  std::string name;   // shape/format description, unique within the op
  Tolerance tol;      // applied to every metric of the report that does not bring its own
  std::function<Status(CaseReport*)> run;
};

std::vector<GpuCase>& gpu_cases();

// MLA_SMALL_CASES=1 (the compute-sanitizer runs of scripts/gpu_check.sh --sanitize): a test file that honours it
// registers only the cases it marks or bounds as small.
bool small_cases();

struct CaseRegistrar {
  explicit CaseRegistrar(std::function<void(std::vector<GpuCase>&)> add) { add(gpu_cases()); }
};

}  // namespace mla::test

#define MLA_CONCAT_INNER(a, b) a##b
#define MLA_CONCAT(a, b) MLA_CONCAT_INNER(a, b)
// MLA_GPU_CASES([](std::vector<GpuCase>& cases) { cases.push_back({...}); });
#define MLA_GPU_CASES(fn) static ::mla::test::CaseRegistrar MLA_CONCAT(mla_cases_, __LINE__)(fn)
