#include "ascend/common/fs.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <string>

namespace ascend {

namespace {

Result<std::string> read_fd(int fd, const std::string& path, std::size_t max_bytes) {
  std::string out;
  char buf[16384];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Error::from_errno(errno, "read " + path);
    }
    if (n == 0) break;
    if (out.size() + static_cast<std::size_t>(n) > max_bytes) {
      return Error(EFBIG, "read " + path + ": larger than " + std::to_string(max_bytes) + " bytes");
    }
    out.append(buf, static_cast<std::size_t>(n));
  }
  return out;
}

}  // namespace

Result<std::string> read_file(const std::string& path, std::size_t max_bytes) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return Error::from_errno(errno, "open " + path);
  return read_fd(fd.get(), path, max_bytes);
}

namespace {

Status check_protected_stat(const struct stat& st, const std::string& path, const std::string& what) {
  const bool owner_ok = st.st_uid == 0 || st.st_uid == ::geteuid();
  if (owner_ok && (st.st_mode & (S_IWGRP | S_IWOTH)) == 0) return {};
  char mode[8];
  std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
  return Error(EPERM, what + " " + path + " is mode " + mode + " owned by uid " + std::to_string(st.st_uid) +
                          ": it must be owned by root and not writable by group or others (chown root " +
                          path + "; chmod go-w " + path + ")");
}

}  // namespace

Status check_protected(int fd, const std::string& path, const std::string& what) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return Error::from_errno(errno, "stat " + path);
  return check_protected_stat(st, path, what);
}

Result<std::string> read_protected_file(const std::string& path, std::size_t max_bytes) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (!fd.valid()) return Error::from_errno(errno, "open " + path);
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return Error::from_errno(errno, "stat " + path);
  if (!S_ISREG(st.st_mode)) return Error(EINVAL, path + " is not a regular file");
  ASCEND_CHECK(check_protected_stat(st, path, "file"), "");  // the same stat: one system call
  return read_fd(fd.get(), path, max_bytes);
}

namespace {

Status write_all(int fd, std::string_view data, const std::string& what) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return Error::from_errno(errno, "write " + what);
    }
    data.remove_prefix(static_cast<std::size_t>(n));
  }
  return {};
}

std::string dir_of(const std::string& path) {
  auto slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

}  // namespace

Status atomic_replace(const std::string& path, std::string_view content, mode_t mode, Durability durability) {
  struct stat st {};
  const bool existed = ::stat(path.c_str(), &st) == 0;
  if (existed) mode = st.st_mode & 07777;
  std::string tmp = path + ".tmp.XXXXXX";
  UniqueFd fd(::mkostemp(tmp.data(), O_CLOEXEC));
  if (!fd.valid()) return Error::from_errno(errno, "create temporary file " + tmp);
  auto fail = [&](Error e) {
    ::unlink(tmp.c_str());
    return e;
  };
  // The replacement keeps the owner too (a root tool editing a file another user owns, or a group that
  // differs from the creator's): refused rather than silently changed when that is not allowed.
  if (existed && (st.st_uid != ::geteuid() || st.st_gid != ::getegid()) &&
      ::fchown(fd.get(), st.st_uid, st.st_gid) != 0) {
    return fail(Error::from_errno(errno, "keep the owner " + std::to_string(st.st_uid) + ":" +
                                             std::to_string(st.st_gid) + " of " + path));
  }
  if (::fchmod(fd.get(), mode) != 0) return fail(Error::from_errno(errno, "chmod " + tmp));
  if (auto s = write_all(fd.get(), content, tmp); !s) return fail(s.error());
  const bool synced = durability == Durability::kSynced;
  if (synced && ::fsync(fd.get()) != 0) return fail(Error::from_errno(errno, "fsync " + tmp));
  fd.reset();
  if (::rename(tmp.c_str(), path.c_str()) != 0) return fail(Error::from_errno(errno, "rename to " + path));
  if (!synced) return {};
  // Make the rename itself durable.
  UniqueFd dir(::open(dir_of(path).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dir.valid()) ::fsync(dir.get());
  return {};
}

Status make_dirs(const std::string& path, mode_t mode) {
  if (path.empty()) return Error::invalid("make_dirs: empty path");
  std::string cur;
  std::size_t pos = 0;
  while (pos != std::string::npos) {
    pos = path.find('/', pos + 1);
    cur = path.substr(0, pos);
    if (cur.empty()) continue;
    if (::mkdir(cur.c_str(), mode) != 0 && errno != EEXIST) return Error::from_errno(errno, "mkdir " + cur);
  }
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return Error::from_errno(errno, "stat " + path);
  if (!S_ISDIR(st.st_mode)) return Error(ENOTDIR, "mkdir " + path + ": exists and is not a directory");
  return {};
}

Result<FileLock> FileLock::acquire(const std::string& lock_path) {
  // The lock file may be removed and re-created by another process between our open and our flock (an
  // unload that cleans up): then we hold a lock nobody else sees. Retry until the locked inode is the one
  // the path names.
  for (;;) {
    UniqueFd fd(::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644));
    if (!fd.valid()) return Error::from_errno(errno, "open lock " + lock_path);
    while (::flock(fd.get(), LOCK_EX) != 0) {
      if (errno != EINTR) return Error::from_errno(errno, "lock " + lock_path);
    }
    struct stat held {};
    struct stat named {};
    if (::fstat(fd.get(), &held) != 0) return Error::from_errno(errno, "stat lock " + lock_path);
    if (::stat(lock_path.c_str(), &named) == 0 && named.st_ino == held.st_ino &&
        named.st_dev == held.st_dev) {
      return FileLock(std::move(fd));
    }
  }
}

bool is_file_name(std::string_view name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string_view::npos;
}

FileLock::~FileLock() {
  if (fd_.valid()) ::flock(fd_.get(), LOCK_UN);
}

}  // namespace ascend
