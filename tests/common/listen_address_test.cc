// parse_listen_address (listen_address.h): the forms a listen flag takes and every refusal, with the reasons
// written out here by hand.
#include "ascend/common/listen_address.h"

#include <gtest/gtest.h>

#include <string>

namespace ascend {
namespace {

TEST(ListenAddress, TheFormsItTakes) {
  struct Case {
    const char* text = nullptr;
    ListenAddress want;
  };
  const Case cases[] = {
      {"127.0.0.1:8080", {"127.0.0.1", 8080}},
      {":9101", {"0.0.0.0", 9101}},
      {"0.0.0.0:0", {"0.0.0.0", 0}},
      {"[::1]:443", {"::1", 443}},
      {"[::]:65535", {"::", 65535}},
      {"scheduler.kube-system.svc:80", {"scheduler.kube-system.svc", 80}},
      {"localhost:00080", {"localhost", 80}},
  };
  for (const auto& c : cases) {
    auto got = parse_listen_address(c.text);
    ASSERT_TRUE(got.ok()) << c.text << ": " << got.error().message();
    EXPECT_EQ(*got, c.want) << c.text;
  }
}

TEST(ListenAddress, EveryRefusalSaysWhy) {
  const std::string form = "give HOST:PORT, or :PORT for every IPv4 address (port 0 picks a free one)";
  const std::string port = "the port must be a number from 0 to 65535";
  const std::pair<std::string, std::string> cases[] = {
      {"", form},
      {"9101", form},
      {"127.0.0.1:", form},
      {"127.0.0.1:http", port},
      {"127.0.0.1:65536", port},
      {"127.0.0.1:-1", port},
      {"127.0.0.1:+80", port},
      {"127.0.0.1: 80", port},
      {":9101x", port},
      {"[::1]:99999999999", port},
      {std::string(254, 'a') + ":80", "the host is longer than 253 characters"},
  };
  for (const auto& [text, why] : cases) {
    auto got = parse_listen_address(text);
    ASSERT_FALSE(got.ok()) << text;
    EXPECT_EQ(got.error().message(), why) << text;
  }
  EXPECT_TRUE(parse_listen_address(std::string(253, 'a') + ":80").ok());
}

}  // namespace
}  // namespace ascend
