// http[s]://host[:port][/prefix] as the project's HTTP clients take it (the API server, the scheduler): a
// host may be a name, an IPv4 or a bracketed IPv6 address; no user info, query, fragment or space. Pure; the
// error's message is the reason alone ("it must start with http:// or https://"), for the caller to name
// which URL it was.
#pragma once

#include <string>
#include <string_view>

#include "ascend/common/error.h"

namespace ascend {

struct HttpUrl {
  bool https = false;
  std::string host;       // an IPv6 address without its brackets ("::1")
  int port = 0;           // as given, else 443 / 80
  std::string authority;  // host[:port] as written ("[::1]:8080")
  std::string prefix;     // a path prefix without the trailing '/' ("" or "/ascend")
  std::string origin() const { return (https ? "https://" : "http://") + authority; }
  bool operator==(const HttpUrl&) const = default;
};

Result<HttpUrl> parse_http_url(std::string_view url);

}  // namespace ascend
