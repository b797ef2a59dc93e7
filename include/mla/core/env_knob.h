#pragma once
// Diagnostic environment knobs (MLA_*: variant pickers for benchmarks and debugging), parsed strictly: a value
// outside the allowed set is an error naming the knob and its allowed values, because a typo or the name of a
// removed variant must not silently run (and be benchmarked as) the default.
#include <initializer_list>
#include <string>

#include "mla/core/status.h"

namespace mla {

struct EnvKnob {
  int index = -1;  // position of the value in the allowed list; -1 when the variable is unset or empty
  Status status;   // invalid when the value is not in the list (index stays -1)
};

// Reads `name` once per call; callers cache the result in a function-local static, or read it on every call where
// tests switch it between cases (the fp8 decode's MLA_DECODE_FP8_H16_EARLY_S and MLA_DECODE_FP8_VARIANT64).
EnvKnob read_env_knob(const char* name, std::initializer_list<const char*> allowed);

}  // namespace mla
