// Where a value sits inside a structured input (cluster, job and trace files), so that a validation error
// can name the field and, when the caller knows the source text, its line. The library never reads files:
// the caller that parsed the text supplies a LineLocator. Plain values; thread-safe.
#pragma once

#include <functional>
#include <string>
#include <variant>
#include <vector>

namespace ascend::topology {

// A path of mapping keys and list indices, printed as `nodes[3].busy[0]`.
struct FieldPath {
  std::vector<std::variant<std::string, int>> parts;

  FieldPath key(std::string k) const;
  FieldPath index(int i) const;
  std::string str() const;
};

// Maps a field path to the 1-based line of the value (or of the deepest enclosing value that exists);
// 0 when unknown.
using LineLocator = std::function<int(const FieldPath&)>;

}  // namespace ascend::topology
