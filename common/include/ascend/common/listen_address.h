// HOST:PORT as the project's servers take a listen flag (the scheduler's --listen and --extender-listen, the
// device plugin's --metrics-addr): the host a name or an IPv4 address, a bracketed IPv6 address ("[::1]:80"),
// or empty for every IPv4 address (":9101"); the port a decimal number from 0 (any free port) to 65535.
// parse_listen_address is pure, and its error's message is the reason alone, for the caller to name the flag.
// bind_http_listener (ascend_common_kube, which links cpp-httplib) binds a cpp-httplib server to one.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "ascend/common/error.h"

namespace httplib {
class Server;
}

namespace ascend {

struct ListenAddress {
  std::string host;  // "0.0.0.0" for an empty host; an IPv6 address without its brackets
  int port = 0;
  bool operator==(const ListenAddress&) const = default;
};

// A host name is at most 253 characters (DNS; Kubernetes' limit for a node name too).
inline constexpr std::size_t kMaxListenHost = 253;

Result<ListenAddress> parse_listen_address(std::string_view value);

// Binds `server` to `where` (port 0: any free port) with SO_REUSEADDR only: cpp-httplib's default socket
// options add SO_REUSEPORT, with which a second server on the same port would share its connections instead
// of failing to start. The port bound; EADDRINUSE when the port is held or the host is not this machine's.
Result<int> bind_http_listener(httplib::Server& server, const ListenAddress& where);

}  // namespace ascend
