#pragma once
// bench_merge_probe: one CTA reading partials its grid has just written (merge_probe.cu).
namespace mla::bench {
int run_merge_probe(int reps);
}
