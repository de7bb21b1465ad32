#include "ascend/hook/executor.h"

#include <fcntl.h>
#include <sched.h>
#include <spdlog/spdlog.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <optional>
#include <sstream>

#include <fmt/format.h>

#include "ascend/common/fs.h"
#include "ascend/common/safe_path.h"
#include "ascend/common/unique_fd.h"

namespace ascend::hook {

namespace {

constexpr long kProcSuperMagic = 0x9fa0;
constexpr long kSysfsMagic = 0x62656572;

std::string rdev_text(dev_t d) {
  return std::to_string(major(d)) + ":" + std::to_string(minor(d));
}

// Being inside a container's mount namespace, as a scope: entering needs CAP_SYS_ADMIN and CAP_SYS_CHROOT
// (setns on a mount namespace); leaving returns to the namespace the hook started in.
// The mount namespace of `pid`, refused when it is the hook's own (the host's): an OCI state whose pid is
// pid 1 or any host process must never get mounts or device rules.
struct TargetNamespace {
  UniqueFd own;
  UniqueFd target;
  std::string path;
};
Result<TargetNamespace> open_target_namespace(int pid) {
  TargetNamespace ns;
  ns.own = UniqueFd(::open("/proc/self/ns/mnt", O_RDONLY | O_CLOEXEC));
  if (!ns.own.valid()) return Error::from_errno(errno, "open /proc/self/ns/mnt");
  ns.path = "/proc/" + std::to_string(pid) + "/ns/mnt";
  ns.target = UniqueFd(::open(ns.path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!ns.target.valid()) {
    return Error::from_errno(errno, "open " + ns.path + " (is the container still there?)");
  }
  struct stat a {
  }, b{};
  if (::fstat(ns.own.get(), &a) != 0 || ::fstat(ns.target.get(), &b) != 0) {
    return Error::from_errno(errno, "stat " + ns.path);
  }
  if (a.st_ino == b.st_ino && a.st_dev == b.st_dev) {
    return Error::invalid("process " + std::to_string(pid) +
                          " shares the host's mount namespace; refusing to mount");
  }
  return ns;
}

class MountNamespace {
 public:
  static Result<MountNamespace> enter(int pid) {
    ASCEND_ASSIGN(TargetNamespace ns, open_target_namespace(pid), "");
    UniqueFd own = std::move(ns.own);
    const std::string& path = ns.path;
    if (::setns(ns.target.get(), CLONE_NEWNS) != 0) return Error::from_errno(errno, "setns " + path);
    return MountNamespace(std::move(own));
  }
  MountNamespace(MountNamespace&&) noexcept = default;
  MountNamespace& operator=(MountNamespace&&) = delete;
  ~MountNamespace() {
    if (own_.valid() && ::setns(own_.get(), CLONE_NEWNS) != 0) {
      spdlog::error("could not return to the host mount namespace: {}", std::strerror(errno));
    }
  }

 private:
  explicit MountNamespace(UniqueFd own) : own_(std::move(own)) {}
  UniqueFd own_;
};

// A driver path made ready in the host's namespace.
struct Source {
  const MountEntry* entry = nullptr;
  UniqueFd fd;              // O_PATH, inside the host root
  UniqueFd tree;            // detached read-only clone (new mount API); invalid on the legacy path
  int open_flags = O_PATH;  // how the host path was resolved (O_NOFOLLOW unless symlinks are allowed)
  bool is_dir = false;
  dev_t dev = 0;
  ino_t ino = 0;
};

// Opens a mount-list entry inside the host root: nothing when it is not on the host (logged and skipped), an
// error when it is a symlink and links are not allowed. An allowed symlink must itself be root's (so nobody
// else can have planted it) and end, resolved inside the host root, on a file root owns.
Result<std::optional<Source>> open_source(const MountEntry& m, int host_root, const std::string& host_path,
                                          bool allow_link) {
  auto skipped = [&]() {
    spdlog::info("mount list {}: {} is not on the host ({}), skipped", m.list, m.path, host_path);
    return std::optional<Source>();
  };
  int flags = O_PATH | O_NOFOLLOW;
  auto fd = open_in_root(host_root, m.path, flags);
  if (!fd) {
    if (fd.error().code() == ENOENT) return skipped();
    return fd.error().context("mount list " + m.list + ": open " + host_path);
  }
  struct stat st {};
  if (::fstat(fd->get(), &st) != 0) return Error::from_errno(errno, "stat " + host_path);
  if (S_ISLNK(st.st_mode)) {
    if (!allow_link) {
      return Error(ELOOP, "mount list " + m.list + ": " + m.path + " is a symbolic link on the host; set " +
                              kEnvAllowLink + "=True to allow it");
    }
    if (st.st_uid != 0) {
      return Error(EPERM, "mount list " + m.list + ": " + m.path + " is a symbolic link owned by uid " +
                              std::to_string(st.st_uid) + ", not root; refusing to follow it");
    }
    // The host root is trusted (the administrator's); the link resolves inside it, never outside.
    flags = O_PATH;
    fd = open_in_root(host_root, m.path, flags);
    if (!fd) {
      if (fd.error().code() == ENOENT) return skipped();
      return fd.error().context("mount list " + m.list + ": open " + host_path);
    }
    if (::fstat(fd->get(), &st) != 0) return Error::from_errno(errno, "stat " + host_path);
    if (st.st_uid != 0) {
      return Error(EPERM, "mount list " + m.list + ": " + m.path + " links to a file owned by uid " +
                              std::to_string(st.st_uid) + "; a linked entry must end on a file root owns");
    }
  }
  Source s;
  s.entry = &m;
  s.fd = std::move(*fd);
  s.open_flags = flags;
  s.is_dir = S_ISDIR(st.st_mode);
  s.dev = st.st_dev;
  s.ino = st.st_ino;
  return std::optional<Source>(std::move(s));
}

Result<std::optional<Source>> prepare_source(const MountEntry& m, int host_root, const std::string& host_path,
                                             bool allow_link, bool legacy) {
  ASCEND_ASSIGN(std::optional<Source> opened, open_source(m, host_root, host_path, allow_link), "");
  if (!opened) return opened;
  Source s = std::move(*opened);
  if (!legacy) {
    // CAP_SYS_ADMIN: clone the host path as a detached bind mount and seal it before it is ever attached.
    int tree = ::open_tree(s.fd.get(), "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH);
    if (tree < 0) {
      if (errno == ENOSYS) return std::optional<Source>(std::move(s));  // old kernel: the legacy path
      return Error::from_errno(errno, "open_tree " + host_path);
    }
    s.tree = UniqueFd(tree);
    struct mount_attr attr {};
    attr.attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;
    if (::mount_setattr(s.tree.get(), "", AT_EMPTY_PATH, &attr, sizeof attr) != 0) {
      return Error::from_errno(errno, "mount_setattr " + host_path);
    }
  }
  return std::optional<Source>(std::move(s));
}

std::vector<std::string> components(const std::string& path) {
  std::vector<std::string> out;
  std::istringstream in(path);
  std::string c;
  while (std::getline(in, c, '/')) {
    if (!c.empty()) out.push_back(c);
  }
  return out;
}

// Makes `path` exist inside the root (parents as directories, the last as a directory or an empty file) and
// returns an O_PATH fd of it. Every step resolves inside the root; a final symlink is refused.
Result<UniqueFd> ensure_target(int root, const std::string& path, bool dir) {
  auto parts = components(path);
  std::string prefix;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    bool last = i + 1 == parts.size();
    UniqueFd parent;
    { ASCEND_ASSIGN(parent, open_in_root(root, prefix.empty() ? "/" : prefix, O_PATH | O_DIRECTORY), ""); }
    const std::string& name = parts[i];
    prefix += "/" + name;
    if (!last || dir) {
      if (::mkdirat(parent.get(), name.c_str(), 0755) != 0 && errno != EEXIST) {
        return Error::from_errno(errno, "mkdir " + prefix + " in the container");
      }
    } else {
      UniqueFd f(
          ::openat(parent.get(), name.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, 0644));
      if (!f.valid() && errno != EEXIST)
        return Error::from_errno(errno, "create " + prefix + " in the container");
    }
  }
  ASCEND_ASSIGN(UniqueFd fd, open_in_root(root, path, O_PATH | O_NOFOLLOW),
                "open " + path + " in the container");
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return Error::from_errno(errno, "stat " + path + " in the container");
  if (S_ISLNK(st.st_mode)) {
    return Error(ELOOP, path + " is a symbolic link in the image; refusing to mount over it");
  }
  if (dir != S_ISDIR(st.st_mode)) {
    return Error(dir ? ENOTDIR : EISDIR, path + " in the image is " +
                                             (dir ? "not a directory" : "a directory") +
                                             " but the host's is " + (dir ? "one" : "a file"));
  }
  struct statfs fs {};
  if (::fstatfs(fd.get(), &fs) != 0) return Error::from_errno(errno, "statfs " + path + " in the container");
  if (fs.f_type == kProcSuperMagic || fs.f_type == kSysfsMagic) {
    return Error(EPERM, path + " resolves into procfs or sysfs in the container; refusing to mount there");
  }
  return fd;
}

Status attach(Source& s, int root, int host_root, bool legacy) {
  const std::string& path = s.entry->path;
  ASCEND_ASSIGN(UniqueFd target, ensure_target(root, path, s.is_dir), "mount " + path);
  if (s.tree.valid() && !legacy) {
    // CAP_SYS_ADMIN: attach the sealed clone onto the fd of the resolved target.
    if (::move_mount(s.tree.get(), "", target.get(), "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) !=
        0) {
      return Error::from_errno(errno, "move_mount " + path);
    }
    return {};
  }
  // Legacy path: before pivot_root the container's namespace still shows the host's tree, and mount(2) binds
  // only from the caller's namespace. Reopen the source there (`host_root` was opened after setns) and insist
  // it is the very file opened in the host's namespace.
  ASCEND_ASSIGN(UniqueFd src, open_in_root(host_root, path, s.open_flags), "mount " + path);
  struct stat st {};
  if (::fstat(src.get(), &st) != 0 || st.st_dev != s.dev || st.st_ino != s.ino) {
    return Error(ESTALE, "mount " + path + ": the host file changed while it was being mounted");
  }
  if (::mount(fd_path(src.get()).c_str(), fd_path(target.get()).c_str(), nullptr, MS_BIND, nullptr) != 0) {
    return Error::from_errno(errno, "bind mount " + path);
  }
  ASCEND_ASSIGN(UniqueFd mounted, open_in_root(root, path, O_PATH | O_NOFOLLOW), "reopen " + path);
  if (::mount(nullptr, fd_path(mounted.get()).c_str(), nullptr,
              MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, nullptr) != 0) {
    return Error::from_errno(errno, "remount read-only " + path);
  }
  return {};
}

std::string basename_of(const std::string& p) {
  return p.substr(p.rfind('/') + 1);
}

// CAP_MKNOD: the node the runtime did not create (the hook registered without the shim).
Status make_node(int root, const DeviceEntry& d) {
  if (d.path.rfind("/dev/", 0) != 0 || d.path.find('/', 5) != std::string::npos) {
    return Error::invalid("device path " + d.path + " is not directly under /dev");
  }
  ASCEND_ASSIGN(UniqueFd dev, open_in_root(root, "/dev", O_PATH | O_DIRECTORY), "open /dev in the container");
  std::string name = basename_of(d.path);
  mode_t old = ::umask(0);
  int rc = ::mknodat(dev.get(), name.c_str(), S_IFCHR | (d.mode & 0777), makedev(d.major, d.minor));
  int err = errno;
  ::umask(old);
  if (rc != 0 && err != EEXIST) return Error::from_errno(err, "mknod " + d.path + " in the container");
  return {};
}

Status check_node(int root, const DeviceEntry& d) {
  ASCEND_ASSIGN(UniqueFd fd, open_in_root(root, d.path, O_PATH | O_NOFOLLOW), "device " + d.path);
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return Error::from_errno(errno, "stat " + d.path + " in the container");
  dev_t want = makedev(d.major, d.minor);
  if (!S_ISCHR(st.st_mode) || st.st_rdev != want) {
    return Error(EPERM, d.path + " in the container is not the NPU device c " + rdev_text(want) +
                            (S_ISCHR(st.st_mode) ? " (found c " + rdev_text(st.st_rdev) + ")"
                                                 : " (not a char device)"));
  }
  return {};
}

Status allow_in_cgroup(int pid, const std::vector<DeviceEntry>& nodes) {
  if (nodes.empty()) return {};
  ASCEND_ASSIGN(std::string dir, devices_cgroup_dir(pid), "");
  std::string file = dir + "/devices.allow";
  for (const auto& d : nodes) {
    std::string rule = "c " + std::to_string(d.major) + ":" + std::to_string(d.minor) + " rwm";
    UniqueFd fd(::open(file.c_str(), O_WRONLY | O_CLOEXEC));
    if (!fd.valid()) return Error::from_errno(errno, "open " + file);
    if (::write(fd.get(), rule.data(), rule.size()) != static_cast<ssize_t>(rule.size())) {
      return Error::from_errno(errno, fmt::format("write '{}' to {}", rule, file));
    }
  }
  return {};
}

}  // namespace

Result<std::vector<DeviceEntry>> check_host_devices(const std::vector<DeviceEntry>& devices,
                                                    const npu::DeviceSnapshot& host,
                                                    const npu::DeviceQuery& dq) {
  // The node as the snapshot read it, when it read the node itself.
  auto scanned = [&](const DeviceEntry& d) -> const npu::DeviceNode* {
    if (!host.nodes_checked) return nullptr;
    for (const auto* list : {&host.chip_nodes, &host.vnpu_nodes, &host.control}) {
      for (const auto& n : *list) {
        if (n.path == d.host_path && n.major == d.major && n.minor == d.minor) return &n;
      }
    }
    return nullptr;
  };
  std::vector<DeviceEntry> out;
  for (auto d : devices) {
    if (const npu::DeviceNode* n = scanned(d)) {
      d.mode = n->mode;
      out.push_back(std::move(d));
      continue;
    }
    std::string p = dq.host_path(d.host_path);
    struct stat st {};
    if (::lstat(p.c_str(), &st) != 0) {
      return Error::from_errno(errno, "host device " + d.host_path + " (" + p + ")");
    }
    dev_t want = makedev(d.major, d.minor);
    if (!S_ISCHR(st.st_mode) || st.st_rdev != want) {
      return Error(ENODEV, "host device " + p + " is not c " + rdev_text(want) + " as the driver reports");
    }
    d.mode = st.st_mode & 07777;
    out.push_back(std::move(d));
  }
  return out;
}

Result<std::vector<BindMount>> resolve_bind_mounts(const InjectionPlan& plan, const npu::DeviceQuery& dq) {
  std::string host_root_path = dq.host_path("/");
  UniqueFd host_root(::open(host_root_path.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!host_root.valid()) return Error::from_errno(errno, "open host root " + host_root_path);
  auto real_path = [](int fd, const std::string& what) -> Result<std::string> {
    char buf[PATH_MAX];
    ssize_t n = ::readlink(fd_path(fd).c_str(), buf, sizeof buf);
    if (n <= 0 || n >= static_cast<ssize_t>(sizeof buf) || buf[0] != '/') {
      return Error::from_errno(n < 0 ? errno : ENAMETOOLONG, "resolve " + what);
    }
    return std::string(buf, static_cast<std::size_t>(n));
  };
  // Where the host root really is (the config may name it through a link), read once.
  ASCEND_ASSIGN(std::string real_root, real_path(host_root.get(), host_root_path), "");
  if (real_root == "/") real_root.clear();
  std::vector<BindMount> out;
  for (const auto& m : plan.mounts) {
    // A driver path with no symbolic link on its way (the common case) is exactly the real root joined
    // with the entry (mount lists hold clean absolute paths), and not a link itself: open_source would
    // refuse nothing and its path needs no reading back. Anything else (a link, or not on the host) takes
    // open_source's way, with its checks and messages.
    if (open_beneath_without_links(host_root.get(), m.path, O_PATH)) {
      out.push_back({real_root + m.path, m.path});
      continue;
    }
    std::string host_path = dq.host_path(m.path);
    ASCEND_ASSIGN(std::optional<Source> s, open_source(m, host_root.get(), host_path, plan.allow_link), "");
    if (!s) continue;
    ASCEND_ASSIGN(std::string real, real_path(s->fd.get(), host_path), "");
    out.push_back({std::move(real), m.path});
  }
  return out;
}

Result<std::string> parse_devices_cgroup(std::string_view proc_cgroup, std::string_view mountinfo) {
  std::istringstream in{std::string(proc_cgroup)};
  std::string line;
  std::string rel;
  bool found = false;
  while (std::getline(in, line)) {
    auto a = line.find(':');
    auto b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    std::string ctrls = fmt::format(",{},", std::string_view(line).substr(a + 1, b - a - 1));
    if (ctrls.find(",devices,") != std::string::npos) {
      rel = line.substr(b + 1);
      found = true;
    }
  }
  if (!found) {
    return Error(ENOTSUP,
                 "this host uses cgroup v2, where only the runtime can allow devices: register "
                 "ascend-docker-runtime as the container runtime instead of the bare hook");
  }
  std::istringstream mis{std::string(mountinfo)};
  while (std::getline(mis, line)) {
    auto sep = line.find(" - ");
    if (sep == std::string::npos) continue;
    std::istringstream l(line.substr(0, sep));
    std::string id, parent, devno, root, mountpoint;
    l >> id >> parent >> devno >> root >> mountpoint;
    std::istringstream r(line.substr(sep + 3));
    std::string fstype, source, opts;
    r >> fstype >> source >> opts;
    if (fstype != "cgroup" || fmt::format(",{},", opts).find(",devices,") == std::string::npos) continue;
    if (root != "/" && rel.rfind(root, 0) != 0) continue;
    std::string sub = root == "/" ? rel : rel.substr(root.size());
    return mountpoint + sub;
  }
  return Error::not_found("no cgroup v1 devices hierarchy is mounted");
}

Result<std::string> devices_cgroup_dir(int pid) {
  ASCEND_ASSIGN(std::string cgroup, read_file("/proc/" + std::to_string(pid) + "/cgroup", 1U << 16),
                "find the container's device cgroup");
  ASCEND_ASSIGN(std::string mountinfo, read_file("/proc/self/mountinfo", 4U << 20),
                "find the devices cgroup mount");
  return parse_devices_cgroup(cgroup, mountinfo);
}

Status execute(const InjectionPlan& plan, const npu::DeviceQuery& dq, const ExecTarget& target) {
  std::string host_root_path = dq.host_path("/");
  UniqueFd host_root(::open(host_root_path.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!host_root.valid()) return Error::from_errno(errno, "open host root " + host_root_path);

  std::vector<Source> sources;
  for (const auto& m : plan.mounts) {
    ASCEND_ASSIGN(
        std::optional<Source> s,
        prepare_source(m, host_root.get(), dq.host_path(m.path), plan.allow_link, target.legacy_mounts), "");
    if (s) sources.push_back(std::move(*s));
  }
  // Before any device rule: the pid must be a container's, not a host process.
  ASCEND_CHECK(open_target_namespace(target.pid), "enter the container");
  // CAP_DAC_OVERRIDE is not needed: the devices cgroup files are root's.
  ASCEND_CHECK(allow_in_cgroup(target.pid, target.create_nodes), "allow devices");

  ASCEND_ASSIGN(MountNamespace ns, MountNamespace::enter(target.pid), "enter the container");
  UniqueFd root(::open(target.rootfs.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!root.valid()) return Error::from_errno(errno, "open rootfs " + target.rootfs);

  for (const auto& d : target.create_nodes) ASCEND_CHECK(make_node(root.get(), d), "inject device");
  for (const auto& d : plan.devices) ASCEND_CHECK(check_node(root.get(), d), "inject device");
  UniqueFd ns_host_root;
  bool need_legacy =
      std::any_of(sources.begin(), sources.end(), [](const Source& s) { return !s.tree.valid(); });
  if (need_legacy) {
    ns_host_root = UniqueFd(::open(host_root_path.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    if (!ns_host_root.valid())
      return Error::from_errno(errno, "open host root " + host_root_path + " in the container");
  }
  for (auto& s : sources) {
    ASCEND_CHECK(attach(s, root.get(), ns_host_root.get(), target.legacy_mounts), "inject driver files");
  }
  spdlog::info("injected {}: {} mounts attached", describe(plan), sources.size());
  return {};
}

}  // namespace ascend::hook
