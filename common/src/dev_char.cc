#include "ascend/common/dev_char.h"

#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <functional>
#include <optional>
#include <sstream>

#include "ascend/common/fs.h"

namespace ascend {

namespace {

std::string under(const std::string& root, const std::string& abs) {
  if (root.empty() || root == "/") return abs;
  return (root.back() == '/' ? root.substr(0, root.size() - 1) : root) + abs;
}

std::string name_of(int major, int minor) {
  return std::to_string(major) + ":" + std::to_string(minor);
}

// "../davinci0" for "/dev/davinci0"; "../dri/card0" for "/dev/dri/card0".
Result<std::string> link_target(const std::string& node_path) {
  if (node_path.rfind("/dev/", 0) != 0 || node_path.size() <= 5 ||
      node_path.find("/../") != std::string::npos)
    return Error::invalid("device node " + node_path + " is not under /dev");
  return "../" + node_path.substr(5);
}

bool is_device(const std::string& path, int major, int minor) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISCHR(st.st_mode) && st.st_rdev == makedev(major, minor);
}

Result<std::string> read_link(const std::string& path) {
  char buf[4096];
  ssize_t n = ::readlink(path.c_str(), buf, sizeof buf - 1);
  if (n < 0) return Error::from_errno(errno, "readlink " + path);
  return std::string(buf, static_cast<std::size_t>(n));
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty()) out.push_back(line);
  }
  return out;
}

// Applies `change` to the record's entries under its lock.
Status edit_record(const std::string& root, const std::function<void(std::vector<std::string>&)>& change) {
  const std::string record = under(root, "/" + std::string(kDevCharRecord));
  ASCEND_CHECK(make_dirs(record.substr(0, record.rfind('/'))), "dev/char record");
  ASCEND_ASSIGN(FileLock lock, FileLock::acquire(record + ".lock"), "dev/char record");
  std::vector<std::string> entries;
  if (auto text = read_file(record, 1U << 20)) {
    entries = lines_of(*text);
  } else if (text.error().code() != ENOENT) {
    return text.error().context("dev/char record");
  }
  const auto before = entries;
  change(entries);
  if (entries == before) return {};
  std::string out;
  for (const auto& e : entries) out += e + "\n";
  // No fsync: the record lives in /run and ends with the boot, like the links.
  return atomic_replace(record, out, 0644, Durability::kEphemeral).context("dev/char record");
}

}  // namespace

std::string dev_char_link_path(const std::string& root, int major, int minor) {
  return under(root, "/dev/char/" + name_of(major, minor));
}

Result<bool> ensure_dev_char_link(const std::string& root, const std::string& node_path, int major,
                                  int minor) {
  ASCEND_ASSIGN(std::string target, link_target(node_path), "");
  const std::string link = dev_char_link_path(root, major, minor);
  if (is_device(link, major, minor)) return false;  // udev's, ours, or another name of the same device
  ASCEND_CHECK(make_dirs(link.substr(0, link.rfind('/'))), "create " + link);
  // A new link beside it, renamed over any old one: a reader never sees the name missing.
  const std::string tmp = link + ".tmp-" + std::to_string(::getpid());
  ::unlink(tmp.c_str());
  if (::symlink(target.c_str(), tmp.c_str()) != 0) return Error::from_errno(errno, "symlink " + tmp);
  if (::rename(tmp.c_str(), link.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    return Error::from_errno(err, "rename to " + link);
  }
  const std::string entry = name_of(major, minor) + " " + target;
  ASCEND_CHECK(edit_record(root,
                           [&](std::vector<std::string>& e) {
                             std::erase_if(e, [&](const std::string& x) {
                               return x.rfind(name_of(major, minor) + " ", 0) == 0;
                             });
                             e.push_back(entry);
                           }),
               "");
  return true;
}

Result<bool> remove_stale_dev_char_link(const std::string& root, const std::string& node_path, int major,
                                        int minor) {
  ASCEND_ASSIGN(std::string target, link_target(node_path), "");
  const std::string link = dev_char_link_path(root, major, minor);
  auto now = read_link(link);
  if (!now || *now != target || is_device(link, major, minor)) return false;
  if (::unlink(link.c_str()) != 0 && errno != ENOENT) return Error::from_errno(errno, "remove " + link);
  const std::string entry = name_of(major, minor) + " " + target;
  ASCEND_CHECK(edit_record(root, [&](std::vector<std::string>& e) { std::erase(e, entry); }), "");
  return true;
}

Result<std::vector<std::string>> recorded_dev_char_links(const std::string& root) {
  auto text = read_file(under(root, "/" + std::string(kDevCharRecord)), 1U << 20);
  if (!text) {
    if (text.error().code() == ENOENT) return std::vector<std::string>{};
    return text.error().context("dev/char record");
  }
  return lines_of(*text);
}

Result<std::vector<std::string>> remove_recorded_dev_char_links(const std::string& root) {
  std::vector<std::string> removed;
  std::optional<Error> failed;  // the first link that could not be removed
  ASCEND_CHECK(edit_record(root,
                           [&](std::vector<std::string>& entries) {
                             std::vector<std::string> kept;
                             for (const auto& e : entries) {
                               const auto sp = e.find(' ');
                               if (sp == std::string::npos) continue;  // not ours to interpret
                               const std::string name = e.substr(0, sp);
                               const std::string link = under(root, "/dev/char/" + name);
                               auto now = read_link(link);
                               if (!now || *now != e.substr(sp + 1)) continue;  // changed since: not ours
                               if (::unlink(link.c_str()) != 0 && errno != ENOENT) {
                                 if (!failed) failed = Error::from_errno(errno, "remove " + link);
                                 kept.push_back(e);
                                 continue;
                               }
                               removed.push_back("/dev/char/" + name);
                             }
                             entries = std::move(kept);
                           }),
               "");
  if (failed) return *failed;
  return removed;
}

}  // namespace ascend
