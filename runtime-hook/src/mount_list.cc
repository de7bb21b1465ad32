#include "ascend/hook/mount_list.h"

#include <sstream>

#include "ascend/common/fs.h"
#include "strcat.h"

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
    std::string where = cat("mount list ", name, " line ", std::to_string(lineno), ": ");
    if (p[0] != '/') return Error::invalid(cat(where, "'", p, "' is not an absolute path"));
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
        return Error::invalid(cat(where, "'", p, "' has a '", comp, "' component"));
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
    std::string path = cat(dir, "/", n, ".list");
    // A list says which host files a container receives: only root may be able to change it.
    auto text = read_protected_file(path, 1U << 20);
    if (!text) {
      if (text.error().code() == ENOENT) {
        return Error::not_found(cat("mount list '", n, "' not found (no ", path, ")"));
      }
      return text.error().context("mount list '" + n + "'");
    }
    ASCEND_ASSIGN(MountList l, parse_mount_list(*text, n), "");
    out.push_back(std::move(l));
  }
  return out;
}

}  // namespace ascend::hook
