// bench_merge_probe [reps]: how fast one CTA reads partials that the other CTAs of its grid have just written, by
// read method (merge_probe.cu).
#include <cstdio>
#include <cstdlib>

#include "merge_probe.h"

int main(int argc, char** argv) {
  const mla::Status st = mla::bench::run_merge_probe(argc > 1 ? std::atoi(argv[1]) : 51);
  if (!st.is_ok()) {
    std::fprintf(stderr, "%s\n", st.to_string().c_str());
    return 1;
  }
  return 0;
}
