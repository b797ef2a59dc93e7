#include "mla/core/env_knob.h"

#include <cstdlib>
#include <cstring>

namespace mla {

EnvKnob read_env_knob(const char* name, std::initializer_list<const char*> allowed) {
  EnvKnob k;
  const char* v = std::getenv(name);
  if (v == nullptr || v[0] == '\0') return k;
  int i = 0;
  std::string list;
  for (const char* a : allowed) {
    if (std::strcmp(v, a) == 0) {
      k.index = i;
      return k;
    }
    if (i++ > 0) list += '|';
    list += a;
  }
  k.status = Status::invalid(name, std::string("unknown value '") + v + "' (allowed: " + list + ", or unset)");
  return k;
}

}  // namespace mla
