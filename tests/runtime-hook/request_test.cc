// The request parser: every accepted and rejected form of the ASCEND_* variables, table-driven.
#include <gtest/gtest.h>

#include "ascend/hook/request.h"
#include "ascend/npu/profiles.h"

namespace ascend::hook {
namespace {

npu::DeviceSnapshot host_with_vnpus() {
  npu::HostState h = npu::builtin_profile("atlas800t-a2").value();
  h.vnpus.push_back({100, 0, "vir05_1c_16g", 0, {}, 0});
  h.vnpus.push_back({117, 1, "vir10_3c_32g", 0, {}, 0});
  return npu::to_snapshot(h);
}

struct Accepted {
  std::vector<std::string> env;
  std::vector<int> ids;
  bool nodrv = false;
  bool is_virtual = false;
  std::vector<std::string> lists{"base"};
  bool allow_link = false;
  std::string vnpu;
};

TEST(RequestParser, AcceptsEveryDocumentedForm) {
  const Accepted cases[] = {
      {{"ASCEND_VISIBLE_DEVICES=0"}, {0}},
      {{"ASCEND_VISIBLE_DEVICES=0,2"}, {0, 2}},
      {{"ASCEND_VISIBLE_DEVICES=2,0"}, {0, 2}},  // order normalised
      {{"ASCEND_VISIBLE_DEVICES=0-3"}, {0, 1, 2, 3}},
      {{"ASCEND_VISIBLE_DEVICES=0-1,4"}, {0, 1, 4}},
      {{"ASCEND_VISIBLE_DEVICES=1,1,0-1"}, {0, 1}},  // duplicates removed
      {{"ASCEND_VISIBLE_DEVICES= 3 , 5 "}, {3, 5}},
      {{"ASCEND_VISIBLE_DEVICES=all"}, {0, 1, 2, 3, 4, 5, 6, 7}},
      {{"ASCEND_VISIBLE_DEVICES=ALL"}, {0, 1, 2, 3, 4, 5, 6, 7}},
      {{"ASCEND_VISIBLE_DEVICES=Ascend910-3"}, {3}},
      {{"ASCEND_VISIBLE_DEVICES=npu-3,NPU-5"}, {3, 5}},
      {{"ASCEND_VISIBLE_DEVICES=Ascend910-1,6"}, {1, 6}},
      {{"ASCEND_VISIBLE_DEVICES=7", "ASCEND_RUNTIME_OPTIONS=NODRV"}, {7}, true},
      {{"ASCEND_VISIBLE_DEVICES=100", "ASCEND_RUNTIME_OPTIONS=VIRTUAL"}, {100}, false, true},
      {{"ASCEND_VISIBLE_DEVICES=all", "ASCEND_RUNTIME_OPTIONS=VIRTUAL,NODRV"}, {100, 117}, true, true},
      {{"ASCEND_VISIBLE_DEVICES=0", "ASCEND_RUNTIME_OPTIONS="}, {0}},
      {{"ASCEND_VISIBLE_DEVICES=0", "ASCEND_RUNTIME_MOUNTS=base,extra-1,base"},
       {0},
       false,
       false,
       {"base", "extra-1"}},
      {{"ASCEND_VISIBLE_DEVICES=0", "ASCEND_RUNTIME_MOUNTS="}, {0}},
      {{"ASCEND_VISIBLE_DEVICES=0", "ASCEND_ALLOW_LINK=True"}, {0}, false, false, {"base"}, true},
      {{"ASCEND_VISIBLE_DEVICES=0", "ASCEND_ALLOW_LINK=false"}, {0}},
      {{"ASCEND_VISIBLE_DEVICES=2", "ASCEND_VNPU_SPECS=vir05_1c_16g"},
       {2},
       false,
       false,
       {"base"},
       false,
       "vir05_1c_16g"},
      // The last occurrence wins, as for the process.
      {{"ASCEND_VISIBLE_DEVICES=0", "ASCEND_VISIBLE_DEVICES=2"}, {2}},
      {{"ASCEND_VISIBLE_DEVICES=0", "ASCEND_RUNTIME_OPTIONS=BOGUS", "ASCEND_RUNTIME_OPTIONS=NODRV"},
       {0},
       true},
  };
  npu::DeviceSnapshot host = host_with_vnpus();
  for (const auto& c : cases) {
    std::string label;
    for (const auto& e : c.env) label += e + " ";
    SCOPED_TRACE(label);
    auto r = parse_request(c.env, host);
    ASSERT_TRUE(r.ok()) << r.error().message();
    ASSERT_TRUE(r->has_value());
    const Request& req = **r;
    EXPECT_EQ(req.ids, c.ids);
    EXPECT_EQ(req.nodrv, c.nodrv);
    EXPECT_EQ(req.is_virtual, c.is_virtual);
    EXPECT_EQ(req.mount_lists, c.lists);
    EXPECT_EQ(req.allow_link, c.allow_link);
    EXPECT_EQ(req.vnpu_template, c.vnpu);
  }
}

TEST(RequestParser, NoDeviceMeansNoRequest) {
  const std::vector<std::vector<std::string>> cases = {
      {},
      {"PATH=/bin"},
      {"ASCEND_VISIBLE_DEVICES="},
      {"ASCEND_VISIBLE_DEVICES=void"},
      {"ASCEND_VISIBLE_DEVICES=none"},
      {"ASCEND_VISIBLE_DEVICES=NONE"},
      {"ASCEND_VISIBLE_DEVICES"},
      {"ASCEND_VISIBLE_DEVICES=0", "ASCEND_VISIBLE_DEVICES=void"},  // the last one wins
      {"ASCEND_RUNTIME_OPTIONS=garbage"},  // options alone request nothing and are not checked
      {"XASCEND_VISIBLE_DEVICES=0"},
  };
  npu::DeviceSnapshot host = host_with_vnpus();
  for (const auto& env : cases) {
    SCOPED_TRACE(env.empty() ? "(empty)" : env.back());
    EXPECT_FALSE(requests_devices(env));
    auto r = parse_request(env, host);
    ASSERT_TRUE(r.ok()) << r.error().message();
    EXPECT_FALSE(r->has_value());
  }
}

struct Rejected {
  std::vector<std::string> env;
  std::vector<std::string> message_parts;  // every one must appear in the error
};

TEST(RequestParser, RejectsWithOneLineNamingTheProblem) {
  const Rejected cases[] = {
      {{"ASCEND_VISIBLE_DEVICES=8"}, {"ASCEND_VISIBLE_DEVICES=8", "no device 8", "valid ids: 0-7"}},
      {{"ASCEND_VISIBLE_DEVICES=0-9"}, {"ASCEND_VISIBLE_DEVICES=0-9", "no device 8", "valid ids: 0-7"}},
      {{"ASCEND_VISIBLE_DEVICES=3-1"}, {"ASCEND_VISIBLE_DEVICES=3-1", "reversed range 3-1"}},
      {{"ASCEND_VISIBLE_DEVICES=abc"}, {"ASCEND_VISIBLE_DEVICES=abc", "'abc'", "valid ids: 0-7"}},
      {{"ASCEND_VISIBLE_DEVICES=0,,1"}, {"empty entry"}},
      {{"ASCEND_VISIBLE_DEVICES=-1"}, {"ASCEND_VISIBLE_DEVICES=-1"}},
      {{"ASCEND_VISIBLE_DEVICES=1-"}, {"ASCEND_VISIBLE_DEVICES=1-"}},
      {{"ASCEND_VISIBLE_DEVICES=0x1"}, {"'0x1'"}},
      {{"ASCEND_VISIBLE_DEVICES=99999999"}, {"ASCEND_VISIBLE_DEVICES=99999999"}},
      {{"ASCEND_VISIBLE_DEVICES=Ascend310P-1"}, {"Ascend310P-1", "Ascend910-N or npu-N"}},
      {{"ASCEND_VISIBLE_DEVICES=npu-9"}, {"no device 9"}},
      {{"ASCEND_VISIBLE_DEVICES=gpu-1"}, {"'gpu-1'"}},
      {{"ASCEND_VISIBLE_DEVICES=0", "ASCEND_RUNTIME_OPTIONS=FOO"},
       {"ASCEND_RUNTIME_OPTIONS=FOO", "'FOO'", "NODRV, VIRTUAL"}},
      {{"ASCEND_VISIBLE_DEVICES=0", "ASCEND_RUNTIME_OPTIONS=NODRV,,VIRTUAL"}, {"ASCEND_RUNTIME_OPTIONS"}},
      {{"ASCEND_VISIBLE_DEVICES=0", "ASCEND_RUNTIME_OPTIONS=nodrv"}, {"'nodrv'"}},
      {{"ASCEND_VISIBLE_DEVICES=0", "ASCEND_RUNTIME_OPTIONS=VIRTUAL"},
       {"no vNPU 0", "valid vNPU ids: 100,117"}},
      {{"ASCEND_VISIBLE_DEVICES=101", "ASCEND_RUNTIME_OPTIONS=VIRTUAL"}, {"no vNPU 101"}},
      {{"ASCEND_VISIBLE_DEVICES=100-117", "ASCEND_RUNTIME_OPTIONS=VIRTUAL"}, {"no vNPU 101"}},
      {{"ASCEND_VISIBLE_DEVICES=0", "ASCEND_RUNTIME_MOUNTS=../etc/passwd"},
       {"ASCEND_RUNTIME_MOUNTS", "not a mount-list name"}},
      {{"ASCEND_VISIBLE_DEVICES=0", "ASCEND_RUNTIME_MOUNTS=a/b"}, {"'a/b'"}},
      {{"ASCEND_VISIBLE_DEVICES=0", "ASCEND_RUNTIME_MOUNTS=.hidden"}, {"'.hidden'"}},
      {{"ASCEND_VISIBLE_DEVICES=0", "ASCEND_ALLOW_LINK=yes"}, {"ASCEND_ALLOW_LINK=yes", "True or False"}},
      {{"ASCEND_VISIBLE_DEVICES=0,1", "ASCEND_VNPU_SPECS=vir05_1c_16g"},
       {"ASCEND_VNPU_SPECS", "exactly one"}},
      {{"ASCEND_VISIBLE_DEVICES=0", "ASCEND_VNPU_SPECS=vir99"}, {"unknown vNPU template", "vir10_3c_32g"}},
      {{"ASCEND_VISIBLE_DEVICES=100", "ASCEND_RUNTIME_OPTIONS=VIRTUAL", "ASCEND_VNPU_SPECS=vir05_1c_16g"},
       {"cannot be combined with VIRTUAL"}},
  };
  npu::DeviceSnapshot host = host_with_vnpus();
  for (const auto& c : cases) {
    std::string label;
    for (const auto& e : c.env) label += e + " ";
    SCOPED_TRACE(label);
    auto r = parse_request(c.env, host);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().message().find('\n'), std::string::npos);
    for (const auto& part : c.message_parts)
      EXPECT_NE(r.error().message().find(part), std::string::npos) << r.error().message();
  }
}

TEST(RequestParser, ValidIdsFollowTheHost) {
  npu::DeviceSnapshot duo = npu::to_snapshot(npu::builtin_profile("atlas300i-duo").value());
  auto r = parse_request({"ASCEND_VISIBLE_DEVICES=Ascend310P-1"}, duo);
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ((*r)->ids, std::vector<int>{1});
  auto bad = parse_request({"ASCEND_VISIBLE_DEVICES=Ascend910-1"}, duo);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message().find("Ascend310P-N"), std::string::npos) << bad.error().message();
}

TEST(RequestParser, EnvValueTakesTheLastOccurrence) {
  std::vector<std::string> env = {"A=1", "AB=2", "A=3", "B"};
  EXPECT_EQ(env_value(env, "A"), "3");
  EXPECT_EQ(env_value(env, "AB"), "2");
  EXPECT_EQ(env_value(env, "B"), "");
  EXPECT_EQ(env_value(env, "C"), std::nullopt);
}

TEST(RequestParser, FormatIds) {
  EXPECT_EQ(format_ids({}), "");
  EXPECT_EQ(format_ids({3}), "3");
  EXPECT_EQ(format_ids({0, 1}), "0,1");
  EXPECT_EQ(format_ids({0, 1, 2, 3, 5, 7, 8, 9}), "0-3,5,7-9");
}

}  // namespace
}  // namespace ascend::hook
