#include "ascend/common/http_url.h"

#include <charconv>

namespace ascend {

namespace {

Error bad(std::string why) {
  return Error::invalid(std::move(why));
}

// Splits host[:port] (host possibly a bracketed IPv6 address).
Status split_authority(std::string_view authority, HttpUrl& out) {
  std::string_view host = authority;
  std::string_view port;
  bool has_port = false;
  if (authority.starts_with('[')) {
    const auto close = authority.find(']');
    if (close == std::string_view::npos) return bad("an IPv6 address lacks its ']'");
    host = authority.substr(1, close - 1);
    std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') return bad("junk after the IPv6 address");
      port = after.substr(1);
      has_port = true;
    }
  } else if (const auto colon = authority.find(':'); colon != std::string_view::npos) {
    host = authority.substr(0, colon);
    port = authority.substr(colon + 1);
    has_port = true;
  }
  if (host.empty()) return bad("no host");
  out.host = std::string(host);
  if (has_port) {
    int p = 0;
    auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), p);
    if (port.empty() || ec != std::errc() || end != port.data() + port.size() || p < 1 || p > 65535)
      return bad("the port must be 1-65535");
    out.port = p;
  }
  return ok_status();
}

}  // namespace

Result<HttpUrl> parse_http_url(std::string_view url) {
  HttpUrl out;
  std::string_view rest;
  if (url.starts_with("http://")) {
    rest = url.substr(7);
    out.port = 80;
  } else if (url.starts_with("https://")) {
    rest = url.substr(8);
    out.https = true;
    out.port = 443;
  } else {
    return bad("it must start with http:// or https://");
  }
  if (rest.find_first_of("?#@ ") != std::string_view::npos)
    return bad("no user info, query, fragment or spaces");
  const auto slash = rest.find('/');
  const std::string_view authority = rest.substr(0, slash);
  ASCEND_CHECK(split_authority(authority, out), "");
  out.authority = std::string(authority);
  std::string_view path = slash == std::string_view::npos ? "" : rest.substr(slash);
  while (path.ends_with('/')) path.remove_suffix(1);
  out.prefix = std::string(path);
  return out;
}

}  // namespace ascend
