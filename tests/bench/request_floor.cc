// The system calls of a request, and nothing else: hook_bench's floor for the shim's own work on a request
// of all chips with base.list. A static program (C library only, as small as exec_floor.cc plus these calls)
// that makes the calls the shim makes for such a request here, with what they read taken at face value (no
// JSON, no YAML, no checks beyond the kernel's), then execs the runtime as the shim does:
//   read the config and the spec; list the host's /dev and lstat each chip and control node; lstat the
//   rootfs's /dev; read the mount list; stat each node's /dev/char link; open each mount-list path beneath
//   the host root with no link on its way (openat2); write the spec back beside itself and rename it over
//   (the same bytes: the shim's edit is its own work); append a line with a local time stamp to the log.
// What the shim adds above this is its own: parsing, planning, editing, start-up and the memory it touches.
// Usage as the shim's: request_floor --config FILE create --bundle DIR ID; the config's host-root,
// mount-list-dir, log-file and runtime-path (the runtime; "runc" from PATH without it) are read as
// "key: value" lines. Bench-only (tests/bench/hook.cmake); a failing call exits 1 with its name.
#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>

namespace {

constexpr std::size_t kPath = 4096;

[[noreturn]] void fail(const char* what, const char* name) {
  std::fprintf(stderr, "request_floor: %s %s: %s\n", what, name, std::strerror(errno));
  std::exit(1);
}

// A path into `out` (kPath bytes), or exit when it does not fit.
[[gnu::format(printf, 2, 3)]] void path_of(char* out, const char* format, ...) {
  va_list args;
  va_start(args, format);
  const int n = std::vsnprintf(out, kPath, format, args);
  va_end(args);
  if (n < 0 || static_cast<std::size_t>(n) >= kPath) {
    errno = ENAMETOOLONG;
    fail("path", format);
  }
}

// The file's bytes into `buf` (NUL-terminated); their count.
std::size_t slurp(const char* path, char* buf, std::size_t size) {
  int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail("open", path);
  std::size_t n = 0;
  for (ssize_t r; n + 1 < size && (r = ::read(fd, buf + n, size - 1 - n)) > 0;)
    n += static_cast<std::size_t>(r);
  ::close(fd);
  buf[n] = '\0';
  return n;
}

// The value of a "key: value" line of `config` into `out` ("" when there is none).
void value_of(const char* config, const char* key, char* out) {
  out[0] = '\0';
  const std::size_t k = std::strlen(key);
  for (const char* line = config; *line != '\0';) {
    const char* end = std::strchr(line, '\n');
    if (end == nullptr) end = line + std::strlen(line);
    if (std::strncmp(line, key, k) == 0 && line[k] == ':' && line[k + 1] == ' ') {
      const std::size_t n = std::min<std::size_t>(static_cast<std::size_t>(end - line) - k - 2, kPath - 1);
      std::memcpy(out, line + k + 2, n);
      out[n] = '\0';
      return;
    }
    line = *end == '\0' ? end : end + 1;
  }
}

char g_config[1U << 16];
char g_spec[1U << 20];
char g_list[1U << 16];

}  // namespace

int main(int argc, char** argv) {
  if (argc < 6 || std::strcmp(argv[1], "--config") != 0) {
    std::fprintf(stderr, "usage: request_floor --config FILE create --bundle DIR ID\n");
    return 2;
  }
  slurp(argv[2], g_config, sizeof g_config);
  static char root[kPath], lists[kPath], log[kPath], runtime[kPath], path[kPath];
  value_of(g_config, "host-root", root);
  value_of(g_config, "mount-list-dir", lists);
  value_of(g_config, "log-file", log);
  value_of(g_config, "runtime-path", runtime);
  const char* bundle = ".";
  for (int i = 3; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--bundle") == 0) bundle = argv[i + 1];
  }
  static char spec_path[kPath];
  path_of(spec_path, "%s/config.json", bundle);
  const std::size_t spec_size = slurp(spec_path, g_spec, sizeof g_spec);

  // The host's chips and control nodes.
  static char nodes[64][kPath];
  int count = 0;
  path_of(path, "%s/dev", root);
  DIR* dev = ::opendir(path);
  if (dev == nullptr) fail("opendir", path);
  while (dirent* e = ::readdir(dev)) {
    if (count < 61 && std::strncmp(e->d_name, "davinci", 7) == 0 && e->d_name[7] >= '0' &&
        e->d_name[7] <= '9')
      path_of(nodes[count++], "%s", e->d_name);
  }
  ::closedir(dev);
  for (const char* control : {"davinci_manager", "devmm_svm", "hisi_hdc"})
    path_of(nodes[count++], "%s", control);
  dev_t numbers[64];
  for (int i = 0; i < count; ++i) {
    struct stat st {};
    path_of(path, "%s/dev/%s", root, nodes[i]);
    if (::lstat(path, &st) != 0) fail("lstat", path);
    numbers[i] = st.st_rdev;
  }
  struct stat rootfs_dev {};
  path_of(path, "%s/rootfs/dev", bundle);
  (void)::lstat(path, &rootfs_dev);
  path_of(path, "%s/base.list", lists);
  slurp(path, g_list, sizeof g_list);

  // Their /dev/char links.
  for (int i = 0; i < count; ++i) {
    struct stat st {};
    path_of(path, "%s/dev/char/%u:%u", root, major(numbers[i]), minor(numbers[i]));
    if (::stat(path, &st) != 0) fail("stat", path);
  }

  // The driver files, beneath the host root.
  path_of(path, "%s/", root);
  int host = ::open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (host < 0) fail("open", path);
  static char real[kPath];
  path_of(path, "/proc/self/fd/%d", host);
  if (::readlink(path, real, sizeof real) <= 0) fail("readlink", path);
  for (char* line = g_list; *line != '\0';) {
    char* end = std::strchr(line, '\n');
    if (end != nullptr) *end = '\0';
    if (line[0] == '/') {
      struct open_how how {};
      how.flags = O_PATH | O_CLOEXEC;
      how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS;
      long fd = ::syscall(SYS_openat2, host, line + 1, &how, sizeof how);
      if (fd >= 0) ::close(static_cast<int>(fd));
    }
    if (end == nullptr) break;
    line = end + 1;
  }
  ::close(host);

  // The spec, written back as the shim writes it.
  struct stat was {};
  if (::stat(spec_path, &was) != 0) fail("stat", spec_path);
  path_of(path, "%s.tmp.floor", spec_path);
  int out = ::open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (out < 0) fail("open", path);
  if (::fchmod(out, was.st_mode & 07777) != 0 || ::write(out, g_spec, spec_size) < 0) fail("write", path);
  ::close(out);
  if (::rename(path, spec_path) != 0) fail("rename", path);

  // One line in the log.
  int lf = ::open(log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640);
  if (lf >= 0) {
    std::time_t now = std::time(nullptr);
    std::tm tm{};
    char line[128];
    std::size_t n = std::strftime(line, sizeof line, "[%Y-%m-%d %H:%M:%S] [floor] [info] a request\n",
                                  ::localtime_r(&now, &tm));
    (void)!::write(lf, line, n);
    ::close(lf);
  }

  char* args[64];
  int n = 0;
  args[n++] = runtime[0] != '\0' ? runtime : const_cast<char*>("runc");
  for (int i = 3; i < argc && n < 63; ++i) args[n++] = argv[i];
  args[n] = nullptr;
  ::execvp(args[0], args);
  fail("exec", args[0]);
}
