// The state file read two ways, held to one reading (issue 25): parse_state reads the text with rapidjson
// (json_text.h), state_from_json reads nlohmann's document of it (as the file was read before, and as a
// custom profile still is). For every text both accept or refuse alike, with the same message, and read the
// same host. Under them, json_text.h against nlohmann::json::parse itself: the same texts accepted and read
// to the same values (the types of numbers included), and json_equal against nlohmann's ==. The texts: the
// built-in profiles' state files and random edits of them (fields of other types, unknown and repeated keys,
// bytes changed), random documents and their byte mutations from a seeded generator (the seed is printed;
// --gtest_random_seed=N draws others), and a fixed list of hostile texts.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "ascend/common/json_depth.h"
#include "ascend/common/json_text.h"
#include "ascend/npu/profiles.h"
#include "ascend/npu/state.h"
#include "json_texts.h"

namespace ascend::npu {
namespace {

using ascend::testing::JsonTexts;
using nlohmann::ordered_json;

std::uint32_t seed_for(std::uint32_t base) {
  const std::uint32_t seed =
      base + static_cast<std::uint32_t>(::testing::UnitTest::GetInstance()->random_seed());
  std::printf("seed %u (base %u + --gtest_random_seed)\n", seed, base);
  return seed;
}

// A text as C++ would spell it, for a failure message.
std::string shown(const std::string& text) {
  std::string out;
  for (unsigned char c : text.substr(0, 400)) {
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out += static_cast<char>(c);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    }
  }
  return text.size() > 400 ? out + "..." : out;
}

// nlohmann's reading of a text, as its compact dump (which shows a number's type: 1 against 1.0), or
// nullopt when it refuses the text.
std::optional<std::string> nlohmann_reading(const std::string& text) {
  auto j = ordered_json::parse(text, nullptr, false);
  if (j.is_discarded()) return std::nullopt;
  return j.dump();
}

// Whether an object of `v` holds a key twice (which writing it out and reading it back would hide).
bool repeats_a_key(const JsonValue& v) {
  if (v.IsArray())
    return std::any_of(v.Begin(), v.End(), [](const JsonValue& e) { return repeats_a_key(e); });
  if (!v.IsObject()) return false;
  std::set<std::string> keys;
  for (const auto& m : v.GetObject()) {
    if (!keys.emplace(m.name.GetString(), m.name.GetStringLength()).second || repeats_a_key(m.value))
      return true;
  }
  return false;
}

// json_text.h's reading of it: written back with rapidjson, read by nlohmann, dumped.
std::optional<std::string> rapidjson_reading(const std::string& text) {
  JsonDocument doc;
  if (!doc.parse(text)) return std::nullopt;
  if (repeats_a_key(doc.root())) return "(a key kept twice: " + write_json(doc.root()) + ")";
  auto j = ordered_json::parse(write_json(doc.root()), nullptr, false);
  if (j.is_discarded()) return "(rapidjson wrote a text nlohmann refuses: " + write_json(doc.root()) + ")";
  return j.dump();
}

void expect_same_reading(const std::string& text) {
  if (json_nests_deeper_than(text, 1000)) {  // writing either back would recurse that deep
    JsonDocument doc;
    EXPECT_EQ(doc.parse(text), !ordered_json::parse(text, nullptr, false).is_discarded()) << shown(text);
    return;
  }
  EXPECT_EQ(rapidjson_reading(text), nlohmann_reading(text)) << shown(text);
}

void expect_same_state(const std::string& text) {
  auto fast = parse_state(text);
  auto j = nlohmann::json::parse(text, nullptr, false);
  // The state file nests four deep; one nesting more than 64 is refused before it is read (its values could
  // be written back as text, which recurses as deep as they nest), whatever nlohmann makes of it.
  if (json_nests_deeper_than(text, 64)) {
    ASSERT_FALSE(fast.ok()) << shown(text);
    EXPECT_EQ(fast.error().message(), "nests deeper than 64 levels") << shown(text);
    return;
  }
  if (j.is_discarded()) {
    ASSERT_FALSE(fast.ok()) << shown(text);
    EXPECT_EQ(fast.error().message(), "not valid JSON") << shown(text);
    return;
  }
  auto slow = state_from_json(j);
  ASSERT_EQ(fast.ok(), slow.ok()) << (fast.ok() ? slow.error().message() : fast.error().message()) << "\n"
                                  << shown(text);
  if (fast.ok()) {
    EXPECT_EQ(serialize(*fast), serialize(*slow)) << shown(text);
  } else {
    EXPECT_EQ(fast.error().message(), slow.error().message()) << shown(text);
  }
}

// The state files the emulator writes: every built-in profile, one with faults, processes and vNPUs.
std::vector<std::string> state_files() {
  std::vector<std::string> out;
  for (const auto& name : builtin_profile_names()) {
    auto p = builtin_profile(name);
    if (!p.ok()) continue;
    HostState s = *p;
    out.push_back(serialize(s));
    s.chips[0].faults.push_back({0x8C084E00, Health::kCritical});
    s.chips[0].processes.push_back({42, "python3", 1024, "NA"});
    s.vnpus.push_back({100, 0, s.templates[0].name, 0, {}, 0});
    s.vnpus.push_back(
        {101, 0, s.templates[0].name, 1, {"c1", "/run/runc", 4242, 987654321, "pid:[1]", "b"}, 1});
    s.workloads.push_back({0, 50, 10, 2048, 99});
    s.boot_id = "6f1c2a4e";
    out.push_back(serialize(s));
  }
  return out;
}

TEST(JsonTextDiff, HostileTextsReadAsNlohmannReadsThem) {
  for (const auto& text : ascend::testing::hostile_json_texts()) expect_same_reading(text);
}

TEST(JsonTextDiff, RandomAndMutatedDocumentsReadAsNlohmannReadsThem) {
  JsonTexts gen(seed_for(25));
  int accepted = 0;
  for (int i = 0; i < 6000; ++i) {
    std::string text = gen.pick(0, 2) == 0 ? gen.mutate(gen.document()) : gen.document();
    expect_same_reading(text);
    accepted += ordered_json::accept(text) ? 1 : 0;
    if (::testing::Test::HasFailure()) return;
  }
  for (int i = 0; i < 2000; ++i) {
    expect_same_reading("[" + gen.number() + "]");
    if (::testing::Test::HasFailure()) return;
  }
  std::printf("%d of 6000 random documents were valid JSON\n", accepted);
  EXPECT_GT(accepted, 2000);  // both ways often enough to mean something
  EXPECT_LT(accepted, 5500);
}

TEST(JsonTextDiff, EqualityIsNlohmanns) {
  const std::vector<std::string> values = {"0",
                                           "-0",
                                           "0.0",
                                           "-0.0",
                                           "1",
                                           "1.0",
                                           "1e0",
                                           "-1",
                                           "18446744073709551615",
                                           "9223372036854775807",
                                           "9223372036854775808",
                                           "-9223372036854775808",
                                           "1e300",
                                           "true",
                                           "false",
                                           "null",
                                           "\"a\"",
                                           "\"\"",
                                           "\"a\\u0000\"",
                                           "[]",
                                           "[1]",
                                           "[1.0]",
                                           "[1,2]",
                                           "[2,1]",
                                           "{}",
                                           R"({"a":1})",
                                           R"({"a":1.0})",
                                           R"({"a":1,"b":2})",
                                           R"({"b":2,"a":1})",
                                           R"({"a":1,"a":2})",
                                           R"({"a":2})",
                                           R"({"a":[1,{"b":null}]})",
                                           R"({"a":[1,{"b":false}]})"};
  for (const auto& a : values) {
    for (const auto& b : values) {
      JsonDocument x;
      JsonDocument y;
      ASSERT_TRUE(x.parse(a) && y.parse(b)) << a << " " << b;
      EXPECT_EQ(json_equal(x.root(), y.root()), ordered_json::parse(a) == ordered_json::parse(b))
          << a << " == " << b;
    }
  }
}

TEST(StateReaderDiff, TheEmulatorsStateFilesReadAlike) {
  for (const auto& text : state_files()) {
    expect_same_state(text);
    ASSERT_TRUE(parse_state(text).ok());
  }
}

TEST(StateReaderDiff, HostileTextsReadAlike) {
  for (const auto& text : ascend::testing::hostile_json_texts()) {
    expect_same_state(text);
  }
  // Nested 64 deep in a field the strict reader reads as text: read; one level more: refused.
  const std::string base = state_files().front();
  for (const int depth : {63, 64, 65, 100000}) {
    std::string text = base;
    const std::string nested = std::string(static_cast<std::size_t>(depth - 1), '[') +
                               std::string(static_cast<std::size_t>(depth - 1), ']');
    const std::string field = "\"chip_type\": \"Ascend\"";
    ASSERT_NE(text.find(field), std::string::npos);
    text.replace(text.find(field), field.size(), "\"chip_type\": " + nested);
    auto got = parse_state(text);
    if (depth <= 64) {
      EXPECT_FALSE(!got.ok() && got.error().message() == "nests deeper than 64 levels") << depth;
    } else {
      ASSERT_FALSE(got.ok()) << depth;
      EXPECT_EQ(got.error().message(), "nests deeper than 64 levels") << depth;
    }
  }
  // A key given twice: the last value counts, in both.
  for (const char* dup :
       {R"("phy_id":5,)", R"("name":"x",)", R"("name":7,)", R"("temp_c":"hot",)", R"("processes":[],)",
        R"("nmae":1,)", R"("power_na":1,)", R"("faults":[{"code":"0x1"}],)"}) {
    for (std::size_t at = base.find('{'); at != std::string::npos; at = base.find('{', at + 1)) {
      std::string text = base;
      text.insert(at + 1, dup);
      expect_same_state(text);
      std::string after = base;  // and after the object's own
      const std::size_t close = after.find('}', at);
      std::string member = ",";
      member.append(dup, std::strlen(dup) - 1);  // without its own comma
      after.insert(close, member);
      expect_same_state(after);
    }
  }
}

TEST(StateReaderDiff, RandomEditsOfStateFilesReadAlike) {
  JsonTexts gen(seed_for(2025));
  const std::vector<std::string> files = state_files();
  int ok = 0;
  for (int i = 0; i < 3000; ++i) {
    const std::string& base =
        files[static_cast<std::size_t>(gen.pick(0, static_cast<int>(files.size()) - 1))];
    std::string text;
    if (gen.pick(0, 3) == 0) {
      text = gen.mutate(base);
    } else {
      ordered_json j = ordered_json::parse(base);
      // Set or drop a field of the top, a chip, a vNPU or a chip's first process or fault.
      ordered_json* target = &j;
      switch (gen.pick(0, 3)) {
        case 1:
          target =
              &j["chips"][static_cast<std::size_t>(gen.pick(0, static_cast<int>(j["chips"].size()) - 1))];
          break;
        case 2:
          if (!j["vnpus"].empty()) target = &j["vnpus"].back();
          break;
        case 3:
          if (!j["chips"][0]["processes"].empty()) target = &j["chips"][0]["processes"][0];
          break;
        default:
          break;
      }
      std::vector<std::string> keys{"nmae", "owner"};
      for (auto it = target->begin(); it != target->end(); ++it) keys.push_back(it.key());
      const std::string key = keys[static_cast<std::size_t>(gen.pick(0, static_cast<int>(keys.size()) - 1))];
      if (gen.pick(0, 4) == 0) {
        target->erase(key);
      } else {
        auto v = ordered_json::parse(gen.pick(0, 1) == 0 ? gen.number() : gen.document(), nullptr, false);
        if (v.is_discarded()) v = nullptr;
        (*target)[key] = v;
      }
      text = j.dump(gen.pick(-1, 2));
    }
    expect_same_state(text);
    ok += parse_state(text).ok() ? 1 : 0;
    if (::testing::Test::HasFailure()) return;
  }
  std::printf("%d of 3000 edited state files were read\n", ok);
  EXPECT_GT(ok, 300);
  EXPECT_LT(ok, 2700);
}

}  // namespace
}  // namespace ascend::npu
