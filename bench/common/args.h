#pragma once
// Command-line lists of the benchmarks ("--rows 1,2,5", "--kv-cache-dtype auto,fp8"): one splitter for all.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

namespace mla::bench {

// "a,b,c" -> {"a", "b", "c"}; an empty string gives no items, a trailing comma no empty last item.
inline std::vector<std::string> split_commas(const std::string& v) {
  std::vector<std::string> out;
  for (size_t p = 0; p < v.size();) {
    const size_t q = v.find(',', p);
    out.push_back(v.substr(p, q - p));
    p = q == std::string::npos ? v.size() : q + 1;
  }
  return out;
}

// "1,64,256" -> {1, 64, 256}; "1-9" or "10-12,18" -> inclusive ranges (several runs asked for --rows 1-9 and got
// row 1 alone). atoll: a malformed item, or a range that runs backwards or spans more than 1e5 values, reads
// as 0, which each bench's own checks reject.
inline std::vector<int64_t> parse_int_list(const std::string& v) {
  std::vector<int64_t> out;
  for (const std::string& s : split_commas(v)) {
    const size_t dash = s.find('-', 1);  // from 1: a leading '-' is a sign
    if (dash == std::string::npos) {
      out.push_back(std::atoll(s.c_str()));
      continue;
    }
    const int64_t lo = std::atoll(s.substr(0, dash).c_str()), hi = std::atoll(s.substr(dash + 1).c_str());
    if (hi < lo || hi - lo > 100000) {
      out.push_back(0);
      continue;
    }
    for (int64_t x = lo; x <= hi; ++x) out.push_back(x);
  }
  return out;
}

}  // namespace mla::bench
