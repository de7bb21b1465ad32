// The injection plan and the mount lists: pure functions, table-driven.
#include <gtest/gtest.h>

#include "ascend/hook/executor.h"
#include "ascend/hook/mount_list.h"
#include "ascend/hook/plan.h"
#include "ascend/npu/profiles.h"

namespace ascend::hook {
namespace {

npu::DeviceSnapshot host() {
  npu::HostState h = npu::builtin_profile("atlas800t-a2").value();
  h.majors = {234, 235, 236, 237, 238};
  h.vnpus.push_back({116, 1, "vir05_1c_16g", 0, {}, 0});
  return npu::to_snapshot(h);
}

MountList base() {
  return {"base",
          {"/usr/local/Ascend/driver/lib64", "/usr/local/dcmi", "/usr/local/bin/npu-smi", "/etc/hccn.conf"}};
}

const std::vector<DeviceEntry> kControl = {{"/dev/davinci_manager", "/dev/davinci_manager", 235, 0, 0660},
                                           {"/dev/devmm_svm", "/dev/devmm_svm", 236, 0, 0660},
                                           {"/dev/hisi_hdc", "/dev/hisi_hdc", 237, 0, 0660}};

std::vector<DeviceEntry> with_control(std::vector<DeviceEntry> d) {
  d.insert(d.end(), kControl.begin(), kControl.end());
  return d;
}

TEST(InjectionPlan, DevicesMountsAndEnvPerRequest) {
  struct Case {
    const char* name;
    Request request;
    std::vector<MountList> lists;
    InjectionPlan want;
  };
  Request two;
  two.ids = {0, 2};
  Request nodrv;
  nodrv.ids = {7};
  nodrv.nodrv = true;
  Request virt;
  virt.ids = {116};
  virt.is_virtual = true;
  virt.allow_link = true;
  MountList extra{"extra", {"/usr/local/dcmi", "/opt/tools"}};  // the duplicate is dropped
  const Case cases[] = {
      {"two chips",
       two,
       {base()},
       {with_control({{"/dev/davinci0", "/dev/davinci0", 234, 0, 0660},
                      {"/dev/davinci2", "/dev/davinci2", 234, 2, 0660}}),
        {{"/usr/local/Ascend/driver/lib64", "base"},
         {"/usr/local/dcmi", "base"},
         {"/usr/local/bin/npu-smi", "base"},
         {"/etc/hccn.conf", "base"}},
        false,
        {"ASCEND_DOCKER_RUNTIME=True"}}},
      {"NODRV drops every mount",
       nodrv,
       {base()},
       {with_control({{"/dev/davinci7", "/dev/davinci7", 234, 7, 0660}}),
        {},
        false,
        {"ASCEND_DOCKER_RUNTIME=True"}}},
      {"VIRTUAL maps vdavinci to davinci",
       virt,
       {base(), extra},
       {with_control({{"/dev/davinci116", "/dev/vdavinci116", 238, 116, 0660}}),
        {{"/usr/local/Ascend/driver/lib64", "base"},
         {"/usr/local/dcmi", "base"},
         {"/usr/local/bin/npu-smi", "base"},
         {"/etc/hccn.conf", "base"},
         {"/opt/tools", "extra"}},
        true,
        {"ASCEND_DOCKER_RUNTIME=True"}}},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    InjectionPlan got = make_plan(c.request, host(), c.lists);
    EXPECT_EQ(got.devices, c.want.devices);
    EXPECT_EQ(got.mounts, c.want.mounts);
    EXPECT_EQ(got.allow_link, c.want.allow_link);
    EXPECT_EQ(got.env, c.want.env);
  }
}

TEST(InjectionPlan, DescribeIsOneLine) {
  Request r;
  r.ids = {0, 1, 2, 3};
  std::string d = describe(make_plan(r, host(), {base()}));
  EXPECT_EQ(d, "devices 0,1,2,3 (+3 control), 4 mounts (base), env ASCEND_DOCKER_RUNTIME=True");
}

TEST(MountList, ParsesPathsCommentsAndBlankLines) {
  auto l = parse_mount_list("# driver\n/usr/local/dcmi\n\n  /etc//hccn.conf  # the NIC config\n/usr/lib64/\n",
                            "base");
  ASSERT_TRUE(l.ok()) << l.error().message();
  EXPECT_EQ(l->name, "base");
  EXPECT_EQ(l->paths, (std::vector<std::string>{"/usr/local/dcmi", "/etc/hccn.conf", "/usr/lib64"}));
}

// Found by mount_list_fuzz: blanks before a last '/' stayed in the path ("/usr /" gave "/usr "), which the
// same list written back one path per line no longer said.
TEST(MountList, RejectsANulByte) {
  auto l = parse_mount_list(std::string("/usr/local\0/x\n", 14), "bad");
  ASSERT_FALSE(l.ok());
  EXPECT_NE(l.error().message().find("NUL"), std::string::npos) << l.error().message();
}

TEST(MountList, BlanksAtTheEndOfAPathAreNotPartOfIt) {
  auto l = parse_mount_list("/usr/local /\n/a /b\n", "base");
  ASSERT_TRUE(l.ok()) << l.error().message();
  EXPECT_EQ(l->paths, (std::vector<std::string>{"/usr/local", "/a /b"}));
}

TEST(MountList, RejectsRelativeAndDotDotPaths) {
  const std::pair<const char*, const char*> cases[] = {
      {"usr/local/dcmi\n", "line 1: 'usr/local/dcmi' is not an absolute path"},
      {"/ok\n/usr/../etc/shadow\n", "line 2: '/usr/../etc/shadow' has a '..' component"},
      {"/usr/./lib\n", "has a '.' component"},
      {"/\n", "'/' cannot be mounted"},
      {"/ /\n", "'/' cannot be mounted"},  // found by mount_list_fuzz: it was accepted as "/ "
      // Found by mount_list_fuzz: a '..' hidden behind blanks and a '/' ("/usr/.. /").
      {"/usr/..\t /\n", "has a '..' component"},
  };
  for (const auto& [text, want] : cases) {
    SCOPED_TRACE(text);
    auto l = parse_mount_list(text, "bad");
    ASSERT_FALSE(l.ok());
    EXPECT_NE(l.error().message().find(want), std::string::npos) << l.error().message();
    EXPECT_NE(l.error().message().find("mount list bad"), std::string::npos);
  }
}

TEST(MountList, ShippedBaseListHasTheEmulatorDriverPaths) {
  std::string dir = ASCEND_BIN_DIR;
  auto lists = load_mount_lists(dir, {"base"});
  ASSERT_TRUE(lists.ok()) << lists.error().message();
  EXPECT_EQ(lists->at(0).paths, (std::vector<std::string>{
                                    "/usr/local/Ascend/driver/lib64", "/usr/local/Ascend/driver/include",
                                    "/usr/local/Ascend/driver/version.info", "/usr/local/dcmi",
                                    "/usr/local/bin/npu-smi", "/etc/ascend_install.info", "/etc/hccn.conf"}));
  auto missing = load_mount_lists(dir, {"base", "no-such-list"});
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message().find("mount list 'no-such-list' not found"), std::string::npos);
}

}  // namespace
}  // namespace ascend::hook

namespace ascend::hook {
namespace {

TEST(DevicesCgroup, FindsTheV1FolderOrSaysCgroupV2NeedsTheRuntime) {
  const std::string mountinfo =
      "30 25 0:26 / /sys/fs/cgroup/memory rw,nosuid - cgroup cgroup rw,memory\n"
      "31 25 0:27 / /sys/fs/cgroup/devices rw,nosuid - cgroup cgroup rw,devices\n";
  auto v1 = parse_devices_cgroup("12:memory:/docker/abc\n5:devices:/docker/abc\n0::/\n", mountinfo);
  ASSERT_TRUE(v1.ok()) << v1.error().message();
  EXPECT_EQ(*v1, "/sys/fs/cgroup/devices/docker/abc");
  // A devices hierarchy mounted from a sub-folder (a nested container): the path is relative to it.
  auto nested = parse_devices_cgroup(
      "5:devices:/outer/inner\n", "31 25 0:27 /outer /sys/fs/cgroup/devices rw - cgroup cgroup rw,devices\n");
  ASSERT_TRUE(nested.ok()) << nested.error().message();
  EXPECT_EQ(*nested, "/sys/fs/cgroup/devices/inner");
  auto v2 = parse_devices_cgroup("0::/system.slice/docker-abc.scope\n",
                                 "40 25 0:30 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n");
  ASSERT_FALSE(v2.ok());
  EXPECT_NE(v2.error().message().find("cgroup v2"), std::string::npos);
  EXPECT_NE(v2.error().message().find("ascend-docker-runtime"), std::string::npos);
  auto unmounted =
      parse_devices_cgroup("5:devices:/x\n", "40 25 0:30 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n");
  ASSERT_FALSE(unmounted.ok());
  EXPECT_NE(unmounted.error().message().find("no cgroup v1 devices hierarchy"), std::string::npos);
}

}  // namespace
}  // namespace ascend::hook
