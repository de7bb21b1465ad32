#include "ascend/common/json_text.h"

#include <rapidjson/error/error.h>
#include <rapidjson/reader.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <system_error>
#include <unordered_map>
#include <utility>
#include <vector>

namespace ascend {

namespace {

using rapidjson::SizeType;

// Validated UTF-8, no recursion (nesting is bounded by the heap, not the stack), numbers handed over as text
// (Checked::RawNumber converts them).
constexpr unsigned kParseFlags =
    rapidjson::kParseValidateEncodingFlag | rapidjson::kParseNumbersAsStringsFlag;

// A string decoded from the escape of a lone low surrogate (\uDC00-\uDFFF), which rapidjson 1.1 encodes as
// ED A0-BF xx where nlohmann refuses it (a lone high one rapidjson refuses too). The text's own bytes are
// validated as they are read, so an ED followed by A0-BF can only have come from such an escape.
bool holds_lone_surrogate(const char* s, SizeType n) {
  const char* end = s + n;
  for (const char* p = s; p < end; ++p) {
    p = static_cast<const char*>(std::memchr(p, 0xED, static_cast<std::size_t>(end - p)));
    if (p == nullptr) return false;
    if (p + 1 < end && static_cast<unsigned char>(p[1]) >= 0xA0) return true;
  }
  return false;
}

// The document's own handler, but for the strings above, and numbers converted as nlohmann converts them: an
// integer that fits is an int64 (negative) or a uint64, anything else a double, correctly rounded, refused
// when it is not finite. (rapidjson 1.1's own conversion misreads some: -5389507959911792e294, which
// overflows, as 1.67e-307.)
class Checked {
 public:
  Checked(rapidjson::Document& d, int max_depth) : d_(d), max_depth_(max_depth) {}
  bool too_deep() const { return too_deep_; }
  bool Null() { return d_.Null(); }
  bool Bool(bool b) { return d_.Bool(b); }
  bool Int(int i) { return d_.Int(i); }
  bool Uint(unsigned i) { return d_.Uint(i); }
  bool Int64(std::int64_t i) { return d_.Int64(i); }
  bool Uint64(std::uint64_t i) { return d_.Uint64(i); }
  bool Double(double d) { return d_.Double(d); }
  bool RawNumber(const char* s, SizeType n, bool /*copy*/) {
    const char* end = s + n;
    if (std::find_if(s, end, [](char c) { return c == '.' || c == 'e' || c == 'E'; }) == end) {
      if (*s == '-') {
        std::int64_t i = 0;
        if (std::from_chars(s, end, i).ec == std::errc()) return d_.Int64(i);
      } else {
        std::uint64_t u = 0;
        if (std::from_chars(s, end, u).ec == std::errc()) return d_.Uint64(u);
      }
    }
    double d = 0;
    auto [ptr, ec] = std::from_chars(s, end, d);
    if (ec == std::errc::result_out_of_range) {  // strtod's answer: 0 (1e-400) or infinity (1e309)
      d = std::strtod(std::string(s, n).c_str(), nullptr);
    } else if (ec != std::errc() || ptr != end) {
      return false;
    }
    return std::isfinite(d) && d_.Double(d);
  }
  bool String(const char* s, SizeType n, bool copy) {
    return !holds_lone_surrogate(s, n) && d_.String(s, n, copy);
  }
  bool Key(const char* s, SizeType n, bool copy) { return !holds_lone_surrogate(s, n) && d_.Key(s, n, copy); }
  bool StartObject() { return enter() && d_.StartObject(); }
  bool EndObject(SizeType n) {
    --depth_;
    return d_.EndObject(n);
  }
  bool StartArray() { return enter() && d_.StartArray(); }
  bool EndArray(SizeType n) {
    --depth_;
    return d_.EndArray(n);
  }

 private:
  bool enter() {
    if (max_depth_ > 0 && ++depth_ > max_depth_) too_deep_ = true;
    return !too_deep_;
  }

  rapidjson::Document& d_;
  int max_depth_;  // 0: any
  int depth_ = 0;
  bool too_deep_ = false;
};

std::string_view key_of(const JsonValue::Member& m) {
  return {m.name.GetString(), m.name.GetStringLength()};
}

// One object's keys given more than once: the last value, in the place of the first (nlohmann's
// ordered_json).
void keep_last_value(JsonValue& obj) {
  const SizeType n = obj.MemberCount();
  if (n < 2) return;
  JsonValue::Member* m = &*obj.MemberBegin();
  // Keys in order (the state file, written from a std::map) are distinct: one pass tells.
  bool ascending = true;
  for (SizeType i = 1; i < n && ascending; ++i) ascending = key_of(m[i - 1]) < key_of(m[i]);
  if (ascending) return;
  // Large objects look keys up in a map, so that a hostile spec cannot make this quadratic.
  constexpr SizeType kLinear = 32;
  std::unordered_map<std::string_view, SizeType> index;
  SizeType kept = 0;
  for (SizeType i = 0; i < n; ++i) {
    const std::string_view key = key_of(m[i]);
    SizeType first = kept;
    if (n <= kLinear) {
      for (SizeType k = 0; k < kept; ++k) {
        if (key_of(m[k]) == key) {
          first = k;
          break;
        }
      }
    } else if (auto it = index.find(key); it != index.end()) {
      first = it->second;
    }
    if (first != kept) {
      m[first].value = m[i].value;  // a move
      continue;
    }
    if (kept != i) {
      m[kept].name = m[i].name;
      m[kept].value = m[i].value;
    }
    if (n > kLinear) index.emplace(key_of(m[kept]), kept);
    ++kept;
  }
  if (kept != n) obj.EraseMember(obj.MemberBegin() + kept, obj.MemberEnd());
}

// keep_last_value on every object of the document, without recursion.
void keep_last_values(JsonValue& root) {
  std::vector<JsonValue*> todo{&root};
  while (!todo.empty()) {
    JsonValue* v = todo.back();
    todo.pop_back();
    if (v->IsObject()) {
      keep_last_value(*v);
      // By index: rapidjson 1.1's member iterators compare ambiguously under C++20 (clang warns).
      for (SizeType i = 0; i < v->MemberCount(); ++i) {
        JsonValue& m = (v->MemberBegin() + i)->value;
        if (m.IsObject() || m.IsArray()) todo.push_back(&m);
      }
    } else if (v->IsArray()) {
      for (auto& e : v->GetArray()) {
        if (e.IsObject() || e.IsArray()) todo.push_back(&e);
      }
    }
  }
}

// The bits of an integer, whichever of int64 and uint64 holds it: nlohmann compares an integer with an
// unsigned one as two int64s.
std::uint64_t integer_bits(const JsonValue& v) {
  return v.IsInt64() ? static_cast<std::uint64_t>(v.GetInt64()) : v.GetUint64();
}

}  // namespace

rapidjson::ParseErrorCode JsonDocument::parse_rapidjson(std::string_view text, int max_depth) {
  // rapidjson's recursive parser is the faster; it is given the text only as deep as its stack allows, the
  // iterative one (the heap its stack) takes a deeper text, when max_depth allows one (0: any depth).
  constexpr int kRecursionDepth = 256;
  struct Pass {
    int max_depth;
    bool iterative;
  };
  const Pass passes[] = {{max_depth > 0 ? std::min(max_depth, kRecursionDepth) : kRecursionDepth, false},
                         {max_depth, true}};
  const int n_passes = max_depth > 0 && max_depth <= kRecursionDepth ? 1 : 2;
  for (int p = 0; p < n_passes; ++p) {
    const Pass pass = passes[p];
    // The text, then zeros: one ends it, three more are what rapidjson 1.1's UTF-8 validation reads past
    // the end when the text ends inside a character (it takes a character's bytes before it checks them).
    text_ = std::make_unique<char[]>(text.size() + 4);  // zeroed
    std::memcpy(text_.get(), text.data(), text.size());
    rapidjson::InsituStringStream in(text_.get());
    rapidjson::Reader reader;
    bool too_deep = false;
    auto generate = [&](rapidjson::Document& d) {
      Checked handler(d, pass.max_depth);
      constexpr unsigned kFlags = kParseFlags | rapidjson::kParseInsituFlag;
      const bool ok = pass.iterative
                          ? !reader.Parse<kFlags | rapidjson::kParseIterativeFlag>(in, handler).IsError()
                          : !reader.Parse<kFlags>(in, handler).IsError();
      too_deep = handler.too_deep();
      return ok;
    };
    doc_.SetNull();
    doc_.Populate(generate);
    if (too_deep) continue;
    if (reader.HasParseError()) {
      doc_.SetNull();
      return reader.GetParseErrorCode();
    }
    keep_last_values(doc_);
    return rapidjson::kParseErrorNone;
  }
  doc_.SetNull();
  return rapidjson::kParseErrorTermination;  // deeper than max_depth
}

bool JsonDocument::parse(std::string_view text, int max_depth) {
  // nlohmann skips a byte order mark at the start; rapidjson would stop at it.
  if (text.starts_with("\xEF\xBB\xBF")) text.remove_prefix(3);
  // A NUL ends the text for both: nlohmann's lexer takes it for the end of the input (refused inside a
  // string, anything after it ignored), and so does the in-place parse.
  const rapidjson::ParseErrorCode error = parse_rapidjson(text, max_depth);
  if (error == rapidjson::kParseErrorNone) return true;
  // rapidjson 1.1 refuses a number whose exponent alone is out of a double's range though its value is not
  // (0e400, 0.1e309): such a text, and only such, is read by nlohmann and its compact text read again.
  if (error != rapidjson::kParseErrorNumberTooBig) return false;
  auto j = nlohmann::ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return false;
  return parse_rapidjson(j.dump(), max_depth) == rapidjson::kParseErrorNone;
}

bool json_equal(const JsonValue& a, const JsonValue& b) {
  if (a.IsNumber() && b.IsNumber()) {
    if (a.IsDouble() || b.IsDouble()) return a.GetDouble() == b.GetDouble();
    return integer_bits(a) == integer_bits(b);
  }
  if (a.GetType() != b.GetType()) return false;  // false and true are types of their own
  if (a.IsString()) {
    return a.GetStringLength() == b.GetStringLength() &&
           std::memcmp(a.GetString(), b.GetString(), a.GetStringLength()) == 0;
  }
  if (a.IsArray()) {
    if (a.Size() != b.Size()) return false;
    for (SizeType i = 0; i < a.Size(); ++i) {
      if (!json_equal(a[i], b[i])) return false;
    }
    return true;
  }
  if (a.IsObject()) {
    if (a.MemberCount() != b.MemberCount()) return false;
    for (auto x = a.MemberBegin(), y = b.MemberBegin(); x != a.MemberEnd(); ++x, ++y) {
      if (key_of(*x) != key_of(*y) || !json_equal(x->value, y->value)) return false;
    }
    return true;
  }
  return true;  // null, false, true
}

std::string write_json(const JsonValue& v) {
  rapidjson::StringBuffer out;
  rapidjson::Writer<rapidjson::StringBuffer> writer(out);
  v.Accept(writer);
  return {out.GetString(), out.GetSize()};
}

}  // namespace ascend
