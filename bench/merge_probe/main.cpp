// bench_merge_probe [reps]: how fast one CTA reads partials that the other CTAs of its grid have just written, by
// read method (merge_probe.cu).
#include <cstdlib>

#include "merge_probe.h"

int main(int argc, char** argv) { return mla::bench::run_merge_probe(argc > 1 ? std::atoi(argv[1]) : 51); }
