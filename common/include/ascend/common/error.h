// The project's one error type: a value carrying an errno-like code and a message, to which callers add
// context on the way up ("inject device 3: mknodat /dev/davinci3: Permission denied"). `Result<T>` holds
// either a value or an Error. Both are plain values: copyable, movable, not thread-shared.
#pragma once

#include <cerrno>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace ascend {

class Error {
 public:
  Error(int code, std::string message) : code_(code), message_(std::move(message)) {}

  // An error from a failed system call: "<what>: <strerror(err)>", code = err.
  static Error from_errno(int err, std::string_view what);
  static Error invalid(std::string message) { return {EINVAL, std::move(message)}; }
  static Error not_found(std::string message) { return {ENOENT, std::move(message)}; }

  int code() const { return code_; }
  const std::string& message() const { return message_; }

  // Prepends "<ctx>: " to the message; the code is kept.
  Error context(std::string_view ctx) const&;
  Error context(std::string_view ctx) &&;

 private:
  int code_;
  std::string message_;
};

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}      // NOLINT(google-explicit-constructor)
  Result(Error error) : v_(std::move(error)) {}  // NOLINT(google-explicit-constructor)

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }
  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  const Error& error() const { return std::get<1>(v_); }
  Result context(std::string_view ctx) && {
    if (ok()) return std::move(*this);
    return std::get<1>(std::move(v_)).context(ctx);
  }

 private:
  std::variant<T, Error> v_;
};

template <>
class [[nodiscard]] Result<void> {
 public:
  Result() = default;
  Result(Error error) : err_(std::move(error)), ok_(false) {}  // NOLINT(google-explicit-constructor)

  bool ok() const { return ok_; }
  explicit operator bool() const { return ok_; }
  const Error& error() const { return err_; }
  Result context(std::string_view ctx) && {
    if (ok_) return {};
    return std::move(err_).context(ctx);
  }

 private:
  Error err_{0, ""};
  bool ok_ = true;
};

using Status = Result<void>;

inline Status ok_status() {
  return {};
}

}  // namespace ascend

// NOLINTBEGIN(bugprone-macro-parentheses): `ctx` and `var` are used as whole expressions/declarations.
// Evaluates `expr` (a Result); on error returns it from the enclosing function with `ctx` prepended.
#define ASCEND_CHECK(expr, ctx)                                             \
  do {                                                                      \
    auto ascend_check_r_ = (expr);                                          \
    if (!ascend_check_r_.ok()) return ascend_check_r_.error().context(ctx); \
  } while (0)

// Declares `var` from a Result-returning expression, or returns its error with `ctx` prepended.
#define ASCEND_ASSIGN_CONCAT_(a, b) a##b
#define ASCEND_ASSIGN_NAME_(line) ASCEND_ASSIGN_CONCAT_(ascend_assign_r_, line)
#define ASCEND_ASSIGN(var, expr, ctx)                                                                 \
  auto ASCEND_ASSIGN_NAME_(__LINE__) = (expr);                                                        \
  if (!ASCEND_ASSIGN_NAME_(__LINE__).ok()) return ASCEND_ASSIGN_NAME_(__LINE__).error().context(ctx); \
  var = std::move(ASCEND_ASSIGN_NAME_(__LINE__)).value()
// NOLINTEND(bugprone-macro-parentheses)
