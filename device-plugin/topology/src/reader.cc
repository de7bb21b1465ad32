#include "reader.h"

#include <cmath>

namespace ascend::topology {

FieldPath FieldPath::key(std::string k) const {
  FieldPath p = *this;
  p.parts.emplace_back(std::move(k));
  return p;
}

FieldPath FieldPath::index(int i) const {
  FieldPath p = *this;
  p.parts.emplace_back(i);
  return p;
}

std::string FieldPath::str() const {
  std::string s;
  for (const auto& part : parts) {
    if (const auto* k = std::get_if<std::string>(&part)) {
      if (!s.empty()) s += '.';
      s += *k;
    } else {
      s += '[' + std::to_string(std::get<int>(part)) + ']';
    }
  }
  return s;
}

namespace detail {

using nlohmann::json;

void fail(const FieldPath& path, std::string message) {
  throw FieldError{path, std::move(message)};
}

Error to_error(const FieldError& e, const LineLocator& where) {
  std::string msg;
  int line = where ? where(e.path) : 0;
  if (line > 0) msg += "line " + std::to_string(line) + ": ";
  std::string p = e.path.str();
  if (!p.empty()) msg += p + ": ";
  msg += e.message;
  return Error::invalid(msg);
}

std::string type_name(const json& j) {
  if (j.is_null()) return "nothing";
  if (j.is_boolean()) return "a boolean";
  if (j.is_number()) return "a number";
  if (j.is_string()) return "a string";
  if (j.is_array()) return "a list";
  return "a mapping";
}

ObjectReader::ObjectReader(const json& j, FieldPath path) : j_(j), path_(std::move(path)) {
  if (!j.is_object()) fail(path_, "expected a mapping, found " + type_name(j));
}

const json* ObjectReader::find(const char* key) {
  seen_.insert(key);
  auto it = j_.find(key);
  if (it == j_.end() || it->is_null()) return nullptr;
  return &*it;
}

const json& ObjectReader::required(const char* key) {
  const json* v = find(key);
  if (v == nullptr) fail(path_.key(key), "required field is missing");
  return *v;
}

std::string ObjectReader::string(const char* key, const std::optional<std::string>& fallback) {
  const json* v = find(key);
  if (v == nullptr) {
    if (fallback) return *fallback;
    fail(path_.key(key), "required field is missing");
  }
  if (v->is_string()) return v->get<std::string>();
  if (v->is_number()) return v->dump();  // `name: 7` is a fine name
  fail(path_.key(key), "expected a string, found " + type_name(*v));
}

std::int64_t as_integer(const json& v, const FieldPath& path, std::int64_t min, std::int64_t max) {
  std::int64_t x = 0;
  if (v.is_number_integer()) {
    x = v.get<std::int64_t>();
  } else if (v.is_number_float() && std::isfinite(v.get<double>()) &&
             v.get<double>() == std::floor(v.get<double>()) && std::fabs(v.get<double>()) < 9e15) {
    x = static_cast<std::int64_t>(v.get<double>());  // 1e3 and 64.0 are integers too
  } else {
    fail(path, "expected an integer, found " + (v.is_number() ? v.dump() : type_name(v)));
  }
  if (x < min || x > max) {
    fail(path,
         std::to_string(x) + " is out of range [" + std::to_string(min) + ", " + std::to_string(max) + "]");
  }
  return x;
}

double as_number(const json& v, const FieldPath& path) {
  if (!v.is_number()) fail(path, "expected a number, found " + type_name(v));
  double x = v.get<double>();
  if (!std::isfinite(x)) fail(path, "expected a finite number");
  return x;
}

std::int64_t ObjectReader::integer(const char* key, std::int64_t min, std::int64_t max,
                                   const std::optional<std::int64_t>& fallback) {
  const json* v = find(key);
  if (v == nullptr) {
    if (fallback) return *fallback;
    fail(path_.key(key), "required field is missing");
  }
  return as_integer(*v, path_.key(key), min, max);
}

double ObjectReader::positive(const char* key, const std::optional<double>& fallback) {
  const json* v = find(key);
  if (v == nullptr) {
    if (fallback) return *fallback;
    fail(path_.key(key), "required field is missing");
  }
  double x = as_number(*v, path_.key(key));
  if (x <= 0) fail(path_.key(key), "must be positive, found " + v->dump());
  return x;
}

double ObjectReader::non_negative(const char* key, const std::optional<double>& fallback) {
  const json* v = find(key);
  if (v == nullptr) {
    if (fallback) return *fallback;
    fail(path_.key(key), "required field is missing");
  }
  double x = as_number(*v, path_.key(key));
  if (x < 0) fail(path_.key(key), "must not be negative, found " + v->dump());
  return x;
}

void ObjectReader::done() const {
  for (auto it = j_.begin(); it != j_.end(); ++it) {
    if (seen_.count(it.key()) == 0) fail(path_.key(it.key()), "unknown field");
  }
}

}  // namespace detail
}  // namespace ascend::topology
