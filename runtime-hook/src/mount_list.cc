#include "ascend/hook/mount_list.h"

#include <sstream>

#include <fmt/format.h>

#include "ascend/common/fs.h"

namespace ascend::hook {

Result<MountList> parse_mount_list(std::string_view text, const std::string& name) {
  MountList list{name, {}};
  std::istringstream in{std::string(text)};
  std::string line;
  int lineno = 0;
  while (std::getline(in, line)) {
    ++lineno;
    if (auto hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    auto b = line.find_first_not_of(" \t\r");
    if (b == std::string::npos) continue;
    auto e = line.find_last_not_of(" \t\r");
    std::string p = line.substr(b, e - b + 1);
    std::string where = fmt::format("mount list {} line {}: ", name, lineno);
    if (p[0] != '/') return Error::invalid(fmt::format("{}'{}' is not an absolute path", where, p));
    if (p.find('\0') != std::string::npos) return Error::invalid(where + "a path with a NUL byte");
    // Blanks at the end of a line are not part of its path, also when a '/' follows them ("/usr /").
    while (p.size() > 1 && (p.back() == '/' || p.back() == ' ' || p.back() == '\t' || p.back() == '\r'))
      p.pop_back();
    std::string norm;
    std::size_t i = 0;
    while (i < p.size()) {
      std::size_t j = p.find('/', i);
      if (j == std::string::npos) j = p.size();
      std::string comp = p.substr(i, j - i);
      if (comp == "." || comp == "..")
        return Error::invalid(fmt::format("{}'{}' has a '{}' component", where, p, comp));
      if (!comp.empty()) norm += "/" + comp;
      i = j + 1;
    }
    if (norm.empty()) return Error::invalid(where + "'/' cannot be mounted");
    list.paths.push_back(norm);
  }
  return list;
}

Result<std::vector<MountList>> load_mount_lists(const std::string& dir,
                                                const std::vector<std::string>& names) {
  std::vector<MountList> out;
  for (const auto& n : names) {
    std::string path = fmt::format("{}/{}.list", dir, n);
    // A list says which host files a container receives: only root may be able to change it.
    auto text = read_protected_file(path, 1U << 20);
    if (!text) {
      if (text.error().code() == ENOENT) {
        return Error::not_found(fmt::format("mount list '{}' not found (no {})", n, path));
      }
      return text.error().context("mount list '" + n + "'");
    }
    ASCEND_ASSIGN(MountList l, parse_mount_list(*text, n), "");
    out.push_back(std::move(l));
  }
  return out;
}

}  // namespace ascend::hook
