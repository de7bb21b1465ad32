// The mount-list parser. Oracle: every accepted path is absolute and normalised (no "//", "." or ".."
// component, no trailing '/'), and the accepted paths, written back one per line, parse to the same list.
#include "ascend/hook/mount_list.h"
#include "fuzz_util.h"

using namespace ascend;

namespace {

bool normalised(const std::string& p) {
  if (p.empty() || p[0] != '/') return false;
  if (p.size() > 1 && p.back() == '/') return false;
  std::size_t pos = 1;
  while (pos <= p.size()) {
    std::size_t slash = p.find('/', pos);
    if (slash == std::string::npos) slash = p.size();
    std::string part = p.substr(pos, slash - pos);
    if (p != "/" && (part.empty() || part == "." || part == "..")) return false;
    pos = slash + 1;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto r = hook::parse_mount_list(fuzz::as_text(data, size), "fuzz");
  if (!r.ok()) return 0;
  std::string again;
  for (const auto& p : r->paths) {
    fuzz::check(normalised(p), "accepted a path that is not absolute and normalised: '" + p + "'");
    again += p + "\n";
  }
  auto r2 = hook::parse_mount_list(again, "fuzz");
  fuzz::check(r2.ok() && r2->paths == r->paths, "the accepted paths do not parse back to themselves");
  return 0;
}
