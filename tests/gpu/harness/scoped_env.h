#pragma once
// ScopedEnv: sets an environment variable for a scope, for the launchers' knobs that are read on every call (the fp8
// decode's MLA_DECODE_FP8_VARIANT64 / _H16_EARLY_S, the 16-bit decode's MLA_DECODE_N16), so a test runs a case on each
// variant in one process.
#include <cstdlib>
#include <string>

namespace mla::test {

// Restores the previous value (or unsets the variable) when the scope ends.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    const char* old = std::getenv(name);
    had_ = old != nullptr;
    if (had_) old_ = old;
    setenv(name, value, 1);
  }
  ~ScopedEnv() {
    if (had_) {
      setenv(name_, old_.c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::string old_;
  bool had_ = false;
};

}  // namespace mla::test
