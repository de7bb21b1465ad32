#include "ascend/common/listen_address.h"

#include <charconv>

namespace ascend {

Result<ListenAddress> parse_listen_address(std::string_view value) {
  const std::size_t colon = value.rfind(':');
  if (colon == std::string_view::npos || colon + 1 == value.size())
    return Error::invalid("give HOST:PORT, or :PORT for every IPv4 address (port 0 picks a free one)");
  const std::string_view digits = value.substr(colon + 1);
  int port = -1;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), port);
  if (ec != std::errc() || end != digits.data() + digits.size() || port < 0 || port > 65535)
    return Error::invalid("the port must be a number from 0 to 65535");
  std::string_view host = value.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  if (host.size() > kMaxListenHost)
    return Error::invalid("the host is longer than " + std::to_string(kMaxListenHost) + " characters");
  return ListenAddress{host.empty() ? "0.0.0.0" : std::string(host), port};
}

}  // namespace ascend
