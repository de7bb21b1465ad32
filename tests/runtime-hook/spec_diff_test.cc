// config.json read and edited with rapidjson (oci.h, trust.h, spec_edit.h) held to the nlohmann
// implementation it replaced (spec_reference.h, issue 25): for every text, parse_spec accepts or refuses
// alike with the same message; then process.env, root.path, the marker ids, privilege and the trusted request
// agree, and each edit (the hook's, the spec mounts', a dynamic vNPU's) writes the same document (same
// values, number types and key order) or fails with the same message, with no key written twice. The
// texts: the golden fixtures and a `runc spec`, random edits of them at the fields the shim reads (values of
// every type, marker mounts, CAP_SYS_ADMIN, keys given twice, bytes changed), random documents (seeded, the
// seed printed; --gtest_random_seed=N draws others), and hostile texts (json_texts.h).
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "ascend/common/json_depth.h"
#include "ascend/hook/oci.h"
#include "ascend/hook/plan.h"
#include "ascend/hook/request.h"
#include "ascend/hook/spec_edit.h"
#include "ascend/hook/trust.h"
#include "ascend/npu/profiles.h"
#include "json_texts.h"
#include "spec_reference.h"

namespace ascend::hook {
namespace {

using ascend::testing::JsonTexts;
using nlohmann::ordered_json;

std::string read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string shown(const std::string& text) {
  std::string out;
  for (unsigned char c : text.substr(0, 600)) {
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out += static_cast<char>(c);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    }
  }
  return text.size() > 600 ? out + "..." : out;
}

// Whether a JSON text gives a key twice in one object (nlohmann's SAX events: parsing would hide it).
class KeyRepeats : public nlohmann::json_sax<ordered_json> {
 public:
  bool null() override { return true; }
  bool boolean(bool /*val*/) override { return true; }
  bool number_integer(number_integer_t /*val*/) override { return true; }
  bool number_unsigned(number_unsigned_t /*val*/) override { return true; }
  bool number_float(number_float_t /*val*/, const string_t& /*s*/) override { return true; }
  bool string(string_t& /*val*/) override { return true; }
  bool binary(binary_t& /*val*/) override { return true; }
  bool start_object(std::size_t /*elements*/) override {
    keys_.emplace_back();
    return true;
  }
  bool key(string_t& val) override {
    if (!keys_.back().insert(val).second) repeated = true;
    return true;
  }
  bool end_object() override {
    keys_.pop_back();
    return true;
  }
  bool start_array(std::size_t /*elements*/) override { return true; }
  bool end_array() override { return true; }
  bool parse_error(std::size_t /*position*/, const std::string& /*last_token*/,
                   const nlohmann::detail::exception& /*ex*/) override {
    return false;
  }
  bool repeated = false;

 private:
  std::vector<std::set<std::string>> keys_;
};

bool repeats_a_key(const std::string& text) {
  KeyRepeats sax;
  ordered_json::sax_parse(text, &sax);
  return sax.repeated;
}

npu::DeviceSnapshot host() {
  npu::HostState h = npu::builtin_profile("atlas800t-a2").value();
  h.majors = {234, 235, 236, 237, 238};
  h.vnpus.push_back({116, 1, "vir05_1c_16g", 0, {}, 0});
  return npu::to_snapshot(h);
}

HookCommand hook(const std::string& stage) {
  HookCommand h;
  h.path = "/usr/local/bin/ascend-docker-hook";
  h.args = {"ascend-docker-hook", "--config", "/etc/ascend-docker-runtime.d/config.yaml", stage};
  return h;
}

// The shim's three edits: the driver files by the prestart hook, as spec mounts, and a dynamic vNPU's.
std::vector<SpecEdit> edits() {
  const npu::DeviceSnapshot h = host();
  Request r;
  r.ids = {0, 2};
  MountList base{"base", {"/usr/local/Ascend/driver/lib64", "/usr/local/bin/npu-smi"}};
  InjectionPlan plan = make_plan(r, h, {base});
  std::vector<SpecEdit> out;
  out.push_back(make_spec_edit(plan, hook("prestart")));
  std::vector<BindMount> mounts;
  for (const auto& m : plan.mounts) mounts.push_back({"/host" + m.path, m.path});
  out.push_back(make_spec_edit(plan, mounts));
  Request v;
  v.ids = {116};
  v.is_virtual = true;
  SpecEdit vnpu = make_spec_edit(make_plan(v, h, {base}), mounts);
  HookCommand post = hook("poststop");
  post.args.insert(post.args.end(), {"--destroy-vnpu", "116"});
  post.timeout = 30;
  vnpu.poststop.push_back(post);
  vnpu.drop_env = {"ASCEND_VNPU_SPECS"};
  vnpu.add_env = {"ASCEND_VISIBLE_DEVICES=116", "ASCEND_RUNTIME_OPTIONS=VIRTUAL"};
  vnpu.retarget_mounts = {{std::string(kMarkerDir) + "/1", std::string(kMarkerDir) + "/116"}};
  out.push_back(vnpu);
  return out;
}

template <class T>
std::string outcome(const Result<T>& r) {
  if (!r) return "error: " + r.error().message();
  if constexpr (std::is_same_v<T, std::string>) {
    return *r;
  } else if constexpr (std::is_same_v<T, TrustedRequest>) {
    std::string s = "note: " + r->note + "; env:";
    for (const auto& e : r->env) s += " [" + e + "]";
    return s;
  } else {
    std::string s;
    for (const auto& e : *r) s += "[" + e + "] ";
    return s;
  }
}

// An edited text, as nlohmann reads it (its dump shows number types), or the error.
std::string edited(const Result<std::string>& r) {
  if (!r) return "error: " + r.error().message();
  auto j = ordered_json::parse(*r, nullptr, false);
  if (j.is_discarded()) return "(not JSON: " + *r + ")";
  return j.dump();
}

// Everything the shim and the hook read from `text`, and every edit, the same both ways. Returns whether
// parse_spec took the text.
bool expect_same(const std::string& text, const std::vector<SpecEdit>& all_edits) {
  SCOPED_TRACE(shown(text));
  auto ours = parse_spec(text);
  auto theirs = reference::parse_spec(text);
  EXPECT_EQ(ours.ok(), theirs.ok()) << (ours.ok() ? theirs.error().message() : ours.error().message());
  if (!ours.ok() || !theirs.ok()) {
    if (!ours.ok() && !theirs.ok()) {
      EXPECT_EQ(ours.error().message(), theirs.error().message());
    }
    return false;
  }
  EXPECT_EQ(outcome(spec_env(*ours)), outcome(reference::spec_env(*theirs)));
  EXPECT_EQ(outcome(spec_rootfs(*ours, "/b")), outcome(reference::spec_rootfs(*theirs, "/b")));
  EXPECT_EQ(outcome(marker_ids(*ours)), outcome(reference::marker_ids(*theirs)));
  EXPECT_EQ(is_privileged(*ours), reference::is_privileged(*theirs));
  auto env = spec_env(*ours);
  if (env) {
    for (bool accept : {true, false}) {
      EXPECT_EQ(outcome(trusted_request_env(*ours, *env, accept)),
                outcome(reference::trusted_request_env(*theirs, *env, accept)));
    }
  }
  for (const auto& edit : all_edits) {
    auto after = apply_spec_edit(text, edit);
    EXPECT_EQ(edited(after), edited(reference::apply_spec_edit(text, edit)));
    if (after) {
      EXPECT_FALSE(repeats_a_key(*after)) << *after;
    }
  }
  return true;
}

std::vector<std::string> fixtures() {
  const std::string dir = std::string(ASCEND_FIXTURES) + "/runtime-hook/spec-edit/";
  std::vector<std::string> out;
  for (const char* name : {"docker.before.json", "runc.before.json", "docker.after.json",
                           "docker-mounts.after.json", "runc-vnpu.after.json"}) {
    out.push_back(read(dir + name));
    EXPECT_FALSE(out.back().empty()) << name;
  }
  return out;
}

// A field the shim reads, set to `value` (or dropped when it is null and `drop`).
void set_at(ordered_json& spec, JsonTexts& gen, const ordered_json& value) {
  static const std::vector<std::vector<std::string>> kPaths = {
      {"process"},
      {"process", "env"},
      {"process", "capabilities"},
      {"process", "capabilities", "bounding"},
      {"root"},
      {"root", "path"},
      {"mounts"},
      {"linux"},
      {"linux", "devices"},
      {"linux", "resources"},
      {"linux", "resources", "devices"},
      {"hooks"},
      {"hooks", "prestart"},
      {"hooks", "poststop"},
      {"annotations"},
  };
  const auto& path = kPaths[static_cast<std::size_t>(gen.pick(0, static_cast<int>(kPaths.size()) - 1))];
  ordered_json* at = &spec;
  for (std::size_t i = 0; i + 1 < path.size(); ++i) {
    if (!at->is_object()) return;
    at = &(*at)[path[i]];
  }
  if (at->is_null()) *at = ordered_json::object();
  if (at->is_object()) (*at)[path.back()] = value;
}

// A value the shim may meet at one of those fields: a random document, or an entry of its own kind.
ordered_json some_value(JsonTexts& gen) {
  static const char* const kValues[] = {
      R"(["PATH=/bin","ASCEND_VISIBLE_DEVICES=0-7","ASCEND_VISIBLE_DEVICES=1"])",
      R"(["CAP_SYS_ADMIN"])",
      R"(["CAP_KILL",7])",
      R"([{"destination":"/var/run/ascend-container-devices/1","type":"bind","source":"/dev/null"}])",
      R"([{"destination":"/var/run/ascend-container-devices/1/","source":"/dev/null"},{"destination":"/var/run/ascend-container-devices/2","source":"/dev/null","options":["bind","ro","nosuid","nodev"]}])",
      R"([{"destination":"/var/run/ascend-container-devices/x","source":"/dev/null"}])",
      R"([{"destination":"/usr/local/bin/npu-smi","type":"bind","source":"/host/usr/local/bin/npu-smi","options":["bind","ro","nosuid","nodev"]}])",
      R"([{"path":"/dev/davinci0","type":"c","major":1,"minor":1},{"path":"/dev/fuse","type":"c","major":10,"minor":229}])",
      R"([{"path":"/dev/davinci0","major":234.0,"minor":0}])",
      R"([{"path":"/dev/davinci0","major":"234"}])",
      R"([{"allow":false,"access":"rwm"},{"allow":true,"type":"c","major":234,"minor":0,"access":"rwm"}])",
      R"([{"allow":true,"type":"c","major":234.0,"minor":0,"access":"rwm"}])",
      R"([{"access":"rwm","allow":true,"type":"c","major":234,"minor":0}])",
      R"({"prestart":[{"path":"/usr/local/bin/ascend-docker-hook","args":["ascend-docker-hook","--config","/etc/ascend-docker-runtime.d/config.yaml","prestart"]}]})",
      R"([{"path":"/h","args":["a"],"timeout":18446744073709551615}])",
      R"([{"path":"/h","timeout":1.5}])",
      R"({"path":"rootfs"})",
      R"({"path":"/abs"})",
      R"({"path":""})",
      R"({"n":[9223372036854775807,-9223372036854775808,18446744073709551615,1e300,-0.0,0.1]})",
      "null",
      "[]",
      "{}",
      "7",
      "\"x\"",
  };
  if (gen.pick(0, 5) == 0) {
    auto v = ordered_json::parse(gen.document(), nullptr, false);
    return v.is_discarded() ? ordered_json() : v;
  }
  return ordered_json::parse(kValues[gen.pick(0, static_cast<int>(std::size(kValues)) - 1)]);
}

// A key given twice, written into the text: `"key":value,` after an object's opening brace or before its end.
std::string with_a_repeated_key(JsonTexts& gen, std::string text) {
  static const char* const kMembers[] = {
      R"("env":["ASCEND_VISIBLE_DEVICES=0"])",
      R"("env":["A=1"])",
      R"("process":{"env":["ASCEND_VISIBLE_DEVICES=3"]})",
      R"("mounts":[{"destination":"/var/run/ascend-container-devices/5","source":"/dev/null"}])",
      R"("mounts":[])",
      R"("path":"other")",
      R"("devices":[{"path":"/dev/davinci0","type":"c","major":1,"minor":1}])",
      R"("bounding":["CAP_SYS_ADMIN"])",
      R"("prestart":7)",
      R"("destination":"/var/run/ascend-container-devices/1")",
  };
  std::vector<std::size_t> braces;
  for (std::size_t at = text.find('{'); at != std::string::npos; at = text.find('{', at + 1))
    braces.push_back(at);
  if (braces.empty()) return text;
  const std::size_t at = braces[static_cast<std::size_t>(gen.pick(0, static_cast<int>(braces.size()) - 1))];
  const std::string member = kMembers[gen.pick(0, static_cast<int>(std::size(kMembers)) - 1)];
  if (gen.pick(0, 1) == 0) {
    text.insert(at + 1, member + ",");
  } else {  // last: just before the matching brace of a flat object, else after the opening one
    const std::size_t close = text.find('}', at);
    if (close != std::string::npos && text.find('{', at + 1) > close && close > at + 1) {
      text.insert(close, "," + member);
    } else {
      text.insert(at + 1, member + ",");
    }
  }
  return text;
}

std::uint32_t seed_for(std::uint32_t base) {
  const std::uint32_t seed =
      base + static_cast<std::uint32_t>(::testing::UnitTest::GetInstance()->random_seed());
  std::printf("seed %u (base %u + --gtest_random_seed)\n", seed, base);
  return seed;
}

TEST(SpecDiff, TheFixturesReadAndEditAlike) {
  const auto all = edits();
  for (const auto& text : fixtures()) EXPECT_TRUE(expect_same(text, all));
}

TEST(SpecDiff, HostileTextsReadAndEditAlike) {
  const auto all = edits();
  for (const auto& text : ascend::testing::hostile_json_texts()) expect_same(text, all);
  const std::string runc = fixtures()[1];
  for (
      const std::string& text : std::vector<std::string>{
          R"({"process":{"env":["A=1"]},"process":{"env":["ASCEND_VISIBLE_DEVICES=0"]}})",
          R"({"process":{"env":["ASCEND_VISIBLE_DEVICES=0"]},"process":{"env":["A=1"]}})",
          R"({"process":{"env":["ASCEND_VISIBLE_DEVICES=0"],"env":7}})",
          R"({"process":{"env":7,"env":["ASCEND_VISIBLE_DEVICES=0"]}})",
          R"({"mounts":[{"destination":"/var/run/ascend-container-devices/1","source":"/tmp","source":"/dev/null"}]})",
          R"({"linux":{"devices":[],"devices":{}}})",
          R"({"hooks":{"prestart":[],"prestart":[{"path":7}]}})",
          R"({"root":{"path":"a"},"root":{"path":"/b"}})",
          R"({"a":9223372036854775807,"b":-9223372036854775808,"c":18446744073709551615,"d":18446744073709551616,)"
          R"("e":-1e-400,"f":1e300,"g":-0,"h":-0.0,"i":0e400,"process":{"env":["ASCEND_VISIBLE_DEVICES=0"]}})",
          R"({"process":{"env":["ASCEND_VISIBLE_DEVICES=0\u0000x"]},"annotations":{"k":"\u0000\u001f\"\\"}})",
          R"({"process":{"env":["ASCEND_VISIBLE_DEVICES=0"]},"x":)" + std::string(62, '[') +
              std::string(62, ']') + "}",
          R"({"process":{"env":["ASCEND_VISIBLE_DEVICES=0"]},"x":)" + std::string(64, '[') +
              std::string(64, ']') + "}",
          runc + std::string(1, '\0') + "garbage",
          "\xef\xbb\xbf" + runc,
      }) {
    expect_same(text, all);
  }
}

TEST(SpecDiff, RandomEditsOfSpecsReadAndEditAlike) {
  JsonTexts gen(seed_for(25));
  const auto all = edits();
  const std::vector<std::string> bases = fixtures();
  int taken = 0;
  for (int i = 0; i < 2500; ++i) {
    const std::string& base =
        bases[static_cast<std::size_t>(gen.pick(0, static_cast<int>(bases.size()) - 1))];
    ordered_json spec = ordered_json::parse(base);
    for (int n = gen.pick(1, 2); n > 0; --n) set_at(spec, gen, some_value(gen));
    std::string text = spec.dump(gen.pick(-1, 1));
    switch (gen.pick(0, 5)) {
      case 0:
        text = gen.mutate(text);
        break;
      case 1:
      case 2:
        text = with_a_repeated_key(gen, text);
        break;
      default:
        break;
    }
    taken += expect_same(text, all) ? 1 : 0;
    if (::testing::Test::HasFailure()) return;
  }
  std::printf("parse_spec took %d of 2500 edited specs\n", taken);
  EXPECT_GT(taken, 300);  // 556-601 over three seeds: most edits put a value of another type somewhere
  EXPECT_LT(taken, 2300);
}

TEST(SpecDiff, RandomDocumentsReadAndEditAlike) {
  JsonTexts gen(seed_for(2025));
  const auto all = edits();
  for (int i = 0; i < 3000; ++i) {
    std::string text = gen.object_document();
    if (gen.pick(0, 2) == 0) text = gen.mutate(text);
    if (json_nests_deeper_than(text, 1000)) continue;
    expect_same(text, all);
    if (::testing::Test::HasFailure()) return;
  }
}

}  // namespace
}  // namespace ascend::hook
