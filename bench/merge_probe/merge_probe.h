#pragma once
// bench_merge_probe: one CTA reading partials its grid has just written (merge_probe.cu).
#include "mla/core/status.h"

namespace mla::bench {
Status run_merge_probe(int reps);
}
