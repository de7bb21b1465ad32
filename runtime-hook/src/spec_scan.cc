#include "ascend/hook/spec_scan.h"

#include <string>

#include "ascend/hook/oci.h"
#include "ascend/hook/request.h"

namespace ascend::hook {

namespace {

// parse_spec's limit (oci.cc) on how deeply arrays and objects nest.
constexpr int kMaxDepth = 64;

// What parse_spec's type checks (oci.cc, check_spec_types) want at a position of the document, and the two
// positions whose strings the request depends on (an entry of process.env, a mount's destination).
enum class Want {
  kAny,          // not checked
  kTop,          // the document: an object
  kObject,       // process, process.capabilities, root, linux, linux.resources, hooks: object or null
  kEntry,        // an element of mounts, linux.devices, linux.resources.devices, hooks.<stage>: an object
  kList,         // mounts, linux.devices, linux.resources.devices, hooks.<stage>: list or null
  kStrings,      // capabilities.bounding, a mount's options, a hook's args and env: list of strings or null
  kEnv,          // process.env: list of strings or null
  kString,       // root.path, and the string fields of mounts, devices, rules and hooks: string or null
  kStringItem,   // an element of kStrings: a string
  kEnvItem,      // an element of process.env: a string, not ASCEND_VISIBLE_DEVICES
  kDestination,  // a mount's destination: string or null, not under the device-marker folder
  kInteger,      // major, minor, timeout: an integer or null
};

// Which object a kObject/kEntry position is, for its fields' wants.
enum class Shape {
  kNone,
  kTop,
  kProcess,
  kCapabilities,
  kRoot,
  kLinux,
  kResources,
  kHooks,
  kMount,
  kDevice,
  kRule,
  kHook
};

struct Slot {
  Want want = Want::kAny;
  Shape shape = Shape::kNone;    // the object's shape (kObject, kEntry, kTop)
  Shape element = Shape::kNone;  // the elements' shape (kList)
};

Slot field_of(Shape shape, std::string_view key) {
  auto object = [](Shape s) { return Slot{Want::kObject, s, Shape::kNone}; };
  auto list = [](Shape s) { return Slot{Want::kList, Shape::kNone, s}; };
  const Slot string{Want::kString};
  const Slot integer{Want::kInteger};
  const Slot strings{Want::kStrings};
  switch (shape) {
    case Shape::kTop:
      if (key == "process") return object(Shape::kProcess);
      if (key == "root") return object(Shape::kRoot);
      if (key == "mounts") return list(Shape::kMount);
      if (key == "linux") return object(Shape::kLinux);
      if (key == "hooks") return object(Shape::kHooks);
      break;
    case Shape::kProcess:
      if (key == "env") return Slot{Want::kEnv};
      if (key == "capabilities") return object(Shape::kCapabilities);
      break;
    case Shape::kCapabilities:
      if (key == "bounding") return strings;
      break;
    case Shape::kRoot:
      if (key == "path") return string;
      break;
    case Shape::kLinux:
      if (key == "devices") return list(Shape::kDevice);
      if (key == "resources") return object(Shape::kResources);
      break;
    case Shape::kResources:
      if (key == "devices") return list(Shape::kRule);
      break;
    case Shape::kHooks:
      return list(Shape::kHook);  // every stage
    case Shape::kMount:
      if (key == "destination") return Slot{Want::kDestination};
      if (key == "type" || key == "source") return string;
      if (key == "options") return strings;
      break;
    case Shape::kDevice:
      if (key == "path" || key == "type") return string;
      if (key == "major" || key == "minor") return integer;
      break;
    case Shape::kRule:
      if (key == "type" || key == "access") return string;
      if (key == "major" || key == "minor") return integer;
      break;
    case Shape::kHook:
      if (key == "path") return string;
      if (key == "args" || key == "env") return strings;
      if (key == "timeout") return integer;
      break;
    case Shape::kNone:
      break;
  }
  return Slot{};
}

bool null_allowed(Want w) {
  return w == Want::kAny || w == Want::kObject || w == Want::kList || w == Want::kStrings ||
         w == Want::kEnv || w == Want::kString || w == Want::kDestination || w == Want::kInteger;
}

// One pass over the text: false as soon as anything is invalid, of the wrong type, or a request.
class Scanner {
 public:
  explicit Scanner(std::string_view text) : p_(text.data()), end_(text.data() + text.size()) {}

  bool document() {
    skip_ws();
    if (!value(Slot{Want::kTop, Shape::kTop}, 0)) return false;
    skip_ws();
    return p_ == end_;
  }

 private:
  void skip_ws() {
    while (p_ != end_ && (*p_ == ' ' || *p_ == '\n' || *p_ == '\r' || *p_ == '\t')) ++p_;
  }

  bool at(char c) const { return p_ != end_ && *p_ == c; }

  bool value(const Slot& slot, int depth) {
    if (p_ == end_) return false;
    const Want w = slot.want;
    switch (*p_) {
      case '{':
        if (w != Want::kAny && w != Want::kTop && w != Want::kObject && w != Want::kEntry) return false;
        return object(slot.shape, depth + 1);
      case '[':
        if (w != Want::kAny && w != Want::kList && w != Want::kStrings && w != Want::kEnv) return false;
        return array(slot, depth + 1);
      case '"':
        return string_value(w);
      case 'n':
        return null_allowed(w) && literal("null");
      case 't':
        return w == Want::kAny && literal("true");
      case 'f':
        return w == Want::kAny && literal("false");
      default:
        if (w == Want::kInteger) return small_integer();
        return w == Want::kAny && number();
    }
  }

  bool object(Shape shape, int depth) {
    if (depth > kMaxDepth) return false;
    ++p_;  // '{'
    skip_ws();
    if (at('}')) {
      ++p_;
      return true;
    }
    for (;;) {
      skip_ws();
      if (!at('"')) return false;
      Slot child;
      if (shape == Shape::kNone) {
        if (!string(nullptr)) return false;
      } else {
        key_.clear();
        if (!string(&key_)) return false;
        child = field_of(shape, key_);
      }
      skip_ws();
      if (!at(':')) return false;
      ++p_;
      skip_ws();
      if (!value(child, depth)) return false;
      skip_ws();
      if (at(',')) {
        ++p_;
        continue;
      }
      if (!at('}')) return false;
      ++p_;
      return true;
    }
  }

  bool array(const Slot& slot, int depth) {
    if (depth > kMaxDepth) return false;
    Slot item;
    if (slot.want == Want::kList) item = Slot{Want::kEntry, slot.element};
    if (slot.want == Want::kStrings) item = Slot{Want::kStringItem};
    if (slot.want == Want::kEnv) item = Slot{Want::kEnvItem};
    ++p_;  // '['
    skip_ws();
    if (at(']')) {
      ++p_;
      return true;
    }
    for (;;) {
      skip_ws();
      if (!value(item, depth)) return false;
      skip_ws();
      if (at(',')) {
        ++p_;
        continue;
      }
      if (!at(']')) return false;
      ++p_;
      return true;
    }
  }

  bool string_value(Want w) {
    switch (w) {
      case Want::kAny:
      case Want::kString:
      case Want::kStringItem:
        return string(nullptr);
      case Want::kEnvItem: {
        text_.clear();
        if (!string(&text_)) return false;
        return std::string_view(text_).substr(0, std::string_view(kEnvVisibleDevices).size()) !=
               kEnvVisibleDevices;
      }
      case Want::kDestination:
        text_.clear();
        if (!string(&text_)) return false;
        return text_.find("ascend-container-devices") == std::string::npos;
      default:
        return false;
    }
  }

  bool literal(std::string_view word) {
    if (static_cast<std::size_t>(end_ - p_) < word.size() || std::string_view(p_, word.size()) != word)
      return false;
    p_ += word.size();
    return true;
  }

  bool digits() {
    const char* start = p_;
    while (p_ != end_ && *p_ >= '0' && *p_ <= '9') ++p_;
    return p_ != start;
  }

  // JSON's number: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][-+]?[0-9]+)?, which nlohmann refuses when it is not
  // finite as a double (1e400); at most 24 characters with an exponent of at most 2 digits always is.
  bool number() {
    const char* start = p_;
    if (at('-')) ++p_;
    if (at('0')) {
      ++p_;
    } else if (p_ == end_ || *p_ < '1' || *p_ > '9' || !digits()) {
      return false;
    }
    if (at('.')) {
      ++p_;
      if (!digits()) return false;
    }
    if (at('e') || at('E')) {
      ++p_;
      if (at('+') || at('-')) ++p_;
      const char* exponent = p_;
      if (!digits() || p_ - exponent > 2) return false;
    }
    return p_ - start <= 24;
  }

  // An integer nlohmann stores as one (not as a float): -?(0|[1-9][0-9]*), at most 18 digits.
  bool small_integer() {
    if (at('-')) ++p_;
    const char* start = p_;
    if (at('0')) {
      ++p_;
    } else if (p_ == end_ || *p_ < '1' || *p_ > '9' || !digits()) {
      return false;
    }
    if (p_ - start > 18) return false;
    return !at('.') && !at('e') && !at('E');
  }

  static int hex(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }

  // \uXXXX (p_ at the 'u'); -1 when malformed.
  long unicode_escape() {
    if (end_ - p_ < 5) return -1;
    long v = 0;
    for (int i = 1; i <= 4; ++i) {
      int h = hex(p_[i]);
      if (h < 0) return -1;
      v = v * 16 + h;
    }
    p_ += 5;
    return v;
  }

  static void append_utf8(std::string& out, long cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }

  // The length of the well-formed UTF-8 sequence at p_ (Unicode 15, table 3-7, which nlohmann's lexer
  // follows), 0 when it is not one.
  std::size_t utf8_length() const {
    auto byte = [&](std::ptrdiff_t i) {
      return p_ + i < end_ ? static_cast<unsigned char>(p_[i]) : static_cast<unsigned char>(0);
    };
    auto in = [](unsigned char b, unsigned lo, unsigned hi) { return b >= lo && b <= hi; };
    const unsigned char b0 = byte(0);
    if (in(b0, 0xC2, 0xDF)) return in(byte(1), 0x80, 0xBF) ? 2 : 0;
    if (b0 == 0xE0) return in(byte(1), 0xA0, 0xBF) && in(byte(2), 0x80, 0xBF) ? 3 : 0;
    if (in(b0, 0xE1, 0xEC) || in(b0, 0xEE, 0xEF))
      return in(byte(1), 0x80, 0xBF) && in(byte(2), 0x80, 0xBF) ? 3 : 0;
    if (b0 == 0xED) return in(byte(1), 0x80, 0x9F) && in(byte(2), 0x80, 0xBF) ? 3 : 0;
    if (b0 == 0xF0)
      return in(byte(1), 0x90, 0xBF) && in(byte(2), 0x80, 0xBF) && in(byte(3), 0x80, 0xBF) ? 4 : 0;
    if (in(b0, 0xF1, 0xF3))
      return in(byte(1), 0x80, 0xBF) && in(byte(2), 0x80, 0xBF) && in(byte(3), 0x80, 0xBF) ? 4 : 0;
    if (b0 == 0xF4)
      return in(byte(1), 0x80, 0x8F) && in(byte(2), 0x80, 0xBF) && in(byte(3), 0x80, 0xBF) ? 4 : 0;
    return 0;
  }

  // A character that stands for itself inside a string.
  static bool plain(unsigned char c) { return c >= 0x20 && c < 0x80 && c != '"' && c != '\\'; }

  // A JSON string (p_ at its opening quote), decoded into *out when out is not null.
  bool string(std::string* out) {
    ++p_;
    for (;;) {
      if (p_ == end_) return false;
      const auto c = static_cast<unsigned char>(*p_);
      if (c == '"') {
        ++p_;
        return true;
      }
      if (c < 0x20) return false;  // a control character must be escaped
      if (c == '\\') {
        ++p_;
        if (p_ == end_) return false;
        char decoded = 0;
        switch (*p_) {
          case '"':
            decoded = '"';
            break;
          case '\\':
            decoded = '\\';
            break;
          case '/':
            decoded = '/';
            break;
          case 'b':
            decoded = '\b';
            break;
          case 'f':
            decoded = '\f';
            break;
          case 'n':
            decoded = '\n';
            break;
          case 'r':
            decoded = '\r';
            break;
          case 't':
            decoded = '\t';
            break;
          case 'u': {
            long cp = unicode_escape();
            if (cp < 0 || (cp >= 0xDC00 && cp <= 0xDFFF)) return false;  // a low surrogate alone
            if (cp >= 0xD800 && cp <= 0xDBFF) {                          // needs its low surrogate
              if (end_ - p_ < 2 || p_[0] != '\\' || p_[1] != 'u') return false;
              ++p_;
              long low = unicode_escape();
              if (low < 0xDC00 || low > 0xDFFF) return false;
              cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
            }
            if (out != nullptr) append_utf8(*out, cp);
            continue;
          }
          default:
            return false;
        }
        ++p_;
        if (out != nullptr) *out += decoded;
        continue;
      }
      if (c < 0x80) {  // a run of plain characters at once
        const char* run = p_;
        while (p_ != end_ && plain(static_cast<unsigned char>(*p_))) ++p_;
        if (out != nullptr) out->append(run, static_cast<std::size_t>(p_ - run));
        continue;
      }
      std::size_t n = utf8_length();
      if (n == 0) return false;
      if (out != nullptr) out->append(p_, n);
      p_ += n;
    }
  }

  const char* p_;
  const char* end_;
  std::string key_;   // the current key of a checked object
  std::string text_;  // the current env entry or destination
};

}  // namespace

bool spec_requests_nothing(std::string_view text) {
  if (text.size() > kMaxSpecBytes) return false;
  return Scanner(text).document();
}

}  // namespace ascend::hook
