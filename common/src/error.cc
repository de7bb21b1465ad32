#include "ascend/common/error.h"

#include <cstring>

namespace ascend {

Error Error::from_errno(int err, std::string_view what) {
  std::string msg(what);
  msg += ": ";
  msg += std::strerror(err);
  return {err, std::move(msg)};
}

Error Error::context(std::string_view ctx) const& {
  return Error(*this).context(ctx);
}

Error Error::context(std::string_view ctx) && {
  if (!ctx.empty()) {
    std::string msg(ctx);
    msg += ": ";
    msg += message_;
    message_ = std::move(msg);
  }
  return std::move(*this);
}

}  // namespace ascend
