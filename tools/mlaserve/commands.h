#pragma once
// The subcommands of mlaserve. Each registers its options on the CLI11 app and, when chosen, sets
// `run` to the function main() calls after parsing.
#include <cstdio>
#include <functional>

#include "mla/core/status.h"

namespace CLI { class App; }

namespace mla::cli {

void add_generate(CLI::App& root, std::function<int()>* run);
void add_bench_throughput(CLI::App& bench, std::function<int()>* run);
void add_bench_decode(CLI::App& bench, std::function<int()>* run);
void add_plan_decode(CLI::App& plan, std::function<int()>* run);

// Prints a failed Status as one line on stderr; the exit code for it.
inline int report(const Status& s) {
  std::fprintf(stderr, "mlaserve: %s\n", s.to_string().c_str());
  return s.code() == StatusCode::kInvalidArgument ? 2 : 1;
}

}  // namespace mla::cli
