// How deeply a JSON text nests, counted before parsing: nlohmann's parser is iterative, but serialising and
// comparing a document recurse, so a document nested 100 000 deep would overflow the stack of whoever writes
// it back. Pure; thread-safe.
#pragma once

#include <cstddef>
#include <string_view>

namespace ascend {

// True when `text` opens more than `max_depth` arrays/objects inside each other (strings are skipped).
inline bool json_nests_deeper_than(std::string_view text, int max_depth) {
  int depth = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      if (++depth > max_depth) return true;
    } else if (c == '}' || c == ']') {
      --depth;
    }
  }
  return false;
}

}  // namespace ascend
