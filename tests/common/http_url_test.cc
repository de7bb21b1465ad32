// The one URL parser of the project's HTTP clients (the API server's, the scheduler's): RFC 3986's
// authority (a bracketed IPv6 literal, a port of 1-65535) and the forms the clients refuse.
#include "ascend/common/http_url.h"

#include <gtest/gtest.h>

namespace ascend {
namespace {

TEST(HttpUrl, SchemesHostsPortsAndPrefixes) {
  auto a = parse_http_url("https://10.96.0.1");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(*a, (HttpUrl{true, "10.96.0.1", 443, "10.96.0.1", ""}));
  auto b = parse_http_url("http://[::1]:8080/ascend/");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(*b, (HttpUrl{false, "::1", 8080, "[::1]:8080", "/ascend"}));
  EXPECT_EQ(b->origin(), "http://[::1]:8080");
  auto c = parse_http_url("https://kubernetes.default.svc:443/");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->host, "kubernetes.default.svc");
  EXPECT_EQ(c->prefix, "");
  EXPECT_EQ(parse_http_url("http://h")->port, 80);
}

TEST(HttpUrl, RefusedFormsSayWhy) {
  struct Case {
    const char* url;
    const char* why;
  };
  for (const Case& c :
       {Case{"ftp://x", "it must start with http:// or https://"},
        Case{"x:80", "it must start with http:// or https://"},
        Case{"http://u@h", "no user info, query, fragment or spaces"},
        Case{"http://h/?q=1", "no user info, query, fragment or spaces"},
        Case{"http://h#f", "no user info, query, fragment or spaces"}, Case{"http://", "no host"},
        Case{"http://:80", "no host"}, Case{"http://[]:80", "no host"},
        Case{"http://[::1", "an IPv6 address lacks its ']'"},
        Case{"http://[::1]x", "junk after the IPv6 address"}, Case{"http://h:", "the port must be 1-65535"},
        Case{"http://h:0", "the port must be 1-65535"}, Case{"http://h:65536", "the port must be 1-65535"},
        Case{"http://h:8a", "the port must be 1-65535"}}) {
    auto r = parse_http_url(c.url);
    ASSERT_FALSE(r.ok()) << c.url;
    EXPECT_EQ(r.error().message(), c.why) << c.url;
    EXPECT_EQ(r.error().code(), EINVAL);
  }
}

}  // namespace
}  // namespace ascend
