// The shim's fast paths (issue 25): the flat config reader (config.h, parse_flat_yaml, and read_config_flat,
// which applies it without CLI11) and the one-pass look
// at a spec that asks for nothing (spec_scan.h). Each must agree with the full path it stands in for
// (yaml-cpp through parse_yaml; parse_spec, trusted_request_env and requests_devices) on every input it
// accepts, and must accept the ordinary inputs, or it saves nothing. Edge cases by hand, then random
// inputs judged against the full path (fixed seeds; --gtest_random_seed=N explores others).
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <functional>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "ascend/common/yaml_json.h"
#include "ascend/hook/config.h"
#include "ascend/hook/oci.h"
#include "ascend/hook/request.h"
#include "ascend/hook/spec_scan.h"
#include "ascend/hook/trust.h"

namespace ascend::hook {
namespace {

using nlohmann::json;

std::string read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// ---- the flat config reader ----

// The flat reader either declines or reads exactly what yaml-cpp reads.
void expect_agrees(const std::string& text) {
  SCOPED_TRACE(::testing::PrintToString(text));
  auto flat = parse_flat_yaml(text);
  if (!flat) return;
  auto full = parse_yaml(text, "t.yaml");
  ASSERT_TRUE(full.ok()) << "the flat reader took a text yaml-cpp refuses: " << full.error().message();
  EXPECT_EQ(*flat, *full);
}

TEST(FlatConfig, ReadsTheInstalledConfigAndTheTestsConfigsWithoutYamlCpp) {
  // The config the installer ships (deploy/docker/config.yaml) and the shapes the tests write.
  const std::string shipped = read(std::string(ASCEND_FIXTURES) + "/../../deploy/docker/config.yaml");
  ASSERT_NE(shipped.find("runtime-path: runc"), std::string::npos);
  const std::string texts[] = {
      shipped,
      std::string("host-root: /tmp/h\nmount-list-dir: /tmp/h/lists\nhook-path: /b/ascend-docker-hook\n") +
          "log-file: /tmp/log/ascend.log\nlog-level: debug\ninjection: spec\nbackend: emulator\n",
      "host-root: /srv/host\nlog-level: debug\n",
      "log-file:\n",
      "accept-env-when-unprivileged: false\n",
      "runtime-path: /usr/sbin/runc   # a comment after the value\n",
  };
  for (const auto& text : texts) {
    SCOPED_TRACE(text.substr(0, 60));
    auto flat = parse_flat_yaml(text);
    ASSERT_TRUE(flat.has_value());
    auto full = parse_yaml(text, "t.yaml");
    ASSERT_TRUE(full.ok());
    EXPECT_EQ(*flat, *full);
  }
  // Values by hand: YAML 1.2's plain scalars as yaml_json.h types them.
  auto v = parse_flat_yaml("a: /x/y\nb: True\nc: false\nd: ~\ne: 12\nf:\ng: 1.5\nh: a b  # c\n");
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(*v, json::parse(R"({"a":"/x/y","b":true,"c":false,"d":null,"e":12,"f":null,"g":1.5,"h":"a b"})"));
  // Nothing but comments: no document, as yaml-cpp reads it (null: every default).
  auto none = parse_flat_yaml("# only\n\n   # comments\n");
  ASSERT_TRUE(none.has_value());
  EXPECT_TRUE(none->is_null());
}

TEST(FlatConfig, DeclinesWhatItDoesNotReadTheSameWay) {
  const char* declined[] = {
      "a: 'quoted'\n",
      "a: \"quoted\"\n",
      "a:\n  b: 1\n",
      "a: [1, 2]\n",
      "a: {b: c}\n",
      "- a\n",
      "a: &x 1\n",
      "a: *x\n",
      "a: !!str 5\n",
      "a: |\n  x\n",
      "---\na: 1\n",
      "a: 1\n...\n",
      "\ta: 1\n",
      "a:\t1\n",
      "a: 1\r\n",
      "a: b: c\n",
      "a:b\n",
      "a : b\n",
      "a: b#c\n",
      "a: 1\na: 2\n",
      "\357\273\277a: 1\n",  // a BOM
      "a: \xC3\xA9\n",
      "a: -1\n",
      "%YAML 1.2\na: 1\n",
      "? a\n: b\n",
      "a: b\n  c\n",
      "a: x,y\n",
      "a: @x\n",
      "a: `x`\n",
      "a b: c\n",
  };
  for (const char* text : declined) {
    EXPECT_FALSE(parse_flat_yaml(text).has_value()) << ::testing::PrintToString(std::string(text));
  }
}

TEST(FlatConfig, RandomConfigsAgreeWithYamlCpp) {
  const std::vector<std::string> keys = {"host-root", "log-level", "a",  "x_y", "123", "-k",
                                         "k k",       "true",      "?k", "_k",  "é"};
  const std::vector<std::string> seps = {": ", ":", ":  ", " : ", ":\t", ":x", "", ": # c "};
  const std::vector<std::string> values = {
      "",      "/a/b",    "runc", "info", "True",  "false",       "~",
      "null",  "12",      "-3",   "1.5",  ".5",    "1e3",         "0x10",
      "'q'",   "\"q\"",   "a #c", "a#b",  "[a]",   "{a: b}",      "&x a",
      "*x",    "!!str 5", "|",    ">",    "a: b",  "- a",         "a b",
      "a  b ", "%x",      "@x",   "a,b",  "yes",   "-",           "--",
      "+1",    "~x",      "00",   "-0",   "1_000", "a/b.c-d+e~f", "99999999999999999999",
      "1.",    "inf",     ".nan", "é"};
  const std::vector<std::string> prefixes = {"", "", "", "  ", "\t", "- ", "# ", "---\n"};
  const std::vector<std::string> ends = {"\n", "\n", "\n", "\r\n", ""};
  const std::vector<std::string> extra = {"# comment\n", "\n",      "   \n",        "---\n",
                                          "...\n",       "  # c\n", "  nested: 1\n"};
  std::mt19937 rng(25 + ::testing::UnitTest::GetInstance()->random_seed());
  auto pick = [&](const std::vector<std::string>& v) { return v[rng() % v.size()]; };
  int taken = 0;
  int declined = 0;
  for (int i = 0; i < 8000; ++i) {
    std::string text;
    int lines = 1 + static_cast<int>(rng() % 5);
    for (int l = 0; l < lines; ++l) {
      if (rng() % 5 == 0) {
        text += pick(extra);
        continue;
      }
      // One pick per statement: the operands of + are evaluated in an unspecified order, so a chained
      // expression draws a different text from the same seed under another compiler or optimisation level.
      for (const auto* part : {&prefixes, &keys, &seps, &values, &ends}) text += pick(*part);
    }
    if (parse_flat_yaml(text)) {
      ++taken;
    } else {
      ++declined;
    }
    expect_agrees(text);
    if (HasFatalFailure()) return;
  }
  // Both ways often enough that the comparison means something.
  EXPECT_GT(taken, 200);
  EXPECT_GT(declined, 200);
}

// ---- the flat config applied without CLI11 ----

// Every field of a Config, written out (config.h's struct), so that two reads compare as a whole.
std::string fields(const Config& c) {
  return ::testing::PrintToString(std::vector<std::string>{
      c.config_file, c.host_root, c.runtime_path, c.hook_path, c.mount_list_dir, c.log_file, c.log_level,
      c.injection, c.accept_env_when_unprivileged ? "accept" : "refuse", c.backend, c.dcmi_library,
      c.dcmi_helper});
}

// What load_config starts from, every field set, so that a key read or a field left alone shows.
Config base_config() {
  Config c;
  // Every field away from its default (and from the shipped file's values), but accept-env, which the
  // files turn off.
  c.runtime_path = "/base/runc";
  c.log_level = "warn";
  c.injection = "hook";
  c.backend = "emulator";
  c.host_root = "/base/root";
  c.hook_path = "/base/bin/ascend-docker-hook";
  c.mount_list_dir = "/base/lists";
  c.log_file = "/base/log/runtime-run.log";
  c.dcmi_helper = "/base/bin/ascend-dcmi-query";
  c.dcmi_library = "/base/lib/libdcmi.so";
  return c;
}

struct TwoReads {
  bool flat = false;       // read_config_flat took the text
  std::string flat_read;   // what it read (the base when it declined)
  bool cli11_ok = false;   // read_config_cli11 accepted it
  std::string cli11_read;  // what it read
  std::string cli11_error;
};

TwoReads read_both(const std::string& text) {
  TwoReads r;
  Config flat = base_config();
  r.flat = read_config_flat(text, flat);
  r.flat_read = fields(flat);
  Config full = base_config();
  auto applied = read_config_cli11(text, full, "c.yaml", "/etc/c.yaml");
  r.cli11_ok = applied.ok();
  r.cli11_read = fields(full);
  if (!applied) r.cli11_error = applied.error().message();
  return r;
}

// The flat reader reads what CLI11's reader reads, or declines (and leaves the config alone), and it declines
// every text CLI11's reader refuses, so every refusal is CLI11's.
// The two reads of `text`, checked: taken alike, or declined (then unchanged) exactly when CLI11 refuses it
// or it is not the flat form.
TwoReads expect_same_reading(const std::string& text) {
  SCOPED_TRACE(::testing::PrintToString(text));
  TwoReads r = read_both(text);
  if (r.flat) {
    EXPECT_TRUE(r.cli11_ok) << "the flat reader took a config CLI11's reader refuses: " << r.cli11_error;
    EXPECT_EQ(r.flat_read, r.cli11_read);
  } else {
    EXPECT_EQ(r.flat_read, fields(base_config())) << "a declined text changed the config";
    EXPECT_FALSE(r.cli11_ok && parse_flat_yaml(text).has_value())
        << "the flat reader declined a flat config CLI11's reader takes";
  }
  return r;
}

TEST(FlatConfigRead, TheInstallersConfigsAreReadWithoutCli11AsCli11ReadsThem) {
  const std::string root = std::string(ASCEND_FIXTURES) + "/../../deploy";
  const std::string texts[] = {
      read(root + "/docker/config.yaml"),
      read(root + "/kubernetes/node-config.yaml"),
      // install.sh's edit of the shipped file: its mount-list-dir line uncommented.
      read(root + "/docker/config.yaml") + "mount-list-dir: /etc/ascend-docker-runtime.d\n",
      // The shapes the tests and hook_bench write (support.cc, write_hook_config), every key once.
      "host-root: /tmp/h\nmount-list-dir: /tmp/h/lists\nhook-path: /b/ascend-docker-hook\n"
      "log-file: /tmp/log/ascend.log\nlog-level: debug\ninjection: hook\nbackend: emulator\n"
      "runtime-path: /bin/true\naccept-env-when-unprivileged: false\ndcmi-library: /d/libdcmi.so\n"
      "dcmi-helper: /d/ascend-dcmi-query\n",
      "runtime-path: /bin/true\nlog-level: info\nlog-file:\n",
      "# comments only\n",
      "",
  };
  for (const auto& text : texts) {
    SCOPED_TRACE(text.substr(0, 80));
    TwoReads r = read_both(text);
    EXPECT_TRUE(r.flat) << "the installer's config went to CLI11";
    ASSERT_TRUE(r.cli11_ok) << r.cli11_error;
    EXPECT_EQ(r.flat_read, r.cli11_read);
  }
  // The values themselves, written down from the file above (not from either reader).
  Config c = base_config();
  ASSERT_TRUE(read_config_flat(texts[3], c));
  EXPECT_EQ(fields(c),
            ::testing::PrintToString(std::vector<std::string>{
                "", "/tmp/h", "/bin/true", "/b/ascend-docker-hook", "/tmp/h/lists", "/tmp/log/ascend.log",
                "debug", "hook", "refuse", "emulator", "/d/libdcmi.so", "/d/ascend-dcmi-query"}));
  Config k = base_config();
  ASSERT_TRUE(read_config_flat(texts[1], k));
  EXPECT_FALSE(k.accept_env_when_unprivileged);
  EXPECT_EQ(k.host_root, "/");
  EXPECT_EQ(k.runtime_path, "runc");
  EXPECT_EQ(k.log_file, "/base/log/runtime-run.log");  // not in the file: left alone
}

TEST(FlatConfigRead, EveryRefusalIsCli11s) {
  // shim_test's word-for-word refusals and a few more: the flat reader declines each, CLI11 refuses it.
  const char* refused[] = {
      "host_root: /h\n",
      "help: true\n",
      "host-root: relative\n",
      "hook-path: ''\n",
      "mount-list-dir: lists\n",
      "dcmi-library: libdcmi.so\n",
      "dcmi-helper: ./helper\n",
      "hook-path: [a]\n",
      "host-root:\n",
      "log-level: 3\n",
      "injection: true\n",
      "- a\n- b\n",
      "just text\n",
      "runtime-path: ''\n",
      "runtime-path:\n",
      "log-file: run.log\n",
      "log-file: 3\n",
      "log-file: true\n",
      "injection: prestart\n",
      "backend: cuda\n",
      "accept-env-when-unprivileged: no-thanks\n",
      "accept-env-when-unprivileged: 'false'\n",
      "accept-env-when-unprivileged:\n",
      "accept-env-when-unprivileged: 1\n",
      "log-level: info\nhost-root: [\n",
      "zz: 1\nhost-root: rel\n",
      "host-root: rel\naa: 1\n",
      "log-level: info\nbackend: dcmi\nhost-root: /h\nHost-root: /h\n",
  };
  for (const char* text : refused) {
    SCOPED_TRACE(text);
    TwoReads r = read_both(text);
    EXPECT_FALSE(r.cli11_ok) << "the case itself is wrong";
    EXPECT_FALSE(r.flat);
    EXPECT_EQ(r.flat_read, fields(base_config()));
  }
  // A key given twice is yaml-cpp's to read (parse_flat_yaml declines it): so is the config.
  TwoReads twice = read_both("log-level: info\nlog-level: debug\n");
  EXPECT_FALSE(twice.flat);
  EXPECT_EQ(twice.flat_read, fields(base_config()));
}

TEST(FlatConfigRead, RandomConfigsReadAlikeOrGoToCli11) {
  // Every key (docs/runtime.md's list), unknown and misspelt ones; values right and wrong for each.
  const std::vector<std::string> keys = {
      "host-root", "runtime-path", "hook-path",   "mount-list-dir",
      "log-file",  "log-level",    "injection",   "accept-env-when-unprivileged",
      "backend",   "dcmi-library", "dcmi-helper", "host_root",
      "help",      "Backend",      "log-levels",  "x"};
  const std::vector<std::string> values = {
      "",      "/",     "/a/b",  "/a b/c", "rel",      "./x",  "runc",     "/bin/true", "info",
      "debug", "spec",  "hook",  "auto",   "emulator", "dcmi", "cuda",     "true",      "false",
      "True",  "FALSE", "yes",   "1",      "1.5",      "~",    "null",     "'/q'",      "\"spec\"",
      "[/a]",  "{}",    "/a #c", "/a#b",   "/a,b",     "-x",   "/a/b.c-d", "/~x+y",     "é"};
  const std::vector<std::string> paths = {"/", "/a/b", "/a b/c", "/a/b.c-d", "/~x+y"};
  const std::map<std::string, std::vector<std::string>> kGood = {
      {"host-root", paths},
      {"runtime-path", {"runc", "/bin/true", "a b"}},
      {"hook-path", paths},
      {"mount-list-dir", paths},
      {"log-file", {"", "/l/x.log"}},
      {"log-level", {"info", "debug", "any thing"}},
      {"injection", {"spec", "hook"}},
      {"accept-env-when-unprivileged", {"true", "false", "True", "FALSE"}},
      {"backend", {"auto", "emulator", "dcmi"}},
      {"dcmi-library", paths},
      {"dcmi-helper", paths}};
  const std::vector<std::string> seps = {": ", ": ", ": ", ":", ":  ", " : ", ":\t"};
  const std::vector<std::string> extra = {"# comment\n", "\n", "  nested: 1\n", "---\n", "- a\n"};
  std::mt19937 rng(24 + ::testing::UnitTest::GetInstance()->random_seed());
  auto pick = [&](const std::vector<std::string>& v) { return v[rng() % v.size()]; };
  int taken = 0;
  int refused = 0;
  int other_forms = 0;  // read by CLI11's reader only
  for (int i = 0; i < 4000; ++i) {
    std::string text;
    int lines = 1 + static_cast<int>(rng() % 4);
    for (int l = 0; l < lines; ++l) {
      if (rng() % 8 == 0) {
        text += pick(extra);
        continue;
      }
      // One pick per statement (the operands of + are evaluated in an unspecified order).
      const std::string key = pick(keys);
      text += key;
      text += pick(seps);
      // Half the time a value that is right for the key, so that whole files of right keys come up.
      auto good = kGood.find(key);
      text += good != kGood.end() && rng() % 2 == 0 ? pick(good->second) : pick(values);
      text += "\n";
    }
    TwoReads r = expect_same_reading(text);
    taken += r.flat ? 1 : 0;
    refused += r.cli11_ok ? 0 : 1;
    other_forms += !r.flat && r.cli11_ok ? 1 : 0;
    if (HasFailure()) return;
  }
  std::printf("random configs: %d read flat, %d refused, %d read by CLI11 only\n", taken, refused,
              other_forms);
  // Each way often enough that the comparison means something. (The seed changes from run to run: over
  // 120 seeds the flat reader took 299-388 texts, median 345, so the bound is well below that; 300 was not.)
  EXPECT_GT(taken, 200);
  EXPECT_GT(refused, 300);
  EXPECT_GT(other_forms, 50);
}

// ---- the spec fast path ----

// What the full path decides for a spec: true when it finds no request (and no error).
bool full_path_finds_nothing(const std::string& text) {
  auto spec = parse_spec(text);
  if (!spec) return false;
  auto env = spec_env(*spec);
  if (!env) return false;
  for (bool accept : {true, false}) {
    auto trusted = trusted_request_env(*spec, *env, accept);
    if (!trusted || requests_devices(trusted->env) || !trusted->note.empty()) return false;
  }
  return true;
}

// A `runc spec` as runc 1.1 writes it (the bundles of the runc tests start from it), env extended per case.
std::string runc_spec(const std::string& env_entries, const std::string& extra_top = "") {
  return R"({"ociVersion":"1.0.2-dev","process":{"terminal":false,"user":{"uid":0,"gid":0},"args":["sh"],)"
         R"("env":[)" +
         env_entries +
         R"(],"cwd":"/","capabilities":{"bounding":["CAP_AUDIT_WRITE","CAP_KILL","CAP_NET_BIND_SERVICE"]},)"
         R"("rlimits":[{"type":"RLIMIT_NOFILE","hard":1024,"soft":1024}],"noNewPrivileges":true},)"
         R"("root":{"path":"rootfs","readonly":true},"hostname":"runc",)"
         R"("mounts":[{"destination":"/proc","type":"proc","source":"proc"},)"
         R"({"destination":"/dev","type":"tmpfs","source":"tmpfs","options":["nosuid","strictatime","mode=755"]}],)"
         R"("linux":{"resources":{"devices":[{"allow":false,"access":"rwm"}]},)"
         R"("namespaces":[{"type":"pid"},{"type":"mount"}],"maskedPaths":["/proc/acpi"]})" +
         extra_top + "}";
}

const std::string kPath = R"("PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")";

TEST(SpecFastPath, TakesOrdinarySpecsThatAskForNothing) {
  // The Docker spec of the golden tests, its request renamed away (and as it is, below: it asks).
  std::string docker_spec = read(std::string(ASCEND_FIXTURES) + "/runtime-hook/spec-edit/docker.before.json");
  const std::string request = "ASCEND_VISIBLE_DEVICES=0,2";
  ASSERT_NE(docker_spec.find(request), std::string::npos);
  EXPECT_FALSE(spec_requests_nothing(docker_spec));
  docker_spec.replace(docker_spec.find(request), request.size(), "NO_REQUEST=0,2");
  const std::string specs[] = {
      runc_spec(kPath),
      runc_spec(kPath + R"(,"TERM=xterm","HOME=/root")"),
      runc_spec(""),                     // an empty env
      R"({"ociVersion":"1.0.2"})",       // no process at all
      R"({"process":{"args":["sh"]}})",  // no env
      R"({"process":{"env":null},"mounts":null,"linux":null,"hooks":null,"root":null})",
      // The variable anywhere but process.env asks for nothing: a hook's env, annotations, a nested
      // "process" inside annotations, an args entry.
      runc_spec(kPath, R"(,"hooks":{"prestart":[{"path":"/h","env":["ASCEND_VISIBLE_DEVICES=0"]}]})"),
      runc_spec(kPath, R"(,"annotations":{"process":{"env":["ASCEND_VISIBLE_DEVICES=0"]}})"),
      R"({"process":{"args":["ASCEND_VISIBLE_DEVICES=0"],"env":["A=1"]}})",
      // A similar name is another variable.
      runc_spec(kPath + R"(,"XASCEND_VISIBLE_DEVICES=0","ASCEND_RUNTIME_OPTIONS=NODRV")"),
      // Escapes, UTF-8 and numbers of every form where nothing is checked.
      runc_spec(
          kPath + R"(,"URL=http://x/?a=1\u0026b=2","Q=\"quoted\" \\ \/ \b\f\n\r\t","E=\ud83d\ude00é")",
          R"(,"annotations":{"n":[0,-0,1.5,-2e10,3E+2,4e-1,12345678901234567890,1.25e-99],"t":true,"f":false})"),
      std::string(R"(  {"process" : { "env" : [ "A=1" ] } }  )") + "\n",
      docker_spec,
  };
  for (const auto& text : specs) {
    SCOPED_TRACE(text.substr(0, 120));
    EXPECT_TRUE(full_path_finds_nothing(text)) << "the case itself is wrong";
    EXPECT_TRUE(spec_requests_nothing(text));
  }
}

TEST(SpecFastPath, LeavesEveryRequestErrorAndOddityToTheFullPath) {
  const std::string specs[] = {
      // The request, wherever it sits in the list and the document.
      runc_spec(R"("ASCEND_VISIBLE_DEVICES=0",)" + kPath),
      runc_spec(kPath + R"(,"ASCEND_VISIBLE_DEVICES=0-7")"),
      runc_spec(R"("ASCEND_VISIBLE_DEVICES=0")"),
      R"({"linux":{},"process":{"cwd":"/","env":["A=1","ASCEND_VISIBLE_DEVICES=all"],"args":["sh"]}})",
      runc_spec(kPath + R"(,"ASCEND_VISIBLE_DEVICES")"),         // the key alone
      runc_spec(kPath + R"(,"ASCEND_VISIBLE_DEVICES=")"),        // empty: the full path decides
      runc_spec(kPath + R"(,"ASCEND_VISIBLE_DEVICES=void")"),    // likewise
      runc_spec(kPath + R"(,"ASCEND\u005fVISIBLE_DEVICES=0")"),  // escaped
      runc_spec(kPath + R"(,"\u0041SCEND_VISIBLE_DEVICES=0")"),
      // The same key twice: the last one is the document's.
      R"({"process":{"env":["A=1"]},"process":{"env":["ASCEND_VISIBLE_DEVICES=0"]}})",
      R"({"process":{"env":["ASCEND_VISIBLE_DEVICES=0"],"env":["A=1"]}})",
      R"({"pro\u0063ess":{"env":["ASCEND_VISIBLE_DEVICES=0"]}})",
      // The orchestrator's device markers, escaped or not.
      runc_spec(kPath,
                R"(,"mounts":[{"destination":"/var/run/ascend-container-devices/0","source":"/dev/null"}])"),
      runc_spec(
          kPath,
          R"(,"mounts":[{"destination":"\/var\/run\/ascend-container-devices\/0","source":"/dev/null"}])"),
      runc_spec(kPath,
                R"(,"mounts":[{"source":"/dev/null","destination":"/var/run/ascend-container-devices/x"}])"),
      // What parse_spec refuses.
      "",
      "null",
      "[]",
      "\"x\"",
      "{",
      "{}x",
      R"({"a":1,})",
      R"({"a":01})",
      R"({"a":1.})",
      R"({"a":.5})",
      R"({"a":-})",
      R"({"a":1e400})",
      R"({"a":-1e309})",
      R"({"a":1e+0400})",
      R"({"a":tru})",
      R"({"a":"\x"})",
      R"({"a":"\u12"})",
      R"({"a":"\ud800"})",
      R"({"a":"\udc00"})",
      R"({"a":"\ud800\u0041"})",
      "{\"a\":\"\x01\"}",
      "{\"a\":\"\xC3\"}",
      "{\"a\":\"\xED\xA0\x80\"}",
      "{\"a\":\"\xC0\xAF\"}",
      "{\"a\":\"\xF4\x90\x80\x80\"}",
      "\xEF\xBB\xBF{}",
      "{'a':1}",
      R"({"process":{"env":"A=1"}})",
      R"({"process":{"env":[1]}})",
      R"({"process":{"env":[null]}})",
      R"({"process":[]})",
      R"({"process":{"capabilities":{"bounding":[1]}}})",
      R"({"root":{"path":7}})",
      R"({"mounts":{}})",
      R"({"mounts":[1]})",
      R"({"mounts":[null]})",
      R"({"mounts":[{"destination":1}]})",
      R"({"mounts":[{"options":"ro"}]})",
      R"({"linux":{"devices":{}}})",
      R"({"linux":{"devices":[{"major":"1"}]}})",
      R"({"linux":{"devices":[{"minor":1.0}]}})",
      R"({"linux":{"devices":[{"minor":1e2}]}})",
      R"({"linux":{"devices":[{"minor":99999999999999999999999}]}})",
      R"({"linux":{"resources":{"devices":[{"access":5}]}}})",
      R"({"hooks":{"prestart":{}}})",
      R"({"hooks":{"prestart":[{"path":5}]}})",
      R"({"hooks":{"poststop":[{"path":"/x","args":"a"}]}})",
      R"({"hooks":{"x":[{"timeout":"5"}]}})",
      R"({"hooks":[]})",
      R"({"a":)" + std::string(70, '[') + std::string(70, ']') + "}",
  };
  for (const auto& text : specs) {
    SCOPED_TRACE(::testing::PrintToString(text.substr(0, 160)));
    EXPECT_FALSE(spec_requests_nothing(text));
  }
  // The nesting limit is parse_spec's: 64 levels pass.
  std::string deep = R"({"a":)" + std::string(63, '[') + std::string(63, ']') + "}";
  EXPECT_TRUE(full_path_finds_nothing(deep));
  EXPECT_TRUE(spec_requests_nothing(deep));
  std::string deeper = R"({"a":)" + std::string(64, '[') + std::string(64, ']') + "}";
  EXPECT_FALSE(full_path_finds_nothing(deeper));
  EXPECT_FALSE(spec_requests_nothing(deeper));
}

// Random documents from a grammar of spec-like pieces, then random byte edits of real specs: whenever the
// fast path says "nothing", the full path must say so too; and it must say "nothing" often.
TEST(SpecFastPath, RandomSpecsNeverDisagreeWithTheFullPath) {
  std::mt19937 rng(2025 + ::testing::UnitTest::GetInstance()->random_seed());
  auto pick = [&](const std::vector<std::string>& v) { return v[rng() % v.size()]; };
  const std::vector<std::string> strings = {R"("A=1")",
                                            R"("ASCEND_VISIBLE_DEVICES=0")",
                                            R"("ASCEND_VISIBLE_DEVICES")",
                                            R"("ASCEND\u005fVISIBLE_DEVICES=1")",
                                            R"("x\"y")",
                                            R"("\ud83d\ude00")",
                                            R"("é")",
                                            R"("/var/run/ascend-container-devices/0")",
                                            R"("/dev/null")",
                                            R"("bind")",
                                            R"("\/var\/run\/ascend-container-devices\/3")",
                                            R"("ASCEND_RUNTIME_OPTIONS=NODRV")",
                                            R"("")"};
  const std::vector<std::string> scalars = {"1", "-2", "1.5", "1e400", "true", "false", "null", "0"};
  std::function<std::string(int)> any = [&](int depth) -> std::string {
    int k = static_cast<int>(rng() % (depth > 3 ? 2 : 5));
    if (k == 0) return pick(strings);
    if (k == 1) return pick(scalars);
    if (k == 2) {
      std::string a = "[";
      for (int i = 0, n = static_cast<int>(rng() % 4); i < n; ++i) a += (i ? "," : "") + any(depth + 1);
      return a + "]";
    }
    const std::vector<std::string> keys = {
        "\"process\"", "\"env\"",   "\"mounts\"",       "\"destination\"", "\"source\"",
        "\"hooks\"",   "\"linux\"", "\"devices\"",      "\"major\"",       "\"path\"",
        "\"root\"",    "\"args\"",  "\"capabilities\"", "\"bounding\"",    "\"x\""};
    std::string o = "{";
    for (int i = 0, n = static_cast<int>(rng() % 4); i < n; ++i)
      o += (i ? "," : "") + pick(keys) + ":" + any(depth + 1);
    return o + "}";
  };
  int nothing = 0;
  for (int i = 0; i < 20000; ++i) {
    std::string text;
    if (i % 2 == 0) {
      text = any(0);
    } else {
      // A spec with a random env and mounts.
      std::string env;
      for (int e = 0, n = static_cast<int>(rng() % 4); e < n; ++e) env += (e ? "," : "") + pick(strings);
      text = runc_spec(env, rng() % 2 ? ""
                                      : R"(,"mounts":[{"destination":)" + pick(strings) + R"(,"source":)" +
                                            pick(strings) + "}]");
    }
    bool fast = spec_requests_nothing(text);
    nothing += fast ? 1 : 0;
    if (fast) {
      ASSERT_TRUE(full_path_finds_nothing(text)) << text;
    }
  }
  EXPECT_GT(nothing, 1000);
  // Byte edits (delete, insert, flip) of a real spec that asks for nothing.
  const std::string base = runc_spec(kPath + R"(,"HOME=/root","URL=a\u0026b")");
  const std::string alphabet =
      "{}[]\":,\\u0123456789abcdefABCDEF-+.eE \n\tASCEND_VISIBLE_DEVICES=/\x01\xC3\xA9\xFF";
  int edited_nothing = 0;
  for (int i = 0; i < 20000; ++i) {
    std::string text = base;
    for (int e = 0, n = 1 + static_cast<int>(rng() % 3); e < n; ++e) {
      std::size_t at = rng() % text.size();
      switch (rng() % 3) {
        case 0:
          text.erase(at, 1 + rng() % 3);
          break;
        case 1:
          text.insert(at, 1, alphabet[rng() % alphabet.size()]);
          break;
        default:
          text[at] = alphabet[rng() % alphabet.size()];
          break;
      }
      if (text.empty()) text = "{";
    }
    bool fast = spec_requests_nothing(text);
    edited_nothing += fast ? 1 : 0;
    if (fast) {
      ASSERT_TRUE(full_path_finds_nothing(text)) << text;
    }
  }
  EXPECT_GT(edited_nothing, 500);
}

}  // namespace
}  // namespace ascend::hook
