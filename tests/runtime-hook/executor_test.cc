// The privileged executor against a real mount namespace (a forked child that unshared one), without runc:
// both mount paths (new mount API and the legacy bind + remount), device node creation and checks, cgroup
// v1 rules, and the refusals that stop image-controlled paths (CVE-2024-0132 class). Root only.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <sstream>

#include "ascend/hook/executor.h"
#include "ascend/hook/hardening.h"
#include "ascend/npu/emulator.h"
#include "support.h"

namespace ascend::hook {
namespace {

using testing::slurp;
using testing::spit;
using testing::TempDir;

void mkdirs(const std::string& p) {
  std::string cur;
  std::istringstream in(p);
  std::string c;
  while (std::getline(in, c, '/')) {
    if (c.empty()) continue;
    cur += "/" + c;
    ::mkdir(cur.c_str(), 0755);
  }
}

// A child process in its own (private) mount namespace, standing in for a container's init before
// pivot_root. Optionally it mounts procfs at `proc_at` inside that namespace first.
class NamespaceChild {
 public:
  explicit NamespaceChild(const std::string& proc_at = "") {
    int ready[2], hold[2];
    if (::pipe(ready) != 0 || ::pipe(hold) != 0) return;
    pid_ = ::fork();
    if (pid_ == 0) {
      ::close(ready[0]);
      ::close(hold[1]);
      char ok = 'y';
      if (::unshare(CLONE_NEWNS) != 0 || ::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0)
        ok = 'n';
      if (!proc_at.empty() && ::mount("proc", proc_at.c_str(), "proc", 0, nullptr) != 0) ok = 'n';
      if (::write(ready[1], &ok, 1) != 1) _exit(2);
      char c;
      while (::read(hold[0], &c, 1) > 0) {
      }
      _exit(0);
    }
    ::close(ready[1]);
    ::close(hold[0]);
    hold_ = hold[1];
    char ok = 'n';
    ok_ = ::read(ready[0], &ok, 1) == 1 && ok == 'y';
    ::close(ready[0]);
  }
  ~NamespaceChild() {
    if (hold_ >= 0) ::close(hold_);
    if (pid_ > 0) ::waitpid(pid_, nullptr, 0);
  }
  int pid() const { return pid_; }
  bool ok() const { return ok_; }
  // Mount points and options inside the child's namespace.
  std::map<std::string, std::string> mounts() const {
    return parse(slurp("/proc/" + std::to_string(pid_) + "/mountinfo"));
  }
  static std::map<std::string, std::string> parse(const std::string& mi) {
    std::map<std::string, std::string> out;
    std::istringstream in(mi);
    std::string line;
    while (std::getline(in, line)) {
      std::istringstream l(line);
      std::string a, b, c, d, mp, opts;
      l >> a >> b >> c >> d >> mp >> opts;
      out[mp] = opts;
    }
    return out;
  }
  // A file as the child sees it.
  std::string read(const std::string& path) const {
    return slurp("/proc/" + std::to_string(pid_) + "/root" + path);
  }

 private:
  pid_t pid_ = -1;
  int hold_ = -1;
  bool ok_ = false;
};

bool write_quiet(const std::string& path, const std::string& text) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  ::close(fd);
  return ok;
}

// A devices cgroup (v1) holding the child, with every device denied, removed on destruction.
class DeviceCgroup {
 public:
  explicit DeviceCgroup(int pid) : pid_(pid) {
    base_ = "/sys/fs/cgroup/devices";
    struct stat st {};
    if (::stat((base_ + "/devices.allow").c_str(), &st) != 0) return;
    dir_ = base_ + "/ascend-exec-test-" + std::to_string(::getpid());
    ::mkdir(dir_.c_str(), 0755);
    if (!write_quiet(dir_ + "/cgroup.procs", std::to_string(pid)) ||
        !write_quiet(dir_ + "/devices.deny", "a")) {
      ::rmdir(dir_.c_str());
      dir_.clear();
    }
  }
  ~DeviceCgroup() {
    if (dir_.empty()) return;
    write_quiet(base_ + "/cgroup.procs", std::to_string(pid_));  // back to the root, so the folder can go
    ::rmdir(dir_.c_str());
  }
  bool v1() const { return !dir_.empty(); }
  std::string list() const { return slurp(dir_ + "/devices.list"); }

 private:
  int pid_;
  std::string base_;
  std::string dir_;
};

class ExecutorTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root (mount namespaces, mount, mknod)";
    host_ = tmp_ / "host";
    rootfs_ = tmp_ / "rootfs";
    mkdirs(host_ + "/usr/local/dcmi");
    mkdirs(host_ + "/usr/local/bin");
    mkdirs(host_ + "/etc");
    mkdirs(rootfs_ + "/dev");
    spit(host_ + "/usr/local/dcmi/libdcmi.so", "dcmi\n");
    spit(host_ + "/usr/local/bin/npu-smi", "#!/bin/sh\n");
    ::chmod((host_ + "/usr/local/bin/npu-smi").c_str(), 0755);
    spit(host_ + "/etc/hccn.conf", "address_0=10.100.0.1\n");
  }

  InjectionPlan plan(const std::vector<std::string>& paths) const {
    InjectionPlan p;
    for (auto& x : paths) p.mounts.push_back({x, "base"});
    return p;
  }

  TempDir tmp_{"exec"};
  std::string host_;
  std::string rootfs_;
};

TEST_P(ExecutorTest, MountsReadOnlyInsideTheContainerOnly) {
  bool legacy = GetParam();
  NamespaceChild child;
  ASSERT_TRUE(child.ok());
  npu::Emulator dq(host_);
  InjectionPlan p =
      plan({"/usr/local/dcmi", "/usr/local/bin/npu-smi", "/etc/hccn.conf", "/etc/not-on-this-host"});
  ExecTarget t{child.pid(), rootfs_, {}, legacy};
  auto st = execute(p, dq, t);
  ASSERT_TRUE(st.ok()) << st.error().message();

  auto inside = child.mounts();
  for (const char* path : {"/usr/local/dcmi", "/usr/local/bin/npu-smi", "/etc/hccn.conf"}) {
    SCOPED_TRACE(path);
    auto it = inside.find(rootfs_ + path);
    ASSERT_NE(it, inside.end());
    for (const char* opt : {"ro", "nosuid", "nodev"}) {
      EXPECT_NE(("," + it->second + ",").find(std::string(",") + opt + ","), std::string::npos) << it->second;
    }
  }
  EXPECT_EQ(inside.count(rootfs_ + "/etc/not-on-this-host"), 0U);  // missing entries are skipped
  EXPECT_EQ(child.read(rootfs_ + "/etc/hccn.conf"), "address_0=10.100.0.1\n");
  EXPECT_EQ(child.read(rootfs_ + "/usr/local/dcmi/libdcmi.so"), "dcmi\n");
  // The host's namespace saw none of it.
  auto outside = NamespaceChild::parse(slurp("/proc/self/mountinfo"));
  for (const auto& [mp, opts] : outside) EXPECT_EQ(mp.rfind(rootfs_, 0), std::string::npos) << mp;
}

TEST_P(ExecutorTest, CreatesAndChecksDeviceNodesAndAllowsThemInTheCgroup) {
  NamespaceChild child;
  ASSERT_TRUE(child.ok());
  DeviceCgroup cg(child.pid());
  npu::Emulator dq(host_);
  InjectionPlan p;
  DeviceEntry null_dev{"/dev/davinci_t", "/dev/davinci_t", 1, 3, 0660};
  p.devices = {null_dev};
  ExecTarget t{child.pid(), rootfs_, {null_dev}, GetParam()};
  auto st = execute(p, dq, t);
  if (!cg.v1()) {
    ASSERT_FALSE(st.ok());
    EXPECT_NE(st.error().message().find("cgroup v2"), std::string::npos) << st.error().message();
    return;
  }
  ASSERT_TRUE(st.ok()) << st.error().message();
  struct stat sb {};
  ASSERT_EQ(::lstat((rootfs_ + "/dev/davinci_t").c_str(), &sb), 0);
  EXPECT_TRUE(S_ISCHR(sb.st_mode));
  EXPECT_EQ(sb.st_rdev, makedev(1, 3));
  EXPECT_EQ(sb.st_mode & 0777, 0660U);
  EXPECT_NE(cg.list().find("c 1:3 rwm"), std::string::npos) << cg.list();
}

TEST_P(ExecutorTest, RefusesANodeThatIsNotTheExpectedDevice) {
  NamespaceChild child;
  ASSERT_TRUE(child.ok());
  ASSERT_EQ(::mknod((rootfs_ + "/dev/davinci9").c_str(), S_IFCHR | 0600, makedev(1, 5)), 0);
  npu::Emulator dq(host_);
  InjectionPlan p;
  p.devices = {{"/dev/davinci9", "/dev/davinci9", 1, 3, 0660}};
  auto st = execute(p, dq, {child.pid(), rootfs_, {}, GetParam()});
  ASSERT_FALSE(st.ok());
  EXPECT_NE(
      st.error().message().find("/dev/davinci9 in the container is not the NPU device c 1:3 (found c 1:5)"),
      std::string::npos)
      << st.error().message();
}

TEST_P(ExecutorTest, RefusesToMountOverASymlinkFromTheImage) {
  NamespaceChild child;
  ASSERT_TRUE(child.ok());
  mkdirs(rootfs_ + "/etc");
  ASSERT_EQ(::symlink("/etc/shadow", (rootfs_ + "/etc/hccn.conf").c_str()), 0);
  npu::Emulator dq(host_);
  auto st = execute(plan({"/etc/hccn.conf"}), dq, {child.pid(), rootfs_, {}, GetParam()});
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message().find("/etc/hccn.conf is a symbolic link in the image"), std::string::npos)
      << st.error().message();
  for (const auto& [mp, opts] : child.mounts()) EXPECT_EQ(mp.rfind(rootfs_, 0), std::string::npos) << mp;
}

TEST_P(ExecutorTest, ASymlinkInTheImageCannotLeadOutOfTheRootfs) {
  NamespaceChild child;
  ASSERT_TRUE(child.ok());
  std::string escape = tmp_ / "escape";
  mkdirs(escape);
  mkdirs(rootfs_ + escape);
  // /usr in the image points at the host's folder through "..": it must resolve inside the rootfs.
  ASSERT_EQ(::symlink(("../../../../../../../.." + escape).c_str(), (rootfs_ + "/usr").c_str()), 0);
  npu::Emulator dq(host_);
  auto st = execute(plan({"/usr/local/dcmi"}), dq, {child.pid(), rootfs_, {}, GetParam()});
  ASSERT_TRUE(st.ok()) << st.error().message();
  auto inside = child.mounts();
  EXPECT_EQ(inside.count(rootfs_ + escape + "/local/dcmi"), 1U);  // landed inside the rootfs
  EXPECT_EQ(inside.count(escape + "/local/dcmi"), 0U);
  struct stat sb {};
  EXPECT_NE(::lstat((escape + "/local").c_str(), &sb), 0) << "the host folder was written to";
}

TEST_P(ExecutorTest, RefusesTargetsThatResolveIntoProcfs) {
  mkdirs(rootfs_ + "/proc");
  spit(host_ + "/etc/hostname", "host\n");
  ASSERT_EQ(::symlink("/proc/sys/kernel", (rootfs_ + "/etc").c_str()), 0);
  NamespaceChild child(rootfs_ + "/proc");
  ASSERT_TRUE(child.ok());
  npu::Emulator dq(host_);
  auto st = execute(plan({"/etc/hostname"}), dq, {child.pid(), rootfs_, {}, GetParam()});
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message().find("procfs or sysfs"), std::string::npos) << st.error().message();
}

TEST_P(ExecutorTest, HostSymlinksNeedAllowLink) {
  ASSERT_EQ(::symlink("hccn.conf", (host_ + "/etc/link.conf").c_str()), 0);
  npu::Emulator dq(host_);
  {
    NamespaceChild child;
    ASSERT_TRUE(child.ok());
    auto st = execute(plan({"/etc/link.conf"}), dq, {child.pid(), rootfs_, {}, GetParam()});
    ASSERT_FALSE(st.ok());
    EXPECT_NE(st.error().message().find(
                  "/etc/link.conf is a symbolic link on the host; set ASCEND_ALLOW_LINK=True"),
              std::string::npos)
        << st.error().message();
  }
  NamespaceChild child;
  ASSERT_TRUE(child.ok());
  InjectionPlan p = plan({"/etc/link.conf"});
  p.allow_link = true;
  auto st = execute(p, dq, {child.pid(), rootfs_, {}, GetParam()});
  ASSERT_TRUE(st.ok()) << st.error().message();
  EXPECT_EQ(child.read(rootfs_ + "/etc/link.conf"), "address_0=10.100.0.1\n");
}

TEST_P(ExecutorTest, RefusesAProcessInTheHostsMountNamespace) {
  npu::Emulator dq(host_);
  auto st = execute(plan({"/etc/hccn.conf"}), dq, {static_cast<int>(::getpid()), rootfs_, {}, GetParam()});
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message().find("shares the host's mount namespace"), std::string::npos)
      << st.error().message();
}

// The spec path's sources: the real host path of each entry, whether or not a link lies on its way (the
// expected paths are written out by hand from the tree below), with the config naming the host root through
// a link. Needs no privilege.
TEST(ResolveBindMounts, GivesTheRealHostPathOfEachEntry) {
  TempDir tmp("binds");
  const std::string real = std::filesystem::canonical(tmp.path()).string() + "/real-host";
  const std::string named = tmp / "host";  // what the config says: a link to real-host
  mkdirs(real + "/usr/local/dcmi");
  mkdirs(real + "/usr/local/Ascend-24.1/driver/lib64");
  mkdirs(real + "/opt/bin");
  mkdirs(real + "/etc");
  spit(real + "/etc/hccn.conf", "address_0=10.100.0.1\n");
  spit(real + "/opt/bin/npu-smi", "#!/bin/sh\n");
  ASSERT_EQ(::symlink("real-host", named.c_str()), 0);
  ASSERT_EQ(::symlink("Ascend-24.1", (real + "/usr/local/Ascend").c_str()), 0);  // relative, mid-path
  ASSERT_EQ(::symlink("/opt/bin", (real + "/usr/local/bin").c_str()), 0);        // absolute: inside the root
  ASSERT_EQ(::symlink("hccn.conf", (real + "/etc/link.conf").c_str()), 0);       // the entry itself
  npu::Emulator dq(named);
  InjectionPlan p;
  for (const char* path : {"/usr/local/dcmi", "/usr/local/Ascend/driver/lib64", "/etc/not-on-this-host",
                           "/usr/local/bin/npu-smi", "/etc/hccn.conf"})
    p.mounts.push_back({path, "base"});
  auto binds = resolve_bind_mounts(p, dq);
  ASSERT_TRUE(binds.ok()) << binds.error().message();
  std::vector<std::pair<std::string, std::string>> got;
  for (const auto& b : *binds) got.emplace_back(b.source, b.destination);
  std::vector<std::pair<std::string, std::string>> want = {
      {real + "/usr/local/dcmi", "/usr/local/dcmi"},
      {real + "/usr/local/Ascend-24.1/driver/lib64", "/usr/local/Ascend/driver/lib64"},
      {real + "/opt/bin/npu-smi", "/usr/local/bin/npu-smi"},
      {real + "/etc/hccn.conf", "/etc/hccn.conf"}};
  EXPECT_EQ(got, want);

  p.mounts.push_back({"/etc/link.conf", "base"});
  auto refused = resolve_bind_mounts(p, dq);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message().find("/etc/link.conf is a symbolic link on the host"),
            std::string::npos)
      << refused.error().message();
  p.allow_link = true;
  auto linked = resolve_bind_mounts(p, dq);
  if (::geteuid() != 0) return;  // an allowed link must be root's: only root can make one here
  ASSERT_TRUE(linked.ok()) << linked.error().message();
  ASSERT_EQ(linked->size(), 5U);
  EXPECT_EQ(linked->back().source, real + "/etc/hccn.conf");
  EXPECT_EQ(linked->back().destination, "/etc/link.conf");
}

// A node the snapshot read itself (the node scan) is not read again: the entry takes the mode the scan saw,
// even where the disk now holds no device at all (a plain file here, which a second look would refuse).
// Anything else is read: an entry the snapshot does not hold, one whose numbers differ, and every entry of a
// snapshot that did not read its nodes. Needs no privilege (no device node is made).
TEST(CheckHostDevices, ANodeTheScanReadIsNotReadAgain) {
  TempDir tmp("devices");
  mkdirs(tmp / "dev");
  spit(tmp / "dev/davinci0", "not a device\n");
  npu::Emulator dq(tmp.path());
  npu::DeviceSnapshot host;
  host.nodes_checked = true;
  host.chip_nodes = {{"/dev/davinci0", 234, 0, 0640}};
  host.vnpu_nodes = {{"/dev/vdavinci100", 240, 100, 0600}};
  host.control = {{"/dev/davinci_manager", 235, 0, 0666}};

  std::vector<DeviceEntry> planned = {{"/dev/davinci0", "/dev/davinci0", 234, 0, 0660},
                                      {"/dev/davinci100", "/dev/vdavinci100", 240, 100, 0660},
                                      {"/dev/davinci_manager", "/dev/davinci_manager", 235, 0, 0660}};
  auto checked = check_host_devices(planned, host, dq);
  ASSERT_TRUE(checked.ok()) << checked.error().message();
  std::vector<DeviceEntry> want = {{"/dev/davinci0", "/dev/davinci0", 234, 0, 0640},
                                   {"/dev/davinci100", "/dev/vdavinci100", 240, 100, 0600},
                                   {"/dev/davinci_manager", "/dev/davinci_manager", 235, 0, 0666}};
  EXPECT_EQ(*checked, want);

  auto missing = check_host_devices({{"/dev/davinci1", "/dev/davinci1", 234, 1, 0660}}, host, dq);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code(), ENOENT);
  EXPECT_NE(missing.error().message().find("/dev/davinci1"), std::string::npos) << missing.error().message();

  auto other = check_host_devices({{"/dev/davinci0", "/dev/davinci0", 234, 5, 0660}}, host, dq);
  ASSERT_FALSE(other.ok());
  EXPECT_NE(other.error().message().find("is not c 234:5"), std::string::npos) << other.error().message();

  host.nodes_checked = false;
  auto unread = check_host_devices({{"/dev/davinci0", "/dev/davinci0", 234, 0, 0660}}, host, dq);
  ASSERT_FALSE(unread.ok());
  EXPECT_EQ(unread.error().code(), ENODEV);
  EXPECT_NE(unread.error().message().find("is not c 234:0"), std::string::npos) << unread.error().message();
}

INSTANTIATE_TEST_SUITE_P(MountApi, ExecutorTest, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "Legacy" : "OpenTree"; });

TEST(Hardening, EveryCapabilityHasAReason) {
  ASSERT_FALSE(hook_capabilities().empty());
  for (const auto& c : hook_capabilities()) EXPECT_GT(std::strlen(c.why), 10U);
  bool denies_exec = false;
  for (const char* s : hook_denied_syscalls()) denies_exec |= std::string(s) == "execve";
  EXPECT_TRUE(denies_exec);
}

TEST(Hardening, HookProcessKeepsOnlyItsCapabilitiesAndCannotExec) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root (capabilities)";
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    std::string report;
    auto st = harden_hook_process();
    report += st.ok() ? "hardened\n" : "failed " + st.error().message() + "\n";
    ::execl("/bin/true", "true", nullptr);
    report += std::string("exec ") + std::strerror(errno) + "\n";
    report += slurp("/proc/self/status");
    if (::write(fds[1], report.data(), report.size()) < 0) _exit(3);
    _exit(0);
  }
  ::close(fds[1]);
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(fds[0], buf, sizeof buf)) > 0) out.append(buf, static_cast<std::size_t>(n));
  ::close(fds[0]);
  ::waitpid(pid, nullptr, 0);
  EXPECT_NE(out.find("hardened\n"), std::string::npos) << out;
  EXPECT_NE(out.find("exec Operation not permitted"), std::string::npos) << out;
  unsigned long long want = 0;
  for (const auto& c : hook_capabilities()) want |= 1ULL << c.cap;
  char hex[32];
  std::snprintf(hex, sizeof hex, "%016llx", want);
  EXPECT_NE(out.find(std::string("CapEff:\t") + hex), std::string::npos) << out;
  EXPECT_NE(out.find(std::string("CapBnd:\t") + hex), std::string::npos) << out;
  EXPECT_NE(out.find("CapInh:\t0000000000000000"), std::string::npos) << out;
  EXPECT_NE(out.find("NoNewPrivs:\t1"), std::string::npos) << out;
}

}  // namespace
}  // namespace ascend::hook
