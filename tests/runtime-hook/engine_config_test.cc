// ascend-ctk's engine configuration: daemon.json and config.toml merges keep what was there.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <toml++/toml.h>
#include <nlohmann/json.hpp>

#include "ascend/hook/engine_config.h"
#include "test_dir.h"

namespace ascend::hook {
namespace {

using nlohmann::ordered_json;

RuntimeEntry entry() {
  RuntimeEntry e;
  e.path = "/usr/local/bin/ascend-docker-runtime";
  return e;
}

TEST(DockerConfig, AddsTheRuntimeAndKeepsEverythingElse) {
  const std::string before = R"({"log-level":"warn","runtimes":{"nvidia":{"path":"nvidia-container-runtime"}},
    "registry-mirrors":["https://m.example"]})";
  RuntimeEntry e = entry();
  e.runtime_args = {"--config", "/etc/ascend-docker-runtime.d/config.yaml"};
  auto after = configure_docker(before, e);
  ASSERT_TRUE(after.ok()) << after.error().message();
  ordered_json want =
      ordered_json::parse(R"({"log-level":"warn","runtimes":{"nvidia":{"path":"nvidia-container-runtime"},
    "ascend":{"path":"/usr/local/bin/ascend-docker-runtime","runtimeArgs":["--config","/etc/ascend-docker-runtime.d/config.yaml"]}},
    "registry-mirrors":["https://m.example"]})");
  EXPECT_EQ(ordered_json::parse(*after), want);
  EXPECT_EQ(after->back(), '\n');

  // Idempotent, and unconfigure restores the original document.
  auto again = configure_docker(*after, e);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *after);
  auto removed = unconfigure_docker(*after, "ascend");
  ASSERT_TRUE(removed.ok());
  EXPECT_EQ(ordered_json::parse(*removed), ordered_json::parse(before));
}

TEST(DockerConfig, NewFileAndDefaultRuntime) {
  RuntimeEntry e = entry();
  e.set_default = true;
  auto after = configure_docker("", e);
  ASSERT_TRUE(after.ok()) << after.error().message();
  EXPECT_EQ(
      ordered_json::parse(*after),
      ordered_json::parse(
          R"({"runtimes":{"ascend":{"path":"/usr/local/bin/ascend-docker-runtime"}},"default-runtime":"ascend"})"));
  auto removed = unconfigure_docker(*after, "ascend");
  ASSERT_TRUE(removed.ok());
  EXPECT_EQ(ordered_json::parse(*removed), ordered_json::object());
}

TEST(DockerConfig, RejectsBadInput) {
  EXPECT_FALSE(configure_docker("[1]", entry()).ok());
  EXPECT_FALSE(configure_docker(R"({"runtimes":[]})", entry()).ok());
  RuntimeEntry rel = entry();
  rel.path = "ascend-docker-runtime";
  EXPECT_FALSE(configure_docker("", rel).ok());
  RuntimeEntry bad = entry();
  bad.name = "a.b";
  EXPECT_FALSE(configure_docker("", bad).ok());
}

TEST(ContainerdConfig, Version2KeepsOtherTablesAndAddsTheRuntime) {
  const std::string before = R"(version = 2
root = "/var/lib/containerd"
[plugins."io.containerd.grpc.v1.cri".containerd]
  snapshotter = "overlayfs"
  default_runtime_name = "runc"
  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
    runtime_type = "io.containerd.runc.v2"
)";
  RuntimeEntry e = entry();
  e.set_default = true;
  auto after = configure_containerd(before, e);
  ASSERT_TRUE(after.ok()) << after.error().message();
  toml::table t = toml::parse(*after);
  EXPECT_EQ(t["version"].value<int>(), 2);
  EXPECT_EQ(t["root"].value<std::string>(), "/var/lib/containerd");
  auto cd = t["plugins"]["io.containerd.grpc.v1.cri"]["containerd"];
  EXPECT_EQ(cd["snapshotter"].value<std::string>(), "overlayfs");
  EXPECT_EQ(cd["default_runtime_name"].value<std::string>(), "ascend");
  EXPECT_EQ(cd["runtimes"]["runc"]["runtime_type"].value<std::string>(), "io.containerd.runc.v2");
  EXPECT_EQ(cd["runtimes"]["ascend"]["runtime_type"].value<std::string>(), "io.containerd.runc.v2");
  EXPECT_EQ(cd["runtimes"]["ascend"]["options"]["BinaryName"].value<std::string>(),
            "/usr/local/bin/ascend-docker-runtime");

  auto removed = unconfigure_containerd(*after, "ascend");
  ASSERT_TRUE(removed.ok()) << removed.error().message();
  toml::table r = toml::parse(*removed);
  auto rcd = r["plugins"]["io.containerd.grpc.v1.cri"]["containerd"];
  EXPECT_FALSE(rcd["runtimes"]["ascend"]);
  EXPECT_TRUE(rcd["runtimes"]["runc"]);
  EXPECT_EQ(rcd["default_runtime_name"].value<std::string>(), "runc");
}

TEST(ContainerdConfig, Version3AndNewFile) {
  auto v3 = configure_containerd("version = 3\n", entry());
  ASSERT_TRUE(v3.ok()) << v3.error().message();
  toml::table t = toml::parse(*v3);
  EXPECT_EQ(t["plugins"]["io.containerd.cri.v1.runtime"]["containerd"]["runtimes"]["ascend"]["options"]
             ["BinaryName"]
                 .value<std::string>(),
            "/usr/local/bin/ascend-docker-runtime");
  auto fresh = configure_containerd("", entry());
  ASSERT_TRUE(fresh.ok()) << fresh.error().message();
  toml::table f = toml::parse(*fresh);
  EXPECT_EQ(f["version"].value<int>(), 2);
  EXPECT_TRUE(f["plugins"]["io.containerd.grpc.v1.cri"]["containerd"]["runtimes"]["ascend"]);
}

TEST(ContainerdConfig, RejectsVersion1GarbageAndRuntimeArgs) {
  auto v1 = configure_containerd("[plugins.cri]\n", entry());
  ASSERT_FALSE(v1.ok());
  EXPECT_NE(v1.error().message().find("version 1 is not supported"), std::string::npos)
      << v1.error().message();
  auto garbage = configure_containerd("version = = 2\n", entry());
  ASSERT_FALSE(garbage.ok());
  EXPECT_NE(garbage.error().message().find("line 1"), std::string::npos) << garbage.error().message();
  RuntimeEntry e = entry();
  e.runtime_args = {"--config", "/x"};
  EXPECT_FALSE(configure_containerd("", e).ok());
}

TEST(ContainerdConfig, KeepsCommentsAndOtherTablesAndUnconfigureRestoresTheText) {
  const std::string original =
      "# containerd config, kept by hand\n"
      "version = 2\n"
      "\n"
      "[plugins.\"io.containerd.grpc.v1.cri\"]\n"
      "  sandbox_image = \"pause:3.9\" # pinned\n"
      "\n"
      "[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runc]\n"
      "  runtime_type = \"io.containerd.runc.v2\"\n";
  auto added = configure_containerd(original, entry());
  ASSERT_TRUE(added.ok()) << added.error().message();
  EXPECT_EQ(added->rfind(original, 0), 0U) << *added;  // the text before is untouched, comments and all
  toml::table t = toml::parse(*added);
  auto rt = t["plugins"]["io.containerd.grpc.v1.cri"]["containerd"]["runtimes"];
  EXPECT_EQ(rt["ascend"]["runtime_type"].value<std::string>(), "io.containerd.runc.v2");
  EXPECT_EQ(rt["ascend"]["options"]["BinaryName"].value<std::string>(),
            "/usr/local/bin/ascend-docker-runtime");
  EXPECT_EQ(rt["runc"]["runtime_type"].value<std::string>(), "io.containerd.runc.v2");
  // Again with another path: still one entry, the new path, the comments kept.
  RuntimeEntry moved = entry();
  moved.path = "/opt/x/ascend-docker-runtime";
  auto again = configure_containerd(*added, moved);
  ASSERT_TRUE(again.ok()) << again.error().message();
  EXPECT_EQ(again->rfind(original, 0), 0U) << *again;
  EXPECT_EQ(toml::parse(*again)["plugins"]["io.containerd.grpc.v1.cri"]["containerd"]["runtimes"]["ascend"]
                               ["options"]["BinaryName"]
                                   .value<std::string>(),
            "/opt/x/ascend-docker-runtime");
  auto removed = unconfigure_containerd(*again, "ascend");
  ASSERT_TRUE(removed.ok()) << removed.error().message();
  EXPECT_EQ(*removed, original);
}

TEST(ContainerdConfig, AnEntryInAnotherFormIsRewrittenWithTheRightValues) {
  // A dotted key defines the table: appending a header for it would be invalid TOML, so toml++ rewrites.
  const std::string inline_entry =
      "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\".containerd]\n"
      "runtimes.ascend = { runtime_type = \"io.containerd.runc.v1\" }\n";
  auto r = configure_containerd(inline_entry, entry());
  ASSERT_TRUE(r.ok()) << r.error().message();
  toml::table t = toml::parse(*r);
  auto rt = t["plugins"]["io.containerd.grpc.v1.cri"]["containerd"]["runtimes"]["ascend"];
  EXPECT_EQ(rt["runtime_type"].value<std::string>(), "io.containerd.runc.v2");
  EXPECT_EQ(rt["options"]["BinaryName"].value<std::string>(), "/usr/local/bin/ascend-docker-runtime");
}

TEST(DockerConfig, MalformedJsonNamesLineAndColumn) {
  struct Case {
    const char* text;
    const char* where;
  };
  for (const Case& c : {Case{"{\"a\": 1,\n \"b\": }\n", "line 2 column 7"}, Case{"{,", "line 1 column 2"},
                        Case{"{\n\n  x\n}", "line 3 column 3"}}) {
    auto r = configure_docker(c.text, entry());
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_NE(r.error().message().find(c.where), std::string::npos) << r.error().message();
  }
  auto array = configure_docker("[1]", entry());
  ASSERT_FALSE(array.ok());
  EXPECT_NE(array.error().message().find("not a JSON object"), std::string::npos);
}

// ascend-ctk runtime configure/unconfigure: the default file, a file not there yet (its folder made), a dry
// run that writes nothing, and errors that name the file.
TEST(EditEngineConfig, WritesTheFileOrPrintsItAndNamesTheFileInErrors) {
  testing::TempDir dir;
  EngineEdit e;
  e.file = dir.path() + "/etc/docker/daemon.json";  // neither folder exists yet
  e.entry.path = "/usr/local/bin/ascend-docker-runtime";
  e.dry_run = true;
  auto dry = edit_engine_config(e);
  ASSERT_TRUE(dry.ok()) << dry.error().message();
  EXPECT_EQ(ordered_json::parse(*dry)["runtimes"]["ascend"]["path"], "/usr/local/bin/ascend-docker-runtime");
  EXPECT_FALSE(std::filesystem::exists(e.file)) << "a dry run writes nothing";
  e.dry_run = false;
  auto done = edit_engine_config(e);
  ASSERT_TRUE(done.ok()) << done.error().message();
  EXPECT_EQ(*done, "updated " + e.file + "; restart dockerd to apply it\n");
  std::ifstream in(e.file);
  EXPECT_EQ(ordered_json::parse(in)["runtimes"]["ascend"]["path"], "/usr/local/bin/ascend-docker-runtime");
  e.add = false;
  ASSERT_TRUE(edit_engine_config(e).ok());
  std::ifstream again(e.file);
  EXPECT_FALSE(ordered_json::parse(again).contains("runtimes"));

  e.engine = "podman";
  EXPECT_EQ(edit_engine_config(e).error().code(), EINVAL);
  e.engine = "docker";
  std::ofstream(e.file) << "{not json";
  auto bad = edit_engine_config(e);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message().find(e.file), std::string::npos) << bad.error().message();
  e.file = dir.path();  // a folder: cannot be read as a file
  EXPECT_FALSE(edit_engine_config(e).ok());
}

}  // namespace
}  // namespace ascend::hook
