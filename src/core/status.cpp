#include "mla/core/status.h"

namespace mla {

namespace {
const char* code_name(StatusCode c) {
  switch (c) {
    case StatusCode::kOk: return "ok";
    case StatusCode::kInvalidArgument: return "invalid argument";
    case StatusCode::kUnsupported: return "unsupported";
    case StatusCode::kOutOfMemory: return "out of memory";
    case StatusCode::kCudaError: return "CUDA error";
    case StatusCode::kIoError: return "I/O error";
    case StatusCode::kInternal: return "internal error";
  }
  return "?";
}
}  // namespace

std::string Status::to_string() const {
  if (is_ok()) return "ok";
  return op_ + ": " + code_name(code_) + ": " + message_;
}

}  // namespace mla
