// What an exec broker lets a hardened process ask of the DCMI helper (node_query.h admit_helper_verb): the
// helper's four verbs with the options its client sends, as `ascend-dcmi-query --help` lists them, and
// nothing that could point the helper at another host or library. The helper takes its global options
// (--root, --library, --backend) after the verb too (CLI11 fallthrough), so those are the cases that matter.
// And the one backend factory (backend.h) with the helper's client as the static binaries open it.
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "ascend/npu/backend.h"
#include "ascend/npu/node_query.h"

namespace ascend::npu {
namespace {

TEST(AdmitHelperVerb, TheClientsOwnVerbsPass) {
  const std::vector<std::vector<std::string>> ok = {
      {"snapshot"},
      {"probe"},
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
      {"probe", "--library", "/tmp/evil.so"},
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

// The `auto` rule on a real root where libdcmi.so is found only by the loader (no library configured, none
// at the driver's paths): the dynamically linked programs try dlopen, the static ones ask the helper, and
// through the one factory both pick DCMI when it loads and the emulator when it does not. (Before the
// factory was shared, the static runtime took the emulator there without asking.) The dlopen here is a
// stand-in: this process cannot change its loader's path.
TEST(BackendFactory, WithTheLibraryOnlyOnTheLoadersPathStaticAndDynamicProgramsPickTheSameBackend) {
  BackendOptions o;
  o.root = "/";
  for (const std::string& c : dcmi_library_candidates("/")) {
    if (::access(c.c_str(), F_OK) == 0)
      GTEST_SKIP() << c << " exists: the library is not only on the loader's path";
  }
  ASSERT_TRUE(dcmi_library_guessed(o));
  for (const bool loads : {true, false}) {
    std::vector<std::vector<std::string>> helper_runs;
    HelperOptions h;
    h.helper = "/opt/ascend/bin/ascend-dcmi-query";
    h.run = [&](const std::vector<std::string>& argv, const std::vector<std::string>&, std::size_t,
                std::chrono::milliseconds) -> Result<ProcessOutput> {
      helper_runs.push_back(argv);
      // ascend-dcmi-query probe's two answers (its --help)
      if (!loads) return ProcessOutput{0, R"({"loads": false, "why": "cannot load libdcmi.so"})"};
      return ProcessOutput{0, R"({"loads": true})"};
    };
    const DcmiOpener through_dlopen = [&](const BackendOptions&) -> Result<std::unique_ptr<DeviceQuery>> {
      if (!loads) return Error(ENOENT, "cannot load libdcmi.so: not found");
      return open_node_query(HelperOptions{});  // any DCMI query: the choice is what is compared
    };
    Backend dynamic = Backend::kAuto;
    Backend fixed = Backend::kAuto;
    auto a = open_device_query(o, through_dlopen, &dynamic);
    auto b = open_device_query(o, helper_dcmi_opener(h), &fixed);
    ASSERT_TRUE(a.ok()) << a.error().message();
    ASSERT_TRUE(b.ok()) << b.error().message();
    EXPECT_EQ(dynamic, loads ? Backend::kDcmi : Backend::kEmulator) << loads;
    EXPECT_EQ(fixed, dynamic) << loads;
    // The static side asked the helper once whether it loads the library at this root, with none named.
    EXPECT_EQ(helper_runs, (std::vector<std::vector<std::string>>{{h.helper, "--root", "/", "probe"}}));
  }
}

// A library that is named (configured, or found at the driver's paths) is DCMI's without a probe: the helper
// runs only when a query needs it.
TEST(BackendFactory, ANamedLibraryNeedsNoProbe) {
  BackendOptions o;
  o.root = "/";
  o.dcmi_library = "/usr/lib/libdcmi.so";
  ASSERT_FALSE(dcmi_library_guessed(o));
  int runs = 0;
  HelperOptions h;
  h.helper = "/opt/ascend/bin/ascend-dcmi-query";
  h.run = [&](const std::vector<std::string>&, const std::vector<std::string>&, std::size_t,
              std::chrono::milliseconds) -> Result<ProcessOutput> {
    ++runs;
    return Error(ENOENT, "not run");
  };
  Backend chosen = Backend::kAuto;
  auto dq = open_device_query(o, helper_dcmi_opener(h), &chosen);
  ASSERT_TRUE(dq.ok()) << dq.error().message();
  EXPECT_EQ(chosen, Backend::kDcmi);
  EXPECT_EQ(runs, 0);
}

}  // namespace
}  // namespace ascend::npu
