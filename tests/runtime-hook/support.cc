#include "support.h"

#include <fcntl.h>
#include <ftw.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <regex>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "test_backend.h"

extern char** environ;

namespace ascend::hook::testing {

std::string bin(const std::string& name) {
  return std::string(ASCEND_BIN_DIR) + "/" + name;
}

bool have_program(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::istringstream in(path != nullptr ? path : "/usr/sbin:/usr/bin:/sbin:/bin");
  std::string dir;
  while (std::getline(in, dir, ':')) {
    if (!dir.empty() && ::access((dir + "/" + name).c_str(), X_OK) == 0) return true;
  }
  return false;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void spit(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  if (!out) throw std::runtime_error("cannot write " + path);
}

TempDir::TempDir(const std::string& tag) {
  std::string templ = (std::filesystem::temp_directory_path() / ("ascend-" + tag + "-XXXXXX")).string();
  if (::mkdtemp(templ.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  path_ = templ;
}

TempDir::~TempDir() {
  // Detach whatever a failed test left mounted below the folder, deepest first, then remove it.
  std::vector<std::string> mounts;
  std::istringstream mi(slurp("/proc/self/mountinfo"));
  std::string line;
  while (std::getline(mi, line)) {
    std::istringstream l(line);
    std::string a, b, c, d, mp;
    l >> a >> b >> c >> d >> mp;
    if (mp.rfind(path_ + "/", 0) == 0) mounts.push_back(mp);
  }
  std::sort(mounts.begin(), mounts.end(), [](const auto& x, const auto& y) { return x.size() > y.size(); });
  for (const auto& m : mounts) ::umount2(m.c_str(), MNT_DETACH);
  ::nftw(
      path_.c_str(),
      [](const char* p, const struct stat*, int flag, struct FTW*) {
        if (flag == FTW_DP) {
          ::rmdir(p);
        } else {
          ::unlink(p);
        }
        return 0;
      },
      32, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
}

Output run(const std::vector<std::string>& argv, const RunOptions& opts) {
  Output o;
  int in[2], out[2], err[2];
  if (::pipe2(in, O_CLOEXEC) != 0 || ::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0) return o;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, in[0], 0);
  posix_spawn_file_actions_adddup2(&fa, out[1], 1);
  posix_spawn_file_actions_adddup2(&fa, err[1], 2);
  if (!opts.cwd.empty()) posix_spawn_file_actions_addchdir_np(&fa, opts.cwd.c_str());
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attr, 0);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::vector<char*> envp;
  if (opts.env) {
    for (const auto& e : *opts.env) envp.push_back(const_cast<char*>(e.c_str()));
    envp.push_back(nullptr);
  }
  pid_t pid = 0;
  int rc = ::posix_spawnp(&pid, args[0], &fa, &attr, args.data(), opts.env ? envp.data() : environ);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  ::close(in[0]);
  ::close(out[1]);
  ::close(err[1]);
  if (rc != 0) {
    ::close(in[1]);
    ::close(out[0]);
    ::close(err[0]);
    o.err = std::string("spawn ") + argv[0] + ": " + std::strerror(rc);
    return o;
  }
  std::size_t written = 0;
  if (opts.input.empty()) {
    ::close(in[1]);
    in[1] = -1;
  } else {
    ::fcntl(in[1], F_SETFL, O_NONBLOCK);
  }
  auto deadline = std::chrono::steady_clock::now() + opts.timeout;
  bool out_open = true, err_open = true;
  bool killed = false, exited = false;
  int status = 0;
  // Reads until both pipes close or, when the program has exited, until they are drained: a detached
  // container (runc create) keeps the pipes open after runc itself is gone.
  while (out_open || err_open) {
    if (!exited && ::waitpid(pid, &status, WNOHANG) == pid) exited = true;
    pollfd fds[3] = {
        {out_open ? out[0] : -1, POLLIN, 0}, {err_open ? err[0] : -1, POLLIN, 0}, {in[1], POLLOUT, 0}};
    auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      ::kill(-pid, SIGKILL);
      killed = true;
      break;
    }
    int n = ::poll(fds, 3, exited ? 50 : static_cast<int>(std::min<long long>(left.count(), 20)));
    if (n < 0 && errno != EINTR) break;
    if (n == 0 && exited) break;
    char buf[65536];
    for (int i = 0; i < 2; ++i) {
      if ((fds[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
      ssize_t r = ::read(fds[i].fd, buf, sizeof buf);
      if (r > 0) {
        (i == 0 ? o.out : o.err).append(buf, static_cast<std::size_t>(r));
      } else if (r == 0 || errno != EINTR) {
        (i == 0 ? out_open : err_open) = false;
      }
    }
    if (in[1] >= 0 && (fds[2].revents & (POLLOUT | POLLERR | POLLHUP)) != 0) {
      ssize_t w = ::write(in[1], opts.input.data() + written, opts.input.size() - written);
      if (w > 0) written += static_cast<std::size_t>(w);
      if (w < 0 || written == opts.input.size()) {
        ::close(in[1]);
        in[1] = -1;
      }
    }
  }
  if (in[1] >= 0) ::close(in[1]);
  ::close(out[0]);
  ::close(err[0]);
  if (!exited) {
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
  }
  if (killed) {
    o.exit_code = 128 + SIGKILL;
    o.err += "\n[killed after timeout]";
  } else if (WIFEXITED(status)) {
    o.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    o.exit_code = 128 + WTERMSIG(status);
  }
  return o;
}

int spawn_background(const std::vector<std::string>& argv, const std::string& log) {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = -1;
  int rc = ::posix_spawnp(&pid, args[0], &fa, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  return rc == 0 ? pid : -1;
}

void stop_process(int pid, std::chrono::milliseconds grace) {
  if (pid <= 0) return;
  ::kill(pid, SIGTERM);
  auto deadline = std::chrono::steady_clock::now() + grace;
  while (std::chrono::steady_clock::now() < deadline) {
    int status = 0;
    if (::waitpid(pid, &status, WNOHANG) == pid) return;
    ::usleep(50 * 1000);
  }
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
}

EmulatedHost::EmulatedHost(std::string root, const std::string& profile,
                           const std::vector<std::string>& extra)
    : root_(std::move(root)) {
  std::vector<std::string> argv = {bin("npu-sim"), "load", "--root", root_, "--profile", profile};
  argv.insert(argv.end(), extra.begin(), extra.end());
  auto o = run(argv);
  ok_ = o.exit_code == 0;
  error_ = o.err;
}

EmulatedHost::~EmulatedHost() {
  if (ok_) run({bin("npu-sim"), "unload", "--root", root_});
}

std::string write_hook_config(const std::string& dir, const std::string& host_root,
                              const std::map<std::string, std::string>& extra_lists,
                              const std::string& injection, const std::string& extra_config) {
  std::string lists = dir + "/lists";
  ::mkdir(lists.c_str(), 0755);
  // The binaries refuse a config or list that group or others can write: give them the installer's modes,
  // whatever the umask.
  spit(lists + "/base.list", slurp(bin("base.list")));
  ::chmod((lists + "/base.list").c_str(), 0440);
  for (const auto& [name, text] : extra_lists) {
    spit(lists + "/" + name + ".list", text);
    ::chmod((lists + "/" + name + ".list").c_str(), 0440);
  }
  std::string path = dir + "/config.yaml";
  spit(path, "host-root: " + host_root + "\nmount-list-dir: " + lists +
                 "\nhook-path: " + bin("ascend-docker-hook") + "\nlog-file: " + dir +
                 "/log/ascend.log\nlog-level: debug\ninjection: " + injection +
                 "\nbackend: " + ascend::testing::test_backend() + "\n" + extra_config);
  ::chmod(path.c_str(), 0640);
  return path;
}

void make_busybox_rootfs(const std::string& rootfs) {
  std::string bindir = rootfs + "/bin";
  ::mkdir(rootfs.c_str(), 0755);
  ::mkdir(bindir.c_str(), 0755);
  ::mkdir((rootfs + "/tmp").c_str(), 01777);
  spit(bindir + "/busybox", slurp("/bin/busybox"));
  ::chmod((bindir + "/busybox").c_str(), 0755);
  auto list = run({"/bin/busybox", "--list"});
  std::istringstream in(list.out);
  std::string applet;
  while (std::getline(in, applet)) {
    if (!applet.empty() && applet != "busybox" &&
        ::symlink("busybox", (bindir + "/" + applet).c_str()) != 0) {
      throw std::runtime_error("symlink " + bindir + "/" + applet + ": " + std::strerror(errno));
    }
  }
}

Bundle::Bundle(std::string dir) : dir_(std::move(dir)) {
  ::mkdir(dir_.c_str(), 0755);
  make_busybox_rootfs(rootfs());
  auto o = run({"runc", "spec", "--bundle", dir_});
  if (o.exit_code != 0) throw std::runtime_error("runc spec: " + o.err);
  spec_ = nlohmann::json::parse(slurp(config_path()));
  spec_["process"]["terminal"] = false;
  spec_["process"]["env"] = {"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/"};
  save();
}

void Bundle::set_args(const std::vector<std::string>& args) {
  spec_["process"]["args"] = args;
}
void Bundle::add_env(const std::string& entry) {
  spec_["process"]["env"].push_back(entry);
}
void Bundle::save() const {
  spit(config_path(), spec_.dump(2) + "\n");
}

std::string probe_script() {
  return R"SH(echo PROBE-START
for d in /dev/davinci* /dev/vdavinci* /dev/devmm_svm /dev/hisi_hdc; do
  [ -e "$d" ] || continue
  t=other; [ -c "$d" ] && t=c
  echo "DEV $d $t $(stat -c '%t %T' "$d")"
done
while read -r id parent devno root mp opts rest; do echo "MNT $mp $opts"; done < /proc/self/mountinfo
for d in /dev/davinci*; do [ -e "$d" ] || continue; e=$(cat "$d" 2>&1 >/dev/null); echo "OPEN $d $e"; done
env | grep '^ASCEND_' | sed 's/^/ENV /'
if [ -e /usr/local/Ascend/driver/version.info ]; then
  e=$( (echo x >> /usr/local/Ascend/driver/version.info) 2>&1); echo "WRITE $e"
fi
if [ -x /usr/local/bin/npu-smi ]; then /usr/local/bin/npu-smi info 2>&1 | sed 's/^/SMI /'; fi
echo PROBE-END
)SH";
}

Probe parse_probe(const std::string& out) {
  Probe p;
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line)) {
    if (line == "PROBE-START") p.started = true;
    auto rest = [&](std::size_t n) { return line.size() > n ? line.substr(n) : std::string(); };
    if (line.rfind("DEV ", 0) == 0) {
      std::istringstream l(rest(4));
      std::string path, type, maj, min;
      l >> path >> type >> maj >> min;
      p.devices[path] = type + " " + std::to_string(std::stoi(maj, nullptr, 16)) + ":" +
                        std::to_string(std::stoi(min, nullptr, 16));
    } else if (line.rfind("MNT ", 0) == 0) {
      std::istringstream l(rest(4));
      std::string mp, opts;
      l >> mp >> opts;
      p.mounts[mp] = opts;
    } else if (line.rfind("OPEN ", 0) == 0) {
      std::string r = rest(5);
      auto sp = r.find(' ');
      p.opens[r.substr(0, sp)] = sp == std::string::npos ? "" : r.substr(sp + 1);
    } else if (line.rfind("ENV ", 0) == 0) {
      p.env.push_back(rest(4));
    } else if (line.rfind("WRITE ", 0) == 0) {
      p.write_error = rest(6);
    } else if (line.rfind("SMI ", 0) == 0) {
      p.smi.push_back(rest(4));
    }
  }
  return p;
}

Output Runner::run(const std::vector<std::string>& runtime, const Bundle& b, const std::string& id) {
  std::vector<std::string> argv = runtime;
  argv.insert(argv.end(), {"--root", state_root_, "run", "--bundle", b.dir(), id});
  auto o = testing::run(argv);
  remove(id);
  return o;
}

Output Runner::create(const std::vector<std::string>& runtime, const Bundle& b, const std::string& id) {
  std::vector<std::string> argv = runtime;
  argv.insert(argv.end(), {"--root", state_root_, "create", "--bundle", b.dir(), id});
  return testing::run(argv);
}

Output Runner::runc(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {"runc", "--root", state_root_};
  argv.insert(argv.end(), args.begin(), args.end());
  return testing::run(argv);
}

void Runner::remove(const std::string& id) {
  runc({"delete", "--force", id});
}

std::string unique_id(const std::string& tag) {
  static std::atomic<int> n{0};
  return "ascend-" + tag + "-" + std::to_string(::getpid()) + "-" + std::to_string(n++);
}

std::set<int> smi_ids(const std::vector<std::string>& lines) {
  static const std::regex kRow(R"(^\| (\d+) +(910\S*|Ascend\S*) )");
  std::set<int> ids;
  std::smatch m;
  for (const auto& l : lines) {
    if (std::regex_search(l, m, kRow)) ids.insert(std::stoi(m[1]));
  }
  return ids;
}

std::set<int> smi_ids(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  return smi_ids(lines);
}

}  // namespace ascend::hook::testing
