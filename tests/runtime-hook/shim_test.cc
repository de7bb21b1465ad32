// The shim's command-line parsing (runc's argv passes through untouched), the configuration file, and the
// test switch that only the shim's test build has.
#include <elf.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "ascend/hook/config.h"
#include "ascend/hook/shim.h"
#include "support.h"

namespace ascend::hook {
namespace {

using testing::slurp;
using testing::spit;
using testing::TempDir;

// The kill switch of the lifecycle tests (shim.h) is compiled into their build of the shim only: the
// shipped binary holds neither the variable's name nor a path that reads it. The test build holds the
// name, which shows that the search would find it.
TEST(TestSwitch, OnlyTheTestBuildOfTheShimKnowsAscendRuntimeAbortAt) {
  const std::string name = "ASCEND_RUNTIME_ABORT_AT";
  const std::string shipped = slurp(testing::bin("ascend-docker-runtime"));
  const std::string testkill = slurp(testing::bin("ascend-docker-runtime-testkill"));
  ASSERT_GT(shipped.size(), 100000U) << "the shipped shim was read";
  ASSERT_GT(testkill.size(), 100000U) << "its test build was read";
  EXPECT_EQ(shipped.find(name), std::string::npos) << "the shipped shim names the test switch";
  EXPECT_NE(testkill.find(name), std::string::npos) << "the test build lacks the switch";
}

TEST(RuntimeArgs, PassesEverythingThroughButTheShimsOwnConfig) {
  struct Case {
    std::vector<std::string> argv;
    std::vector<std::string> passed;
    std::string config, verb, bundle, log, log_format;
  };
  const Case cases[] = {
      // What containerd-shim-runc-v2 sends for docker run.
      {{"--root", "/run/docker/runtime-runc/moby", "--log", "/run/x/log.json", "--log-format", "json",
        "create", "--bundle", "/run/b", "--pid-file", "/run/b/init.pid", "c1"},
       {"--root", "/run/docker/runtime-runc/moby", "--log", "/run/x/log.json", "--log-format", "json",
        "create", "--bundle", "/run/b", "--pid-file", "/run/b/init.pid", "c1"},
       "",
       "create",
       "/run/b",
       "/run/x/log.json",
       "json"},
      // daemon.json runtimeArgs put --config first; it is the shim's and is removed.
      {{"--config", "/etc/a.yaml", "--root", "/r", "state", "c1"},
       {"--root", "/r", "state", "c1"},
       "/etc/a.yaml",
       "state"},
      {{"--config=/etc/a.yaml", "--systemd-cgroup", "run", "-b", "bundle", "c1"},
       {"--systemd-cgroup", "run", "-b", "bundle", "c1"},
       "/etc/a.yaml",
       "run",
       "bundle"},
      {{"--log=/l", "--log-format=text", "create", "--bundle=/b", "c"},
       {"--log=/l", "--log-format=text", "create", "--bundle=/b", "c"},
       "",
       "create",
       "/b",
       "/l",
       "text"},
      // After the verb, --config belongs to the runtime.
      {{"exec", "--config", "x", "c1"}, {"exec", "--config", "x", "c1"}, "", "exec"},
      // No bundle flag: the current directory.
      {{"create", "c1"}, {"create", "c1"}, "", "create", ""},
      {{"--version"}, {"--version"}, "", ""},
      {{}, {}, "", ""},
  };
  for (const auto& c : cases) {
    std::string label;
    for (const auto& a : c.argv) label += a + " ";
    SCOPED_TRACE(label);
    auto r = parse_runtime_args(c.argv);
    ASSERT_TRUE(r.ok()) << r.error().message();
    EXPECT_EQ(r->runtime_args, c.passed);
    EXPECT_EQ(r->config, c.config);
    EXPECT_EQ(r->verb, c.verb);
    EXPECT_EQ(r->bundle, c.bundle);
    EXPECT_EQ(r->log_file, c.log);
    EXPECT_EQ(r->log_format, c.log_format);
  }
  EXPECT_FALSE(parse_runtime_args({"--config"}).ok());
}

// The container id and runc's state folder: what the shim tags a dynamic vNPU with, so that `vnpu gc` finds
// the container in the engine's own state. Argument lists as Docker, containerd and runc's docs give them.
TEST(RuntimeArgs, ContainerIdAndStateRoot) {
  struct Case {
    std::vector<std::string> argv;
    std::string id, root;
  };
  const Case cases[] = {
      {{"--root", "/run/docker/runtime-runc/moby", "--log", "/l", "--log-format", "json", "create",
        "--bundle", "/run/b", "--pid-file", "/run/b/init.pid", "c1"},
       "c1",
       "/run/docker/runtime-runc/moby"},
      {{"--root=/run/containerd/runc/k8s.io", "create", "--bundle", "/b", "--console-socket", "/s.sock",
        "--preserve-fds", "2", "--no-pivot", "c2"},
       "c2",
       "/run/containerd/runc/k8s.io"},
      {{"run", "-d", "--keep", "-b", "/b", "c3"}, "c3", ""},
      {{"create", "--pid-file=/p", "--", "c4"}, "c4", ""},
      {{"create", "c5", "--bundle", "/b"}, "c5", ""},  // options after the id (urfave/cli allows it)
      {{"state", "c6"}, "", ""},                       // only create and run make containers
  };
  for (const auto& c : cases) {
    auto r = parse_runtime_args(c.argv);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->container_id, c.id) << c.argv.back();
    EXPECT_EQ(r->state_root, c.root) << c.argv.back();
  }
  RuntimeArgs none;
  EXPECT_EQ(runc_state_root(none), ::geteuid() == 0 ? "/run/runc" : runc_state_root(none));
  RuntimeArgs docker;
  docker.state_root = "/run/docker/runtime-runc/moby";
  EXPECT_EQ(runc_state_root(docker), "/run/docker/runtime-runc/moby");
}

TEST(FindRuntime, SearchesPathAndRefusesMissing) {
  auto runc = find_runtime("runc");
  if (testing::have_program("runc")) {
    ASSERT_TRUE(runc.ok()) << runc.error().message();
    EXPECT_NE(runc->find("/runc"), std::string::npos);
  }
  EXPECT_FALSE(find_runtime("no-such-runtime-xyz").ok());
  EXPECT_FALSE(find_runtime("/no/such/runc").ok());
  auto abs = find_runtime("/bin/sh");
  ASSERT_TRUE(abs.ok());
  EXPECT_EQ(*abs, "/bin/sh");
}

TEST(Config, DefaultsFindSiblingsNextToTheExecutable) {
  TempDir d("cfg");
  ConfigDefaults defaults{"/opt/ascend/bin", "runtime-run.log", d / "no-such-config-dir"};
  auto c = load_config("", defaults);
  ASSERT_TRUE(c.ok()) << c.error().message();
  EXPECT_EQ(c->config_file, "");
  EXPECT_EQ(c->host_root, "/");
  EXPECT_EQ(c->runtime_path, "runc");
  EXPECT_EQ(c->hook_path, "/opt/ascend/bin/ascend-docker-hook");
  EXPECT_EQ(c->mount_list_dir, "/opt/ascend/bin");  // no config folder: the lists next to the binary
  EXPECT_EQ(c->log_file, "/var/log/ascend-docker-runtime/runtime-run.log");
  EXPECT_EQ(c->injection, "spec");

  // With the config folder present, the lists live there and its config.yaml is read.
  ::mkdir((d / "etc").c_str(), 0755);
  defaults.config_dir = d / "etc";
  spit(d / "etc/config.yaml", "host-root: /srv/host\nlog-level: debug\n");
  auto c2 = load_config("", defaults);
  ASSERT_TRUE(c2.ok()) << c2.error().message();
  EXPECT_EQ(c2->config_file, d / "etc/config.yaml");
  EXPECT_EQ(c2->mount_list_dir, d / "etc");
  EXPECT_EQ(c2->host_root, "/srv/host");
  EXPECT_EQ(c2->log_level, "debug");
}

TEST(Config, ExplicitFileOverridesEveryKey) {
  TempDir d("cfg");
  spit(d / "c.yaml",
       "host-root: /h\nruntime-path: /usr/sbin/runc\nhook-path: /x/hook\nmount-list-dir: /lists\n"
       "log-file: /tmp/l.log\nlog-level: warn\ninjection: hook\n");
  auto c = load_config(d / "c.yaml", {"/bin", "x.log", d / "none"});
  ASSERT_TRUE(c.ok()) << c.error().message();
  EXPECT_EQ(c->host_root, "/h");
  EXPECT_EQ(c->runtime_path, "/usr/sbin/runc");
  EXPECT_EQ(c->hook_path, "/x/hook");
  EXPECT_EQ(c->mount_list_dir, "/lists");
  EXPECT_EQ(c->log_file, "/tmp/l.log");
  EXPECT_EQ(c->log_level, "warn");
  EXPECT_EQ(c->injection, "hook");
  EXPECT_TRUE(c->accept_env_when_unprivileged);  // the default
  spit(d / "strict.yaml", "accept-env-when-unprivileged: false\n");
  auto strict = load_config(d / "strict.yaml", {"/bin", "x.log", d / "none"});
  ASSERT_TRUE(strict.ok()) << strict.error().message();
  EXPECT_FALSE(strict->accept_env_when_unprivileged);
  // A relative --config is made absolute: the hook that receives it runs in another folder.
  auto rel = load_config("c.yaml", {"/bin", "x.log", d / "none"});
  ASSERT_FALSE(rel.ok());  // not in this folder
  char cwd[4096];
  ASSERT_NE(::getcwd(cwd, sizeof cwd), nullptr);
  ASSERT_EQ(::chdir(d.path().c_str()), 0);
  auto rel2 = load_config("c.yaml", {"/bin", "x.log", d / "none"});
  ASSERT_EQ(::chdir(cwd), 0);
  ASSERT_TRUE(rel2.ok()) << rel2.error().message();
  EXPECT_EQ(rel2->config_file, d / "c.yaml");
  spit(d / "empty.yaml", "log-file:\n");
  auto e = load_config(d / "empty.yaml", {"/bin", "x.log", d / "none"});
  ASSERT_TRUE(e.ok()) << e.error().message();
  EXPECT_EQ(e->log_file, "");
}

TEST(Config, RejectsUnknownKeysWrongTypesAndRelativePaths) {
  TempDir d("cfg");
  const std::pair<const char*, const char*> cases[] = {
      {"host_root: /h\n", "unknown key 'host_root'"},
      {"host-root: relative\n", "'host-root' must be an absolute path"},
      {"hook-path: [a]\n", "'hook-path' must be a string"},
      {"- a\n- b\n", "expected a mapping"},
      {"host-root: [\n", "line"},
      {"runtime-path: ''\n", "'runtime-path' is empty"},
      {"injection: prestart\n", "'injection' must be spec or hook, not 'prestart'"},
      {"accept-env-when-unprivileged: no-thanks\n", "'accept-env-when-unprivileged' must be true or false"},
      {"accept-env-when-unprivileged: 'false'\n", "'accept-env-when-unprivileged' must be true or false"},
  };
  for (const auto& [text, want] : cases) {
    SCOPED_TRACE(text);
    spit(d / "bad.yaml", text);
    auto c = load_config(d / "bad.yaml", {"/bin", "", d / "none"});
    ASSERT_FALSE(c.ok());
    EXPECT_NE(c.error().message().find(want), std::string::npos) << c.error().message();
    EXPECT_NE(c.error().message().find("bad.yaml"), std::string::npos) << c.error().message();
  }
  auto missing = load_config(d / "missing.yaml", {"/bin", "", d / "none"});
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message().find("missing.yaml"), std::string::npos);
}

// The list an unknown key's refusal gives.
const std::string kKnown =
    "(known: host-root, runtime-path, hook-path, mount-list-dir, log-file, log-level, injection, "
    "accept-env-when-unprivileged, backend, dcmi-library, dcmi-helper)";

// Each config text is refused with exactly `config FILE: ` and the text given with it, as EINVAL.
void expect_refusals(const std::vector<std::pair<std::string, std::string>>& cases) {
  TempDir d("cfg");
  const std::string f = d / "bad.yaml";
  for (const auto& [text, want] : cases) {
    SCOPED_TRACE(text);
    spit(f, text);
    auto c = load_config(f, {"/bin", "", d / "none"});
    ASSERT_FALSE(c.ok());
    EXPECT_EQ(c.error().message(), "config " + f + ": " + want);
    EXPECT_EQ(c.error().code(), EINVAL);
  }
}

// The whole of each refusal, written down from the messages as they were when the config got its own CLI11
// app (they must not change: scripts and users match them). Every one is EINVAL and names the file.
TEST(Config, RefusalsWordForWord) {
  expect_refusals({
      {"host_root: /h\n", "unknown key 'host_root' " + kKnown},
      {"help: true\n", "unknown key 'help' " + kKnown},
      {"host-root: relative\n", "'host-root' must be an absolute path, not 'relative'"},
      {"hook-path: ''\n", "'hook-path' must be an absolute path, not ''"},
      {"mount-list-dir: lists\n", "'mount-list-dir' must be an absolute path, not 'lists'"},
      {"dcmi-library: libdcmi.so\n", "'dcmi-library' must be an absolute path, not 'libdcmi.so'"},
      {"dcmi-helper: ./helper\n", "'dcmi-helper' must be an absolute path, not './helper'"},
      {"hook-path: [a]\n", "'hook-path' must be a string"},
      {"host-root:\n", "'host-root' must be a string"},
      {"log-level: 3\n", "'log-level' must be a string"},
      {"injection: true\n", "'injection' must be a string"},
      {"- a\n- b\n", "expected a mapping of keys to values"},
      {"just text\n", "expected a mapping of keys to values"},
      {"runtime-path: ''\n", "'runtime-path' is empty"},
      {"log-file: run.log\n", "'log-file' must be an absolute path or empty"},
      {"injection: prestart\n", "'injection' must be spec or hook, not 'prestart'"},
      {"backend: cuda\n", "'backend': backend 'cuda' (use auto, emulator or dcmi)"},
      {"accept-env-when-unprivileged: no-thanks\n", "'accept-env-when-unprivileged' must be true or false"},
      {"accept-env-when-unprivileged: 'false'\n", "'accept-env-when-unprivileged' must be true or false"},
      {"accept-env-when-unprivileged:\n", "'accept-env-when-unprivileged' must be true or false"},
  });
  // A YAML syntax error is yaml-cpp's, after the file and the line.
  TempDir d("cfg");
  const std::string f = d / "bad.yaml";
  spit(f, "log-level: info\nhost-root: [\n");
  auto c = load_config(f, {"/bin", "", d / "none"});
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.error().message().rfind("config: " + f + ": line ", 0), 0U) << c.error().message();
  EXPECT_EQ(c.error().code(), EINVAL);
}

// A file with several faults names the first key in name order that has one, whatever the fault (the keys
// are read sorted, each checked in full before the next).
TEST(Config, TheFirstFaultyKeyInNameOrderIsNamed) {
  expect_refusals({
      {"zz: 1\nhost-root: rel\n", "'host-root' must be an absolute path, not 'rel'"},
      {"host-root: rel\naa: 1\n", "unknown key 'aa' " + kKnown},
      {"log-level: 3\nhook-path: rel\n", "'hook-path' must be an absolute path, not 'rel'"},
      {"injection: x\nhost-root: 3\n", "'host-root' must be a string"},
      {"runtime-path: ''\naccept-env-when-unprivileged: 1\n",
       "'accept-env-when-unprivileged' must be true or false"},
      {"backend: cuda\nlog-file: rel\n", "'backend': backend 'cuda' (use auto, emulator or dcmi)"},
  });
}

TEST(Config, TheSeamsKeysAndAnEmptyLogFile) {
  TempDir d("cfg");
  spit(d / "c.yaml",
       "backend: dcmi\ndcmi-library: /usr/local/dcmi/libdcmi.so\ndcmi-helper: /opt/bin/helper\nlog-file: ''\n"
       "accept-env-when-unprivileged: true\n");
  auto c = load_config(d / "c.yaml", {"/bin", "x.log", d / "none"});
  ASSERT_TRUE(c.ok()) << c.error().message();
  EXPECT_EQ(c->backend, "dcmi");
  EXPECT_EQ(c->dcmi_library, "/usr/local/dcmi/libdcmi.so");
  EXPECT_EQ(c->dcmi_helper, "/opt/bin/helper");
  EXPECT_EQ(c->log_file, "");
  EXPECT_TRUE(c->accept_env_when_unprivileged);
  // Comments, blank lines and an all-comment file (all defaults).
  spit(d / "c.yaml", "# nothing here\n\n");
  auto none = load_config(d / "c.yaml", {"/bin", "x.log", d / "none"});
  ASSERT_TRUE(none.ok()) << none.error().message();
  EXPECT_EQ(none->config_file, d / "c.yaml");
  EXPECT_EQ(none->backend, "auto");
  EXPECT_EQ(none->dcmi_helper, "/bin/ascend-dcmi-query");
}

TEST(Config, AFileThatGroupOrOthersCanWriteIsRefusedWithItsMode) {
  // Whoever can write the config chooses the runtime and the hook that run as root in every container start.
  TempDir d("cfg");
  spit(d / "c.yaml", "log-level: info\n");
  for (mode_t mode : {0600, 0640, 0644, 0400}) {
    ASSERT_EQ(::chmod((d / "c.yaml").c_str(), mode), 0);
    auto c = load_config(d / "c.yaml", {"/bin", "", d / "none"});
    EXPECT_TRUE(c.ok()) << std::oct << mode << ": " << c.error().message();
  }
  const std::pair<mode_t, const char*> refused[] = {
      {0664, "mode 0664"}, {0646, "mode 0646"}, {0666, "mode 0666"}};
  for (const auto& [mode, want] : refused) {
    ASSERT_EQ(::chmod((d / "c.yaml").c_str(), mode), 0);
    auto c = load_config(d / "c.yaml", {"/bin", "", d / "none"});
    ASSERT_FALSE(c.ok()) << std::oct << mode;
    EXPECT_NE(c.error().message().find(want), std::string::npos) << c.error().message();
    EXPECT_NE(c.error().message().find(d / "c.yaml"), std::string::npos) << c.error().message();
    EXPECT_NE(c.error().message().find("not writable by group or others"), std::string::npos);
    EXPECT_EQ(c.error().message().find('\n'), std::string::npos);
  }
}

// The early pass-through (shim.h), run in a child as the shim runs it: it either execs the runtime (here a
// script that writes its arguments to a file and exits 42) or returns, having changed nothing, with what it
// read handed over for a container that may ask for NPUs. The child says which by its exit code.
struct Early {
  bool execd = false;
  std::string runtime_args;  // what the runtime got, when it ran
  bool returned = false;
  bool handed_over = false;  // take_early_read() had something
  EarlyRead read;
};

Early run_early(const TempDir& d, const std::vector<std::string>& argv) {
  const std::string out = d / "early.out";
  ::unlink(out.c_str());
  pid_t pid = ::fork();
  if (pid == 0) {
    std::vector<std::string> copy = argv;
    std::vector<char*> raw;
    for (auto& a : copy) raw.push_back(a.data());
    raw.push_back(nullptr);
    pass_through_early(static_cast<int>(copy.size()), raw.data());
    auto read = take_early_read();
    std::string what = "returned\n";
    if (read) {
      nlohmann::json j{{"args", read->args.runtime_args},
                       {"config", read->args.config},
                       {"verb", read->args.verb},
                       {"bundle", read->args.bundle},
                       {"runtime", read->config.runtime_path},
                       {"config_file", read->config.config_file},
                       {"spec", read->spec_text ? *read->spec_text : std::string("<none>")}};
      what += j.dump();
    }
    spit(out, what);
    ::_exit(7);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  Early e;
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::string text = slurp(out);
  if (code == 42) {
    e.execd = true;
    e.runtime_args = text.substr(0, text.find('\n'));
  } else if (code == 7) {
    e.returned = true;
    std::string rest = text.substr(text.find('\n') + 1);
    if (!rest.empty()) {
      auto j = nlohmann::json::parse(rest);
      e.handed_over = true;
      e.read.args.runtime_args = j["args"].get<std::vector<std::string>>();
      e.read.args.config = j["config"];
      e.read.args.verb = j["verb"];
      e.read.args.bundle = j["bundle"];
      e.read.config.runtime_path = j["runtime"];
      e.read.config.config_file = j["config_file"];
      e.read.spec_text = j["spec"].get<std::string>();
    }
  }
  return e;
}

class EarlyPassThrough : public ::testing::Test {
 protected:
  void SetUp() override {
    spit(runtime_, "#!/bin/sh\necho \"$@\" > " + d_ / "early.out" + "\nexit 42\n");
    ASSERT_EQ(::chmod(runtime_.c_str(), 0755), 0);
    spit(config_, "runtime-path: " + runtime_ + "\nlog-level: info\n");
    ASSERT_EQ(::mkdir(bundle_.c_str(), 0755), 0);
    spit(bundle_ + "/config.json", kNothing);
  }
  static constexpr const char* kNothing =
      R"({"ociVersion":"1.0.2","process":{"args":["sh"],"env":["PATH=/bin","TERM=xterm"]},"root":{"path":"rootfs"}})";
  static constexpr const char* kAsks =
      R"({"ociVersion":"1.0.2","process":{"args":["sh"],"env":["PATH=/bin","ASCEND_VISIBLE_DEVICES=0"]},"root":{"path":"rootfs"}})";
  TempDir d_{"early"};
  std::string runtime_ = d_ / "fake-runc";
  std::string config_ = d_ / "config.yaml";
  std::string bundle_ = d_ / "bundle";
};

TEST_F(EarlyPassThrough, ExecsEveryVerbButCreateAndRunWithTheArgumentsAsGiven) {
  for (const char* verb : {"start", "delete", "state", "kill", "features"}) {
    Early e = run_early(d_, {"ascend-docker-runtime", "--config", config_, "--root", "/run/x", verb, "c1"});
    ASSERT_TRUE(e.execd) << verb;
    EXPECT_EQ(e.runtime_args, std::string("--root /run/x ") + verb + " c1");  // without the shim's --config
  }
}

TEST_F(EarlyPassThrough, ExecsACreateThatAsksForNothingAndLeavesItsSpecAlone) {
  for (const char* verb : {"create", "run"}) {
    Early e = run_early(d_, {"ascend-docker-runtime", "--config", config_, verb, "--bundle", bundle_, "c2"});
    ASSERT_TRUE(e.execd) << verb;
    EXPECT_EQ(e.runtime_args, std::string(verb) + " --bundle " + bundle_ + " c2");
    EXPECT_EQ(slurp(bundle_ + "/config.json"), kNothing);
  }
}

TEST_F(EarlyPassThrough, ACreateThatMayAskReturnsWithWhatItReadForMain) {
  spit(bundle_ + "/config.json", kAsks);
  Early e = run_early(d_, {"ascend-docker-runtime", "--config", config_, "create", "-b", bundle_, "c3"});
  ASSERT_TRUE(e.returned);
  ASSERT_TRUE(e.handed_over);
  EXPECT_EQ(e.read.args.verb, "create");
  EXPECT_EQ(e.read.args.bundle, bundle_);
  EXPECT_EQ(e.read.args.config, config_);
  EXPECT_EQ(e.read.args.runtime_args, (std::vector<std::string>{"create", "-b", bundle_, "c3"}));
  EXPECT_EQ(e.read.config.runtime_path, runtime_);
  EXPECT_EQ(e.read.config.config_file, config_);
  EXPECT_EQ(e.read.spec_text, std::string(kAsks));
  EXPECT_EQ(slurp(bundle_ + "/config.json"), kAsks);
}

// Anything else goes to main, with nothing handed over, so that main reads it all and says what is wrong in
// its own words.
TEST_F(EarlyPassThrough, ReturnsWithNothingForMainOnAnythingElse) {
  const std::string yaml_form = d_ / "flow.yaml";  // YAML the flat reader does not take; CLI11's reader does
  spit(yaml_form, "runtime-path: \"" + runtime_ + "\"\n");
  const std::string missing_runtime = d_ / "missing.yaml";
  spit(missing_runtime, "runtime-path: " + d_ / "no-such-runc" + "\n");
  const std::string unsafe = d_ / "unsafe.yaml";
  spit(unsafe, "runtime-path: " + runtime_ + "\n");
  ASSERT_EQ(::chmod(unsafe.c_str(), 0666), 0);
  const std::string no_spec = d_ / "empty-bundle";
  ASSERT_EQ(::mkdir(no_spec.c_str(), 0755), 0);
  const std::vector<std::vector<std::string>> cases = {
      {"ascend-docker-runtime", "--help"},
      {"ascend-docker-runtime", "-h"},
      {"ascend-docker-runtime", "--config"},  // --config without its file
      {"ascend-docker-runtime", "--config", d_ / "no-such.yaml", "start", "c"},
      {"ascend-docker-runtime", "--config", yaml_form, "start", "c"},
      {"ascend-docker-runtime", "--config", missing_runtime, "start", "c"},
      {"ascend-docker-runtime", "--config", unsafe, "start", "c"},
      {"ascend-docker-runtime", "--config", config_, "create", "--bundle", no_spec, "c"},
  };
  for (const auto& argv : cases) {
    Early e = run_early(d_, argv);
    EXPECT_TRUE(e.returned) << argv.back();
    EXPECT_FALSE(e.handed_over) << argv.back();
  }
  // The flow form is the one main's CLI11 reader takes: the early path only leaves it to main.
  auto c = load_config(yaml_form, shim_config_defaults());
  ASSERT_TRUE(c.ok()) << c.error().message();
  EXPECT_EQ(c->runtime_path, runtime_);
  EXPECT_FALSE(load_config(yaml_form, shim_config_defaults(), ConfigReaders::flat_only).ok());
}

// The shipped shim runs the early pass-through from .preinit_array: one entry, which a static program calls
// before its static initialisers. Read from the binary's section headers.
#if defined(__SANITIZE_ADDRESS__)
#define ASCEND_TEST_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ASCEND_TEST_SANITIZED 1
#endif
#endif
TEST(EarlyPassThroughBinary, TheShimHasOnePreinitEntry) {
#if defined(ASCEND_TEST_SANITIZED)
  GTEST_SKIP()
      << "a sanitizer build links the shim dynamically and without the early call (its run-time starts "
         "first)";
#endif
  const std::string bytes = slurp(testing::bin("ascend-docker-runtime"));
  ASSERT_GT(bytes.size(), sizeof(Elf64_Ehdr));
  Elf64_Ehdr eh{};
  std::memcpy(&eh, bytes.data(), sizeof eh);
  ASSERT_EQ(std::memcmp(eh.e_ident, ELFMAG, SELFMAG), 0);
  ASSERT_EQ(eh.e_ident[EI_CLASS], ELFCLASS64);
  ASSERT_LE(eh.e_shoff + std::uint64_t{eh.e_shnum} * sizeof(Elf64_Shdr), bytes.size());
  std::vector<Elf64_Shdr> sections(eh.e_shnum);
  std::memcpy(sections.data(), bytes.data() + eh.e_shoff, eh.e_shnum * sizeof(Elf64_Shdr));
  ASSERT_LT(eh.e_shstrndx, sections.size());
  const Elf64_Shdr& names = sections[eh.e_shstrndx];
  int preinit = 0;
  for (const auto& sh : sections) {
    if (sh.sh_type != SHT_PREINIT_ARRAY) continue;
    ++preinit;
    ASSERT_LT(names.sh_offset + sh.sh_name, bytes.size());
    EXPECT_STREQ(bytes.c_str() + names.sh_offset + sh.sh_name, ".preinit_array");
    EXPECT_EQ(sh.sh_size, sizeof(void*)) << "one early call";
  }
  EXPECT_EQ(preinit, 1);
  // Static: no interpreter, so nothing runs before the early call but the C library's own start-up.
  ASSERT_LE(eh.e_phoff + std::uint64_t{eh.e_phnum} * sizeof(Elf64_Phdr), bytes.size());
  const auto* ph = reinterpret_cast<const Elf64_Phdr*>(bytes.data() + eh.e_phoff);
  for (int i = 0; i < eh.e_phnum; ++i) EXPECT_NE(ph[i].p_type, static_cast<Elf64_Word>(PT_INTERP));
}

}  // namespace
}  // namespace ascend::hook
