// Which request the shim and the hook believe (trust.h): the orchestrator's marker mounts over the
// environment, and the environment of an unprivileged container only when the configuration accepts it.
#include "ascend/hook/trust.h"

#include <gtest/gtest.h>

#include <optional>

#include "ascend/hook/oci.h"
#include "ascend/hook/request.h"
#include "spec_json.h"

namespace ascend::hook {
namespace {

using nlohmann::ordered_json;

ordered_json marker(const std::string& name, const std::string& source = "/dev/null") {
  return {{"destination", "/var/run/ascend-container-devices/" + name},
          {"type", "bind"},
          {"source", source},
          {"options", {"rbind", "ro"}}};
}

TEST(Trust, TheOrchestratorsMarkersWinAndAnUnprivilegedEnvNeedsTheSetting) {
  struct Case {
    const char* name;
    std::vector<std::string> env;
    std::vector<ordered_json> mounts;
    bool privileged;
    bool accept_env;
    std::optional<std::string> want;  // the ASCEND_VISIBLE_DEVICES the request is parsed from; nullopt: none
  };
  const Case cases[] = {
      {"env accepted by default", {"ASCEND_VISIBLE_DEVICES=all"}, {}, false, true, "all"},
      {"image-baked all refused", {"ASCEND_VISIBLE_DEVICES=all"}, {}, false, false, std::nullopt},
      {"privileged may use the env", {"ASCEND_VISIBLE_DEVICES=0"}, {}, true, false, "0"},
      {"markers win over the env",
       {"ASCEND_VISIBLE_DEVICES=all"},
       {marker("1"), marker("3")},
       false,
       false,
       "1,3"},
      {"markers win when the env is accepted",
       {"ASCEND_VISIBLE_DEVICES=all"},
       {marker("2")},
       false,
       true,
       "2"},
      {"markers without any env", {}, {marker("5")}, false, false, "5"},
      {"markers deduplicated, in mount order",
       {},
       {marker("4"), marker("0"), marker("4")},
       false,
       false,
       "4,0"},
      {"an image VOLUME at the marker path is no marker",
       {"ASCEND_VISIBLE_DEVICES=all"},
       {marker("1", "/var/lib/docker/volumes/x/_data")},
       false,
       false,
       std::nullopt},
      {"a trailing slash is the same marker",
       {},
       {{{"destination", "/var/run/ascend-container-devices/6/"}, {"source", "/dev/null"}}},
       false,
       false,
       "6"},
      {"no request at all", {"PATH=/bin"}, {}, false, false, std::nullopt},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    ordered_json spec = {{"process", {{"env", c.env}}}, {"mounts", c.mounts}};
    if (c.privileged) spec["process"]["capabilities"]["bounding"] = {"CAP_CHOWN", "CAP_SYS_ADMIN"};
    EXPECT_EQ(is_privileged(spec), c.privileged);
    auto t = trusted_request_env(spec, c.env, c.accept_env);
    ASSERT_TRUE(t.ok()) << t.error().message();
    EXPECT_EQ(env_value(t->env, kEnvVisibleDevices), c.want);
  }
}

TEST(Trust, SaysWhatItOverrodeOrIgnored) {
  ordered_json spec = {{"process", {{"env", {"ASCEND_VISIBLE_DEVICES=all"}}}}, {"mounts", {marker("1")}}};
  auto t = trusted_request_env(spec, {"ASCEND_VISIBLE_DEVICES=all"}, true);
  ASSERT_TRUE(t.ok());
  EXPECT_NE(t->note.find("ASCEND_VISIBLE_DEVICES=all in the environment overridden"), std::string::npos)
      << t->note;
  spec.erase("mounts");
  auto ignored = trusted_request_env(spec, {"ASCEND_VISIBLE_DEVICES=all"}, false);
  ASSERT_TRUE(ignored.ok());
  EXPECT_NE(ignored->note.find("accept-env-when-unprivileged is false"), std::string::npos) << ignored->note;
  auto same = trusted_request_env({{"mounts", {marker("1")}}}, {"ASCEND_VISIBLE_DEVICES=1"}, false);
  ASSERT_TRUE(same.ok());
  EXPECT_EQ(same->note, "");  // the plugin's env and markers agree: nothing to say
}

TEST(Trust, AMarkerThatIsNotADeviceIdIsAnError) {
  for (const char* name : {"abc", "1,2", "../../etc", "1234567"}) {
    SCOPED_TRACE(name);
    auto t = trusted_request_env({{"mounts", {marker(name)}}}, {}, true);
    ASSERT_FALSE(t.ok());
    EXPECT_NE(t.error().message().find("device marker"), std::string::npos) << t.error().message();
  }
}

}  // namespace
}  // namespace ascend::hook
