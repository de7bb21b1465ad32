// A JSON text read with rapidjson (header-only, so usable in the static shim; issue 25: nlohmann's parse of
// config.json and of the emulator's state file was half of the shim's work for a request), accepting exactly
// the texts nlohmann::json::parse accepts and reading them to the same values:
//   - RFC 8259 only (no comments, NaN or trailing commas); whitespace after the value, nothing else; a
//     leading UTF-8 byte order mark skipped; a NUL byte ends the text (nlohmann's lexer: refused inside a
//     string, what follows it ignored);
//   - strings well-formed UTF-8 (Unicode table 3-7), escapes valid, a lone surrogate escape refused;
//   - numbers as nlohmann types them: an integer is int64 or uint64 when it fits, a double (correctly
//     rounded) otherwise; one that is not finite as a double refused;
//   - a key given twice in an object: the last value, in the place of the first (nlohmann's ordered_json,
//     and what Go's encoding/json, so runc, reads: never one value for us and another for the runtime).
// json_equal and json_is_integer are nlohmann's == and is_number_integer on these values; write_json writes
// the compact text (numbers exact: integers as they are, doubles shortest round-trip). Not thread-safe per
// document; distinct documents are independent.
#pragma once

#include <rapidjson/document.h>
#include <rapidjson/error/error.h>

#include <memory>
#include <string>
#include <string_view>

namespace ascend {

using JsonValue = rapidjson::Value;
using JsonAllocator = rapidjson::Document::AllocatorType;

// A parsed text. The text is copied once and parsed in place: the document's strings point into the copy,
// which lives as long as the document. Move-only.
class JsonDocument {
 public:
  JsonDocument() = default;

  // False when nlohmann::json::parse would refuse `text`, or when it nests more than `max_depth` arrays and
  // objects inside each other (0: any depth; writing a value back, or comparing it, recurses that deep). The
  // document is then empty.
  bool parse(std::string_view text, int max_depth = 0);

  JsonValue& root() { return doc_; }
  const JsonValue& root() const { return doc_; }
  JsonAllocator& allocator() { return doc_.GetAllocator(); }

 private:
  rapidjson::ParseErrorCode parse_rapidjson(std::string_view text, int max_depth);

  std::unique_ptr<char[]> text_;
  rapidjson::Document doc_;
};

// nlohmann's is_number_integer: an int64 or a uint64, not a double.
inline bool json_is_integer(const JsonValue& v) {
  return v.IsInt64() || v.IsUint64();
}

// nlohmann's == (of ordered_json: an object's members compared in order; numbers across their types).
bool json_equal(const JsonValue& a, const JsonValue& b);

// The compact text of `v` (nlohmann's dump() but for the spelling of doubles and of \u escapes).
std::string write_json(const JsonValue& v);

}  // namespace ascend
