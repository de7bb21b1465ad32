// What an exec broker lets a hardened process ask of the DCMI helper (node_query.h admit_helper_verb): the
// helper's three verbs with the options its client sends, as `ascend-dcmi-query --help` lists them, and
// nothing that could point the helper at another host or library. The helper takes its global options
// (--root, --library, --backend) after the verb too (CLI11 fallthrough), so those are the cases that matter.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ascend/npu/node_query.h"

namespace ascend::npu {
namespace {

TEST(AdmitHelperVerb, TheClientsOwnVerbsPass) {
  const std::vector<std::vector<std::string>> ok = {
      {"snapshot"},
      {"create", "--phy", "4", "--template", "vir05_1c_16g"},
      {"create", "--phy", "0", "--template", "vir02", "--id", "100", "--owner",
       R"({"container_id":"abc","pid":12,"state_root":"/run/runc"})"},
      {"destroy", "--id", "164"},
      {"destroy", "--id", "164", "--phy", "4", "--holder", R"({"container_id":"abc"})"},
  };
  for (const auto& v : ok) {
    auto st = admit_helper_verb(v);
    EXPECT_TRUE(st.ok()) << v[0] << ": " << st.error().message();
  }
}

TEST(AdmitHelperVerb, EverythingElseIsRefused) {
  const std::vector<std::vector<std::string>> refused = {
      {},
      {"gc"},
      {"snapshot", "--library", "/tmp/evil.so"},
      {"snapshot", "--root", "/tmp/other-host"},
      {"snapshot", "--backend", "emulator"},
      {"destroy", "--id", "164", "--library=/tmp/evil.so"},
      {"destroy", "--id=164"},
      {"destroy", "--id", "164", "--id", "165"},
      {"destroy", "--id"},
      {"destroy", "--id", "-1"},
      {"destroy", "--id", "16 4"},
      {"destroy", "--id", "1234567890"},
      {"create", "--phy", "4", "--template", "--library"},
      {"create", "--phy", "4", "--template", "../x"},
      {"create", "--phy", "4", "--template", "vir05", "--owner", "--library"},
      {"create", "--phy", "4", "--template", "vir05", "--holder", "{}"},
      {"destroy", "--id", "164", "--template", "vir05"},
      {"snapshot", "destroy", "--id", "1"},
      {"create", "--phy", "4", "--template", "vir05", "--owner", "{" + std::string(5000, 'x') + "}"},
  };
  for (const auto& v : refused) {
    auto st = admit_helper_verb(v);
    std::string shown;
    for (const auto& a : v) shown += a + " ";
    ASSERT_FALSE(st.ok()) << shown;
    EXPECT_EQ(st.error().code(), EPERM) << shown;
  }
}

TEST(HelperArgv, FixedPartThenTheVerb) {
  HelperOptions o;
  o.root = "/host";
  o.helper = "/opt/bin/ascend-dcmi-query";
  EXPECT_EQ(helper_argv(o, {"snapshot"}),
            (std::vector<std::string>{"/opt/bin/ascend-dcmi-query", "--root", "/host", "snapshot"}));
  o.dcmi_library = "/usr/local/dcmi/libdcmi.so";
  EXPECT_EQ(helper_argv(o, {}), (std::vector<std::string>{"/opt/bin/ascend-dcmi-query", "--root", "/host",
                                                          "--library", "/usr/local/dcmi/libdcmi.so"}));
}

}  // namespace
}  // namespace ascend::npu
