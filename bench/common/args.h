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

// "1,64,256" -> {1, 64, 256} (atoll: a malformed item reads as 0, which each bench's own checks reject).
inline std::vector<int64_t> parse_int_list(const std::string& v) {
  std::vector<int64_t> out;
  for (const std::string& s : split_commas(v)) out.push_back(std::atoll(s.c_str()));
  return out;
}

}  // namespace mla::bench
