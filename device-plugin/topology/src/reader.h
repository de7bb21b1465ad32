// Validation helpers for the JSON form of the cluster, job and trace inputs. Errors are thrown as FieldError
// inside a parse and turned into one ascend::Error (with the field path and line) at the public function;
// no exception leaves the library.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "ascend/common/error.h"
#include "ascend/topology/fields.h"

namespace ascend::topology::detail {

struct FieldError {
  FieldPath path;
  std::string message;
};

[[noreturn]] void fail(const FieldPath& path, std::string message);

// "line 7: nodes[3].busy[0]: <message>" (line omitted when unknown, path omitted when empty).
Error to_error(const FieldError& e, const LineLocator& where);

std::string type_name(const nlohmann::json& j);

// Reads the fields of one JSON object; remembers which were read so that done() can reject unknown ones.
class ObjectReader {
 public:
  ObjectReader(const nlohmann::json& j, FieldPath path);

  bool has(const char* key) const { return j_.contains(key); }
  const nlohmann::json* find(const char* key);
  const nlohmann::json& required(const char* key);
  FieldPath path(const char* key) const { return path_.key(key); }
  const FieldPath& path() const { return path_; }

  std::string string(const char* key, const std::optional<std::string>& fallback = std::nullopt);
  std::int64_t integer(const char* key, std::int64_t min, std::int64_t max,
                       const std::optional<std::int64_t>& fallback = std::nullopt);
  // A positive finite number.
  double positive(const char* key, const std::optional<double>& fallback = std::nullopt);
  // A finite number >= 0.
  double non_negative(const char* key, const std::optional<double>& fallback = std::nullopt);

  // Throws for the first key that was never read.
  void done() const;

 private:
  const nlohmann::json& j_;
  FieldPath path_;
  std::set<std::string> seen_;
};

std::int64_t as_integer(const nlohmann::json& v, const FieldPath& path, std::int64_t min, std::int64_t max);
double as_number(const nlohmann::json& v, const FieldPath& path);

}  // namespace ascend::topology::detail
