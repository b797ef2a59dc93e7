#pragma once
#include <string>
#include <utility>

namespace mla {

enum class StatusCode { kOk, kInvalidArgument, kUnsupported, kOutOfMemory, kCudaError, kIoError, kInternal };

// An error as a value: the op that failed and a message that names the offending shapes.
// Nothing in mlaserve calls exit(); callers decide what an error means for them.
class [[nodiscard]] Status {
 public:
  Status() = default;
  static Status ok() { return {}; }
  static Status invalid(std::string op, std::string msg) {
    return {StatusCode::kInvalidArgument, std::move(op), std::move(msg)};
  }
  static Status unsupported(std::string op, std::string msg) {
    return {StatusCode::kUnsupported, std::move(op), std::move(msg)};
  }
  static Status cuda(std::string op, std::string msg) {
    return {StatusCode::kCudaError, std::move(op), std::move(msg)};
  }
  static Status io(std::string op, std::string msg) { return {StatusCode::kIoError, std::move(op), std::move(msg)}; }
  static Status oom(std::string op, std::string msg) {
    return {StatusCode::kOutOfMemory, std::move(op), std::move(msg)};
  }
  static Status internal(std::string op, std::string msg) {
    return {StatusCode::kInternal, std::move(op), std::move(msg)};
  }

  bool is_ok() const { return code_ == StatusCode::kOk; }
  explicit operator bool() const { return is_ok(); }
  StatusCode code() const { return code_; }
  const std::string& op() const { return op_; }
  const std::string& message() const { return message_; }
  // "mla_decode: invalid argument: q must be bf16[b, s_q, h_q, 576], got fp32[2, 1, 16, 576]"
  std::string to_string() const;

 private:
  Status(StatusCode c, std::string op, std::string msg) : code_(c), op_(std::move(op)), message_(std::move(msg)) {}
  StatusCode code_ = StatusCode::kOk;
  std::string op_;
  std::string message_;
};

}  // namespace mla

// Propagate a failed Status to the caller.
#define MLA_TRY(expr)                          \
  do {                                         \
    ::mla::Status mla_try_status_ = (expr);    \
    if (!mla_try_status_.is_ok()) return mla_try_status_; \
  } while (0)
