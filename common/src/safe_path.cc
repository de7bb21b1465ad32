#include "ascend/common/safe_path.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <string>
#include <vector>

namespace ascend {
namespace {

constexpr int kMaxSymlinks = 40;  // as the kernel's MAXSYMLINKS

std::vector<std::string> split(const std::string& path) {
  std::vector<std::string> parts;
  std::size_t i = 0;
  while (i < path.size()) {
    std::size_t j = path.find('/', i);
    if (j == std::string::npos) j = path.size();
    if (j > i) parts.push_back(path.substr(i, j - i));
    i = j + 1;
  }
  return parts;
}

Result<UniqueFd> try_openat2(int root_fd, const std::string& path, int flags) {
  struct open_how how {};
  how.flags = static_cast<unsigned long long>(flags | O_CLOEXEC);
  how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;
  std::string rel = path.empty() ? "." : path;
  // EAGAIN: a rename or mount anywhere on the system raced with resolving "..", and the kernel asks the
  // caller to try again (openat2(2)). Busy hosts (container starts do both) hit it; retry a while, then let
  // the caller fall back to the component walk.
  constexpr int kAttempts = 64;
  for (int attempt = 0;; ++attempt) {
    long fd = ::syscall(SYS_openat2, root_fd, rel.c_str(), &how, sizeof how);
    if (fd >= 0) return UniqueFd(static_cast<int>(fd));
    if (errno == EINTR || (errno == EAGAIN && attempt + 1 < kAttempts)) continue;
    return Error::from_errno(errno, "openat2 " + path);
  }
}

// Component-wise walk. `stack` holds the fds of the directories from the root down, so ".." pops (and
// never goes above the root); symlinks are read and their targets spliced into the remaining components.
Result<UniqueFd> walk(int root_fd, const std::string& path, int flags) {
  std::vector<UniqueFd> stack;
  auto current = [&]() { return stack.empty() ? root_fd : stack.back().get(); };
  std::vector<std::string> todo = split(path);
  // Process components from the back of a reversed list for cheap splicing.
  std::vector<std::string> rev(todo.rbegin(), todo.rend());
  int links = 0;
  bool follow_last = (flags & O_NOFOLLOW) == 0;
  int final_flags = flags & ~O_NOFOLLOW;
  while (!rev.empty()) {
    std::string name = std::move(rev.back());
    rev.pop_back();
    bool last = rev.empty();
    if (name == ".") {
      if (last) return UniqueFd(::openat(current(), ".", final_flags | O_CLOEXEC));
      continue;
    }
    if (name == "..") {
      if (!stack.empty()) stack.pop_back();
      if (last) return UniqueFd(::openat(current(), ".", final_flags | O_CLOEXEC));
      continue;
    }
    int probe_flags = O_PATH | O_NOFOLLOW | O_CLOEXEC;
    UniqueFd fd(::openat(current(), name.c_str(), probe_flags));
    if (!fd.valid()) {
      std::string what = "open " + path;
      what += " (component " + name + ")";
      return Error::from_errno(errno, what);
    }
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0) return Error::from_errno(errno, "stat " + name);
    if (S_ISLNK(st.st_mode) && (!last || follow_last)) {
      if (++links > kMaxSymlinks) return Error(ELOOP, "open " + path + ": too many levels of symbolic links");
      std::string target(4096, '\0');
      ssize_t n = ::readlinkat(current(), name.c_str(), target.data(), target.size());
      if (n < 0) return Error::from_errno(errno, "readlink " + name);
      target.resize(static_cast<std::size_t>(n));
      if (!target.empty() && target[0] == '/') stack.clear();
      auto parts = split(target);
      for (auto it = parts.rbegin(); it != parts.rend(); ++it) rev.push_back(*it);
      if (parts.empty() && last) return UniqueFd(::openat(current(), ".", final_flags | O_CLOEXEC));
      continue;
    }
    if (last) {
      if (S_ISLNK(st.st_mode)) {
        if ((final_flags & O_PATH) == 0) return Error(ELOOP, "open " + path + ": is a symbolic link");
        return fd;
      }
      // Re-open the final component with the caller's flags, still refusing a swapped-in symlink.
      if ((final_flags & O_PATH) != 0 && (final_flags & ~(O_PATH | O_DIRECTORY | O_CLOEXEC)) == 0) {
        if ((final_flags & O_DIRECTORY) != 0 && !S_ISDIR(st.st_mode)) {
          return Error(ENOTDIR, "open " + path + ": not a directory");
        }
        return fd;
      }
      UniqueFd out(::openat(current(), name.c_str(), final_flags | O_NOFOLLOW | O_CLOEXEC));
      if (!out.valid()) return Error::from_errno(errno, "open " + path);
      return out;
    }
    if (!S_ISDIR(st.st_mode)) {
      std::string what = "open " + path;
      what += ": " + name + " is not a directory";
      return Error(ENOTDIR, what);
    }
    stack.push_back(std::move(fd));
  }
  // Empty path or only "/" components: the root itself.
  UniqueFd out(::openat(current(), ".", final_flags | O_CLOEXEC));
  if (!out.valid()) return Error::from_errno(errno, "open " + path);
  return out;
}

}  // namespace

Result<UniqueFd> open_in_root(int root_fd, const std::string& path, int flags, ResolveMode mode) {
  if (mode == ResolveMode::kAuto) {
    auto r = try_openat2(root_fd, path, flags);
    const int err = r.ok() ? 0 : r.error().code();
    if (r.ok() || (err != ENOSYS && err != EPERM && err != EAGAIN)) return r;
  }
  auto r = walk(root_fd, path, flags);
  if (r.ok() && !r->valid()) return Error::from_errno(errno, "open " + path);
  return r;
}

Result<UniqueFd> open_beneath_without_links(int root_fd, const std::string& path, int flags) {
  struct open_how how {};
  how.flags = static_cast<unsigned long long>((flags & ~O_NOFOLLOW) | O_CLOEXEC);
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS;
  // RESOLVE_BENEATH takes an absolute path as an escape: the root's entries are named relative to it.
  std::size_t skip = path.find_first_not_of('/');
  std::string rel = skip == std::string::npos ? "." : path.substr(skip);
  for (;;) {
    long fd = ::syscall(SYS_openat2, root_fd, rel.c_str(), &how, sizeof how);
    if (fd >= 0) return UniqueFd(static_cast<int>(fd));
    if (errno != EINTR) return Error::from_errno(errno, "openat2 " + path);
  }
}

std::string fd_path(int fd) {
  return "/proc/self/fd/" + std::to_string(fd);
}

}  // namespace ascend
