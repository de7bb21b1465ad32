// The attack suite (SECURITY.md): what an image, a container's environment, a careless administrator or a
// confused runtime can try against the shim and the hook, each run with real runc in both injection modes.
// Every attack must fail closed (the container does not start, one line says why) or be neutralised (the
// container starts and gets nothing it should not); either way the host's files, modes and mount table are
// the same afterwards. Root only.
#include <fcntl.h>
#include <ftw.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "ascend/common/dev_char.h"
#include "runc_fixture.h"
#include "support.h"

namespace ascend::hook {
namespace {

// What the host looks like from outside any container: type, mode, owner, size and content of every file of
// the emulated host and of the real files an escape would go for, and the host's mount table where a
// container's mounts could leak (the test's folder, /etc, /usr, /dev, /var/run).
struct HostSnapshot {
  std::map<std::string, std::string> files;
  std::set<std::string> mounts;
  bool operator==(const HostSnapshot&) const = default;
};

std::string describe_file(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return "absent";
  std::ostringstream out;
  out << std::oct << st.st_mode << std::dec << " " << st.st_uid << ":" << st.st_gid << " " << st.st_size;
  if (S_ISREG(st.st_mode) && st.st_size < (1 << 20)) out << " " << std::hash<std::string>{}(slurp(path));
  if (S_ISLNK(st.st_mode)) out << " -> " << std::filesystem::read_symlink(path).string();
  return out.str();
}

HostSnapshot snapshot_host(const std::string& host_root, const std::vector<std::string>& extra) {
  HostSnapshot s;
  static std::map<std::string, std::string>* files = nullptr;
  files = &s.files;
  ::nftw(
      host_root.c_str(),
      [](const char* p, const struct stat*, int, struct FTW*) {
        (*files)[p] = describe_file(p);
        return 0;
      },
      32, FTW_PHYS);
  for (const char* p : {"/etc/shadow", "/etc/passwd", "/etc/group", "/etc/hosts", "/etc", "/dev/davinci0",
                        "/dev/davinci_manager", "/usr/local/Ascend", "/var/run/ascend-container-devices"}) {
    s.files[p] = describe_file(p);
  }
  for (const auto& p : extra) s.files[p] = describe_file(p);
  std::istringstream mi(slurp("/proc/self/mountinfo"));
  std::string line;
  while (std::getline(mi, line)) {
    std::istringstream l(line);
    std::string id, parent, devno, root, mp, opts;
    l >> id >> parent >> devno >> root >> mp >> opts;
    for (const std::string& watched :
         {host_root, std::string("/etc"), std::string("/usr"), std::string("/dev"),
          std::string("/var/run/ascend"), std::string("/run/ascend")}) {
      if (mp.rfind(watched, 0) == 0)
        s.mounts.insert(std::string(mp).append(" ").append(root).append(" ").append(opts));
    }
  }
  return s;
}

void expect_same_host(const HostSnapshot& before, const HostSnapshot& after) {
  for (const auto& [path, what] : before.files) {
    auto it = after.files.find(path);
    EXPECT_TRUE(it != after.files.end() && it->second == what)
        << path << " changed: " << what << " -> " << (it == after.files.end() ? "gone" : it->second);
  }
  for (const auto& [path, what] : after.files) {
    // The /dev/char/<major>:<minor> links (and their record) are the runtime's by design (systemd's cgroup
    // driver needs them; docs/runtime.md): the only thing a container start may add under the host root.
    const std::string record_path = std::string("/host/") + kDevCharRecord;  // and its .lock
    const bool record = path.ends_with("/host/run") ||
                        path.ends_with(record_path.substr(0, record_path.rfind('/'))) ||
                        path.find(record_path) != std::string::npos;
    if (record || path.find("/host/dev/char") != std::string::npos) continue;
    EXPECT_EQ(before.files.count(path), 1U) << path << " appeared on the host: " << what;
  }
  EXPECT_EQ(before.mounts, after.mounts) << "the host's mount table changed";
}

enum class Want {
  kRefused,      // the container does not start; stderr holds `message` in one line
  kNeutralised,  // the container starts; `check` judges what it got
  kEither,       // either, as long as the host is unchanged and, when it starts, `check` holds
};

class AttackTest : public RuncTest {
 public:  // for the attack table's functions
  using RuncFixture::config_;
  using RuncFixture::tmp_;

  // A host folder an image symlink points at: nothing may ever appear in it.
  std::string host_folder() {
    std::string d = tmp_ / "host-folder";
    ::mkdir(d.c_str(), 0755);
    return d;
  }
  // "../../../..<abs>": a relative symlink target that climbs out of the rootfs to `abs` on the host.
  static std::string climbing(const std::string& abs) { return "../../../../../../../../.." + abs; }

  std::string rewrite_config(const std::string& extra) {
    config_ = write_hook_config(
        tmp_.path(), tmp_ / "host",
        {{"links", "/etc/ascend-link.conf\n"}, {"sparse", "/usr/local/dcmi\n/opt/not-on-this-host\n"}},
        injection(), extra);
    return config_;
  }
};

INSTANTIATE_TEST_SUITE_P(Injection, AttackTest, ::testing::Values("spec", "hook"),
                         [](const auto& info) { return info.param; });

struct Attack {
  std::string name;
  std::vector<std::string> env;
  Want want;
  std::string message;                                          // kRefused: a part of the one line
  std::function<void(AttackTest&, Bundle&)> prepare = nullptr;  // changes the image, the host or the config
  std::function<void(const Probe&)> check = nullptr;            // what a started container may hold
  std::function<void()> undo = nullptr;                         // restores the host set-up for the next case
  bool hook_only = false;                                       // meaningful with injection: hook only
};

// Started with exactly chip 0, its control nodes and the read-only driver files.
void only_chip0(const Probe& p) {
  EXPECT_EQ(p.devices.count("/dev/davinci0"), 1U);
  for (const auto& [dev, what] : p.devices) {
    EXPECT_TRUE(dev == "/dev/davinci0" || dev == "/dev/davinci_manager" || dev == "/dev/devmm_svm" ||
                dev == "/dev/hisi_hdc")
        << dev << " " << what;
  }
}

void no_npu(const Probe& p) {
  EXPECT_TRUE(p.devices.empty()) << p.devices.size() << " NPU nodes";
  EXPECT_EQ(p.mounts.count("/usr/local/Ascend/driver/lib64"), 0U);
}

TEST_P(AttackTest, EveryAttackFailsClosedOrIsNeutralisedAndTheHostStaysAsItWas) {
  const std::string canary = ASCEND_CANARY_LIB;
  const std::string lists = tmp_ / "lists";
  const std::string shadow_link = tmp_ / "host/etc/ascend-shadow.conf";
  const std::vector<Attack> attacks = {
      {"the image's /dev is a symlink to a host folder",
       {"ASCEND_VISIBLE_DEVICES=0"},
       Want::kRefused,
       "the image's /dev is a symbolic link",
       [](AttackTest& t, Bundle& b) {
         ASSERT_EQ(::symlink(climbing(t.host_folder()).c_str(), (b.rootfs() + "/dev").c_str()), 0);
       },
       only_chip0},
      {"the image's /usr/local/Ascend is a symlink to /etc",
       {"ASCEND_VISIBLE_DEVICES=0"},
       Want::kEither,
       "",
       [](AttackTest&, Bundle& b) {
         ASSERT_EQ(testing::run({"mkdir", "-p", b.rootfs() + "/usr/local", b.rootfs() + "/etc"}).exit_code,
                   0);
         ASSERT_EQ(::symlink("/etc", (b.rootfs() + "/usr/local/Ascend").c_str()), 0);
       },
       only_chip0},
      {"the image's /usr/local/Ascend climbs out of the rootfs",
       {"ASCEND_VISIBLE_DEVICES=0"},
       Want::kEither,
       "",
       [](AttackTest& t, Bundle& b) {
         ASSERT_EQ(testing::run({"mkdir", "-p", b.rootfs() + "/usr/local"}).exit_code, 0);
         ASSERT_EQ(::symlink(climbing(t.host_folder()).c_str(), (b.rootfs() + "/usr/local/Ascend").c_str()),
                   0);
       },
       only_chip0},
      {"LD_PRELOAD and LD_LIBRARY_PATH in the image",
       {"ASCEND_VISIBLE_DEVICES=0", "LD_PRELOAD=" + canary, "LD_LIBRARY_PATH=" + tmp_.path()},
       Want::kNeutralised,
       "",
       [](AttackTest&, Bundle&) { ::unlink(ASCEND_CANARY_FILE); },
       [](const Probe& p) {
         only_chip0(p);
         EXPECT_NE(::access(ASCEND_CANARY_FILE, F_OK), 0)
             << "the shim or the hook loaded the image's LD_PRELOAD";
       }},
      {"ASCEND_VISIBLE_DEVICES with ../", {"ASCEND_VISIBLE_DEVICES=../0"}, Want::kRefused, "'../0'"},
      {"ASCEND_VISIBLE_DEVICES with ../../dev/sda",
       {"ASCEND_VISIBLE_DEVICES=0,../../dev/sda"},
       Want::kRefused,
       "neither an id"},
      {"a huge id", {"ASCEND_VISIBLE_DEVICES=99999999999999999999"}, Want::kRefused, "neither an id"},
      {"a huge range", {"ASCEND_VISIBLE_DEVICES=0-999999"}, Want::kRefused, "no device 8"},
      {"a negative id", {"ASCEND_VISIBLE_DEVICES=-1"}, Want::kRefused, "ASCEND_VISIBLE_DEVICES=-1"},
      {"100 000 entries, all valid",
       {"ASCEND_VISIBLE_DEVICES=" +
        [] {
          std::string v;
          for (int i = 0; i < 100000; ++i) v += i == 0 ? "0" : ",0";
          return v;
        }()},
       Want::kEither,  // the shim accepts it; the kernel may refuse an environment string this long
       "",
       nullptr,
       only_chip0},
      {"100 000 distinct entries",
       {"ASCEND_VISIBLE_DEVICES=" +
        [] {
          std::string v;
          for (int i = 0; i < 100000; ++i) v += (i == 0 ? "" : ",") + std::to_string(i);
          return v;
        }()},
       Want::kRefused,
       "no device 8"},
      {"U+FFFD (how Go engines write bytes that are not UTF-8)",
       {"ASCEND_VISIBLE_DEVICES=0\xef\xbf\xbd"},
       Want::kRefused,
       "neither an id"},
      {"a newline to forge a second log line",
       {"ASCEND_VISIBLE_DEVICES=0\nlevel=info msg=ok"},
       Want::kRefused,
       "\\x0a"},
      {"ASCEND_RUNTIME_MOUNTS=../../etc/shadow",
       {"ASCEND_VISIBLE_DEVICES=0", "ASCEND_RUNTIME_MOUNTS=../../etc/shadow"},
       Want::kRefused,
       "not a mount-list name"},
      {"ASCEND_RUNTIME_MOUNTS=/etc/shadow",
       {"ASCEND_VISIBLE_DEVICES=0", "ASCEND_RUNTIME_MOUNTS=/etc/shadow"},
       Want::kRefused,
       "not a mount-list name"},
      {"ASCEND_RUNTIME_MOUNTS=..",
       {"ASCEND_VISIBLE_DEVICES=0", "ASCEND_RUNTIME_MOUNTS=base,.."},
       Want::kRefused,
       "not a mount-list name"},
      {"a mount list writable by group",
       {"ASCEND_VISIBLE_DEVICES=0"},
       Want::kRefused,
       "base.list is mode 0460",
       [&](AttackTest&, Bundle&) { ::chmod((lists + "/base.list").c_str(), 0460); },
       nullptr,
       [&] { ::chmod((lists + "/base.list").c_str(), 0440); }},
      {"a mount list owned by another user",
       {"ASCEND_VISIBLE_DEVICES=0"},
       Want::kRefused,
       "owned by uid 65534",
       [&](AttackTest&, Bundle&) { ASSERT_EQ(::chown((lists + "/base.list").c_str(), 65534, 65534), 0); },
       nullptr,
       [&] { EXPECT_EQ(::chown((lists + "/base.list").c_str(), 0, 0), 0); }},
      {"the config writable by others",
       {"ASCEND_VISIBLE_DEVICES=0"},
       Want::kRefused,
       "config.yaml is mode 0642",
       [](AttackTest& t, Bundle&) { ::chmod(t.config_.c_str(), 0642); },
       nullptr,
       [this] { ::chmod(config_.c_str(), 0640); }},
      {"a hook binary writable by group",
       {"ASCEND_VISIBLE_DEVICES=0"},
       Want::kRefused,
       "hook-copy is mode 0775",
       [](AttackTest& t, Bundle&) {
         std::string copy = t.tmp_ / "hook-copy";
         ::unlink(copy.c_str());
         spit(copy, slurp(bin("ascend-docker-hook")));
         ::chmod(copy.c_str(), 0775);
         t.rewrite_config("hook-path: " + copy + "\n");
       },
       nullptr,
       [this] { rewrite_config(""); },
       true},
      {"a list entry that is a symlink to /etc/shadow, planted by another user",
       {"ASCEND_VISIBLE_DEVICES=0", "ASCEND_RUNTIME_MOUNTS=shadow", "ASCEND_ALLOW_LINK=True"},
       Want::kRefused,
       "symbolic link owned by uid 65534",
       [&](AttackTest& t, Bundle&) {
         ASSERT_EQ(::symlink("/etc/shadow", shadow_link.c_str()), 0);
         ASSERT_EQ(::lchown(shadow_link.c_str(), 65534, 65534), 0);
         spit(lists + "/shadow.list", "/etc/ascend-shadow.conf\n");
         ::chmod((lists + "/shadow.list").c_str(), 0440);
         (void)t;
       },
       nullptr,
       [&] { ::unlink(shadow_link.c_str()); }},
      {"a root's list entry that is a symlink to /etc/shadow resolves inside the host root",
       {"ASCEND_VISIBLE_DEVICES=0", "ASCEND_RUNTIME_MOUNTS=shadow", "ASCEND_ALLOW_LINK=True"},
       Want::kNeutralised,
       "",
       [&](AttackTest&, Bundle&) { ASSERT_EQ(::symlink("/etc/shadow", shadow_link.c_str()), 0); },
       [](const Probe& p) {
         only_chip0(p);
         EXPECT_EQ(p.mounts.count("/etc/ascend-shadow.conf"), 0U) << "the host's /etc/shadow was mounted";
       },
       [&] { ::unlink(shadow_link.c_str()); }},
      {"a list entry linking to a file another user owns",
       {"ASCEND_VISIBLE_DEVICES=0", "ASCEND_RUNTIME_MOUNTS=shadow", "ASCEND_ALLOW_LINK=True"},
       Want::kRefused,
       "links to a file owned by uid 65534",
       [&](AttackTest& t, Bundle&) {
         spit(t.tmp_ / "host/etc/planted", "x\n");
         ASSERT_EQ(::chown((t.tmp_ / "host/etc/planted").c_str(), 65534, 65534), 0);
         ASSERT_EQ(::symlink("planted", shadow_link.c_str()), 0);
       },
       nullptr,
       [&] {
         ::unlink(shadow_link.c_str());
         ::unlink((tmp_ / "host/etc/planted").c_str());
       }},
      {"a list entry that is a symlink, without ASCEND_ALLOW_LINK",
       {"ASCEND_VISIBLE_DEVICES=0", "ASCEND_RUNTIME_MOUNTS=shadow"},
       Want::kRefused,
       "is a symbolic link on the host",
       [&](AttackTest&, Bundle&) { ASSERT_EQ(::symlink("/etc/shadow", shadow_link.c_str()), 0); },
       nullptr,
       [&] { ::unlink(shadow_link.c_str()); }},
      {"a config.json of 100 MB",
       {"ASCEND_VISIBLE_DEVICES=0"},
       Want::kRefused,
       "larger than",
       [](AttackTest&, Bundle& b) {
         b.spec()["annotations"]["padding"] = std::string(100U << 20, 'x');
         b.save();
       }},
      {"a config.json nested 100 000 deep",
       {"ASCEND_VISIBLE_DEVICES=0"},
       Want::kRefused,
       "nests deeper than",
       [](AttackTest&, Bundle& b) {
         std::string text = b.spec().dump();
         text.insert(text.size() - 1,
                     R"(,"annotations":{"x":)" + std::string(100000, '[') + std::string(100000, ']') + "}");
         spit(b.config_path(), text);
       }},
      {"a wrong-typed hook path in config.json",
       {"ASCEND_VISIBLE_DEVICES=0"},
       Want::kRefused,
       "hooks.prestart[0].path is not a string",
       [](AttackTest&, Bundle& b) {
         b.spec()["hooks"]["prestart"] = nlohmann::json::array({{{"path", 5}}});
         b.save();
       }},
      {"a read-only rootfs",
       {"ASCEND_VISIBLE_DEVICES=0"},
       Want::kEither,
       "",
       [](AttackTest&, Bundle& b) {
         b.spec()["root"]["readonly"] = true;
         b.save();
       },
       only_chip0},
      {"a container running as a non-root user",
       {"ASCEND_VISIBLE_DEVICES=0"},
       Want::kNeutralised,
       "",
       [](AttackTest&, Bundle& b) {
         b.spec()["process"]["user"] = {{"uid", 1000}, {"gid", 1000}};
         b.save();
       },
       [](const Probe& p) {
         only_chip0(p);
         ASSERT_EQ(p.mounts.count("/usr/local/Ascend/driver/lib64"), 1U);
         EXPECT_EQ(p.mounts.at("/usr/local/Ascend/driver/lib64").rfind("ro,nosuid,nodev", 0), 0U);
         EXPECT_NE(p.write_error, "") << "a non-root user wrote into the driver tree";
       }},
      {"a user-namespaced container",
       {"ASCEND_VISIBLE_DEVICES=0"},
       Want::kEither,
       "",
       [](AttackTest&, Bundle& b) {
         b.spec()["linux"]["namespaces"].push_back({{"type", "user"}});
         b.spec()["linux"]["uidMappings"] = {{{"containerID", 0}, {"hostID", 200000}, {"size", 65536}}};
         b.spec()["linux"]["gidMappings"] = {{{"containerID", 0}, {"hostID", 200000}, {"size", 65536}}};
         b.save();
       },
       only_chip0},
      {"the image has a file at /dev/davinci0",
       {"ASCEND_VISIBLE_DEVICES=0"},
       Want::kNeutralised,
       "",
       [](AttackTest&, Bundle& b) {
         ::mkdir((b.rootfs() + "/dev").c_str(), 0755);
         spit(b.rootfs() + "/dev/davinci0", "not a device\n");
       },
       [](const Probe& p) {
         only_chip0(p);
         EXPECT_EQ(p.devices.at("/dev/davinci0").rfind("c ", 0), 0U);
       }},
      {"the image has a symlink at /dev/davinci0",
       {"ASCEND_VISIBLE_DEVICES=0"},
       Want::kNeutralised,
       "",
       [](AttackTest&, Bundle& b) {
         ::mkdir((b.rootfs() + "/dev").c_str(), 0755);
         ASSERT_EQ(::symlink("/etc/shadow", (b.rootfs() + "/dev/davinci0").c_str()), 0);
       },
       [](const Probe& p) {
         only_chip0(p);
         EXPECT_EQ(p.devices.at("/dev/davinci0").rfind("c ", 0), 0U);
       }},
      {"an image-baked all with accept-env-when-unprivileged: false",
       {"ASCEND_VISIBLE_DEVICES=all"},
       Want::kNeutralised,
       "",
       [](AttackTest& t, Bundle&) { t.rewrite_config("accept-env-when-unprivileged: false\n"); },
       no_npu,
       [this] { rewrite_config(""); }},
  };
  for (const auto& a : attacks) {
    if (a.hook_only && !by_hook()) continue;
    SCOPED_TRACE(a.name);
    auto b = bundle(a.env);
    HostSnapshot before = snapshot_host(tmp_ / "host", {host_folder(), lists + "/base.list", config_});
    if (a.prepare) a.prepare(*this, *b);
    if (HasFatalFailure()) return;
    std::string id = unique_id("attack");
    auto o = run(*b, id);
    Probe p = parse_probe(o.out);
    if (a.want == Want::kRefused || (a.want == Want::kEither && o.exit_code != 0)) {
      EXPECT_NE(o.exit_code, 0) << o.out;
      EXPECT_FALSE(p.started) << o.out;
      EXPECT_NE(runner_.runc({"state", id}).exit_code, 0) << "a refused container exists";
      if (!a.message.empty()) {
        EXPECT_NE(o.err.find(a.message), std::string::npos) << o.err;
      }
      if (a.want == Want::kRefused && !a.message.empty()) {
        // The message is on one line with the program's name (runc may wrap the hook's line in its own).
        bool one_line = false;
        std::istringstream lines(o.err);
        for (std::string l; std::getline(lines, l);) {
          if (l.find(a.message) != std::string::npos &&
              (l.find("ascend-docker-runtime: ") != std::string::npos ||
               l.find("ascend-docker-hook: ") != std::string::npos)) {
            one_line = true;
          }
        }
        EXPECT_TRUE(one_line) << o.err;
      }
    } else {
      ASSERT_EQ(o.exit_code, 0) << o.err;
      ASSERT_TRUE(p.started) << o.out << o.err;
      if (a.check) a.check(p);
    }
    if (a.undo) a.undo();
    runner_.remove(id);
    HostSnapshot after = snapshot_host(tmp_ / "host", {host_folder(), lists + "/base.list", config_});
    expect_same_host(before, after);
    std::string landed;
    for (const auto& e : std::filesystem::recursive_directory_iterator(host_folder())) {
      landed += e.path().string() + " ";
    }
    EXPECT_EQ(landed, "") << "something was created in the host folder";
    std::filesystem::remove_all(host_folder());
  }
  ::unlink(ASCEND_CANARY_FILE);
}

// CVE-2024-0132's shape: a path component the hook (or runc) resolves is swapped for a symlink to a host
// folder while the container starts, many times over. Whatever wins the race, nothing lands on the host.
TEST_P(AttackTest, APathComponentSwappedForASymlinkDuringTheStartNeverReachesTheHost) {
  const std::string target = host_folder();
  HostSnapshot before = snapshot_host(tmp_ / "host", {target});
  const int rounds = 12;
  int started = 0;
  for (int round = 0; round < rounds; ++round) {
    auto b = bundle({"ASCEND_VISIBLE_DEVICES=0"});
    const std::string local = b->rootfs() + "/usr/local";
    const std::string real = b->rootfs() + "/usr/local-real";
    const std::string link = b->rootfs() + "/usr/local-link";
    ASSERT_EQ(testing::run({"mkdir", "-p", real, b->rootfs() + "/usr"}).exit_code, 0);
    ASSERT_EQ(::symlink(round % 2 == 0 ? climbing(target).c_str() : target.c_str(), link.c_str()), 0);
    ASSERT_EQ(::symlink("local-real", local.c_str()), 0);
    std::atomic<bool> stop{false};
    std::thread racer([&] {
      // Swap /usr/local between a folder of the image and a symlink out of it, atomically, as fast as we can.
      const std::string tmp_link = b->rootfs() + "/usr/local-swap";
      bool to_link = true;
      while (!stop.load()) {
        ::unlink(tmp_link.c_str());
        if (::symlink(to_link ? std::filesystem::read_symlink(link).c_str() : "local-real",
                      tmp_link.c_str()) == 0) {
          ::rename(tmp_link.c_str(), local.c_str());
        }
        to_link = !to_link;
      }
    });
    auto o = run(*b, unique_id("race"));
    stop = true;
    racer.join();
    if (o.exit_code == 0) ++started;
    std::error_code ec;
    EXPECT_TRUE(std::filesystem::is_empty(target, ec)) << "round " << round << ": the host folder got files";
  }
  HostSnapshot after = snapshot_host(tmp_ / "host", {target});
  expect_same_host(before, after);
  RecordProperty("started", started);
}

// A confused or hostile caller hands the hook an OCI state whose pid is not the container's.
TEST_F(RuncHookModeTest, AnOciStateWithAForeignPidIsRefused) {
  auto b = bundle({"ASCEND_VISIBLE_DEVICES=0"});
  int dead = ::fork();
  if (dead == 0) ::_exit(0);
  ::waitpid(dead, nullptr, 0);
  int unrelated = spawn_background({"sleep", "60"}, tmp_ / "sleep.log");
  ASSERT_GT(unrelated, 0);
  // pid 1 may be outside what the hook can open (in a container, another user namespace's init): refused
  // either way, before any mount or device rule.
  const std::pair<int, std::vector<std::string>> cases[] = {
      {1, {"shares the host's mount namespace", "open /proc/1/ns/mnt"}},
      {unrelated, {"shares the host's mount namespace"}},
      {dead, {"is the container still there?"}},
  };
  HostSnapshot before = snapshot_host(tmp_ / "host", {});
  for (const auto& [pid, want] : cases) {
    SCOPED_TRACE(pid);
    nlohmann::json state = {
        {"ociVersion", "1.0.2"}, {"id", "x"}, {"status", "created"}, {"pid", pid}, {"bundle", b->dir()}};
    RunOptions opts;
    opts.input = state.dump();
    auto o = testing::run({bin("ascend-docker-hook"), "--config", config_, "prestart"}, opts);
    EXPECT_EQ(o.exit_code, 1) << o.err;
    EXPECT_TRUE(std::any_of(want.begin(), want.end(), [&](const std::string& w) {
      return o.err.find(w) != std::string::npos;
    })) << o.err;
    EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << o.err;
  }
  stop_process(unrelated, std::chrono::milliseconds(100));
  expect_same_host(before, snapshot_host(tmp_ / "host", {}));
}

TEST_F(RuncHookModeTest, WrongTypesInTheOciStateAreOneLineNotAnAbort) {
  auto b = bundle({"ASCEND_VISIBLE_DEVICES=0"});
  const std::pair<std::string, const char*> cases[] = {
      {R"({"pid":"1","bundle":")" + b->dir() + R"("})", "pid is not a process id"},
      {R"({"pid":1,"bundle":7})", "no bundle"},
      {R"({"pid":1,"bundle":")" + b->dir() + R"(","id":{}})", "id is not a string"},
      {"[" + std::string(200000, '[') + std::string(200001, ']'), "nests deeper than"},
  };
  for (const auto& [state, want] : cases) {
    SCOPED_TRACE(state.substr(0, 80));
    RunOptions opts;
    opts.input = state;
    auto o = testing::run({bin("ascend-docker-hook"), "--config", config_, "prestart"}, opts);
    EXPECT_EQ(o.exit_code, 1) << o.err;
    EXPECT_NE(o.err.find(want), std::string::npos) << o.err;
    EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << o.err;
  }
}

// Issue 12: a prestart hook whose path is a number made nlohmann throw, and the shim died of SIGABRT (134).
TEST_F(RuncHookModeTest, AWrongTypedHookInTheSpecIsOneLineNotAnAbort) {
  auto b = bundle({"ASCEND_VISIBLE_DEVICES=0"});
  b->spec()["hooks"]["prestart"] = nlohmann::json::array({{{"path", 5}, {"args", {"x"}}}});
  b->save();
  auto o = run(*b, unique_id("numberpath"));
  EXPECT_EQ(o.exit_code, 1) << o.err;
  EXPECT_EQ(o.out, "");
  EXPECT_NE(o.err.find("config.json hooks.prestart[0].path is not a string"), std::string::npos) << o.err;
  EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << o.err;
}

// Who may ask for NPUs (trust.h), with real runc in both modes.
class TrustTest : public AttackTest {
 protected:
  std::string extra_config() const override { return "accept-env-when-unprivileged: false\n"; }
};

INSTANTIATE_TEST_SUITE_P(Injection, TrustTest, ::testing::Values("spec", "hook"),
                         [](const auto& info) { return info.param; });

TEST_P(TrustTest, TheOrchestratorsMarkersWinAndAnImagesEnvAloneGetsNothing) {
  auto add_marker = [](Bundle& b, int id) {
    b.spec()["mounts"].push_back({{"destination", "/var/run/ascend-container-devices/" + std::to_string(id)},
                                  {"type", "bind"},
                                  {"source", "/dev/null"},
                                  {"options", {"rbind", "ro"}}});
  };
  struct Case {
    const char* name;
    std::vector<std::string> env;
    std::vector<int> markers;
    bool privileged;
    std::vector<int> want;
  };
  const Case cases[] = {
      {"an image-baked all, no markers", {"ASCEND_VISIBLE_DEVICES=all"}, {}, false, {}},
      {"the plugin's markers and env", {"ASCEND_VISIBLE_DEVICES=1,3"}, {1, 3}, false, {1, 3}},
      {"the image's all under the plugin's markers", {"ASCEND_VISIBLE_DEVICES=all"}, {2}, false, {2}},
      {"a privileged container's env", {"ASCEND_VISIBLE_DEVICES=4"}, {}, true, {4}},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    auto b = bundle(c.env);
    for (int id : c.markers) add_marker(*b, id);
    if (c.privileged) b->spec()["process"]["capabilities"]["bounding"].push_back("CAP_SYS_ADMIN");
    b->save();
    auto o = run(*b, unique_id("trust"));
    ASSERT_EQ(o.exit_code, 0) << o.err;
    Probe p = parse_probe(o.out);
    ASSERT_TRUE(p.started) << o.out;
    if (c.want.empty()) {
      no_npu(p);
    } else {
      EXPECT_EQ(p.devices, expected_nodes(c.want));
      EXPECT_EQ(smi_ids(p.smi), std::set<int>(c.want.begin(), c.want.end()));
    }
  }
  EXPECT_NE(slurp(tmp_ / "log/ascend.log").find("accept-env-when-unprivileged is false"), std::string::npos);
}

TEST_P(AttackTest, WithTheDefaultSettingTheMarkersStillWinOverTheEnv) {
  auto b = bundle({"ASCEND_VISIBLE_DEVICES=all"});
  b->spec()["mounts"].push_back({{"destination", "/var/run/ascend-container-devices/5"},
                                 {"type", "bind"},
                                 {"source", "/dev/null"},
                                 {"options", {"rbind", "ro"}}});
  b->save();
  auto o = run(*b, unique_id("markers"));
  ASSERT_EQ(o.exit_code, 0) << o.err;
  Probe p = parse_probe(o.out);
  EXPECT_EQ(p.devices, expected_nodes({5}));
}

}  // namespace
}  // namespace ascend::hook
