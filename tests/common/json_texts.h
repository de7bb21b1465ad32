// JSON texts for the differential tests of the rapidjson readers (json_text.h) against nlohmann: random
// documents drawn from a seeded generator (keys from a small pool, so that objects repeat them; numbers at
// and past the edges of int64, uint64 and double; strings with every kind of escape and of UTF-8, some of
// them invalid), byte mutations of a text, and a fixed list of hostile texts. Header-only, for tests only.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace ascend::testing {

class JsonTexts {
 public:
  explicit JsonTexts(std::uint32_t seed) : rng_(seed) {}

  // A random document: usually valid JSON, sometimes not (a string with a bad byte or a lone surrogate).
  std::string document() {
    std::string out;
    space(out);
    value(out, 0);
    space(out);
    return out;
  }

  // A random object at the top (what config.json and the state file are).
  std::string object_document() {
    std::string out;
    object(out, 0);
    return out;
  }

  // `text` with one to three bytes changed, dropped, inserted or a slice repeated.
  std::string mutate(std::string text) {
    static const std::string kBytes =
        std::string("{}[],:\"\\0-e.+ tfn\xff\xed\xa0\x80") + std::string(1, '\0');
    const int n = pick(1, 3);
    for (int i = 0; i < n && !text.empty(); ++i) {
      const std::size_t at = static_cast<std::size_t>(pick(0, static_cast<int>(text.size()) - 1));
      switch (pick(0, 3)) {
        case 0:
          text[at] = kBytes[static_cast<std::size_t>(pick(0, static_cast<int>(kBytes.size()) - 1))];
          break;
        case 1:
          text.erase(at, 1);
          break;
        case 2:
          text.insert(at, 1, kBytes[static_cast<std::size_t>(pick(0, static_cast<int>(kBytes.size()) - 1))]);
          break;
        default: {
          const std::size_t len = static_cast<std::size_t>(pick(1, 12));
          text.insert(at, text.substr(at, len));
        }
      }
    }
    return text;
  }

  // A number in JSON's grammar, from every region nlohmann and rapidjson type or round differently if at
  // all: small and huge integers, the int64/uint64 edges, doubles of many digits, exponents past a double's.
  std::string number() {
    static const char* const kEdges[] = {"0",
                                         "-0",
                                         "-0.0",
                                         "0.0",
                                         "1",
                                         "-1",
                                         "9223372036854775807",
                                         "9223372036854775808",
                                         "-9223372036854775808",
                                         "-9223372036854775809",
                                         "18446744073709551615",
                                         "18446744073709551616",
                                         "-18446744073709551616",
                                         "1e308",
                                         "1.7976931348623157e308",
                                         "1.7976931348623158e308",
                                         "1.7976931348623159e308",
                                         "1.797693134862315807937e308",
                                         "1e309",
                                         "-1e309",
                                         "1e400",
                                         "0e400",
                                         "0.0e999",
                                         "0.1e309",
                                         "0.01e310",
                                         "100e306",
                                         "1000e306",
                                         "4.9e-324",
                                         "2.4703282292062327e-324",
                                         "2.4703282292062328e-324",
                                         "1e-400",
                                         "-1e-400",
                                         "2.2250738585072011e-308",
                                         "2.2250738585072014e-308",
                                         "0.1",
                                         "0.30000000000000004",
                                         "123456789012345678901234567890",
                                         "1E+2",
                                         "1e-2",
                                         "1E2",
                                         "5e-1",
                                         "9007199254740993",
                                         "9007199254740993.0",
                                         "3.141592653589793238462643383279502884197",
                                         "0.000000000000000000000000000000000000000000001e330"};
    switch (pick(0, 4)) {
      case 0:
        return kEdges[pick(0, static_cast<int>(std::size(kEdges)) - 1)];
      case 1:
        return std::to_string(pick(-1000, 100000));
      case 2: {  // many digits, maybe a fraction and an exponent
        std::string s = pick(0, 1) != 0 ? "-" : "";
        s += static_cast<char>('1' + pick(0, 8));
        for (int i = pick(0, 30); i > 0; --i) s += static_cast<char>('0' + pick(0, 9));
        if (pick(0, 1) != 0) {
          s += '.';
          for (int i = pick(1, 30); i > 0; --i) s += static_cast<char>('0' + pick(0, 9));
        }
        if (pick(0, 1) != 0)
          s += "e" + std::string(pick(0, 1) != 0 ? "-" : "") + std::to_string(pick(0, 340));
        return s;
      }
      case 3: {  // a long run of digits (rapidjson's full precision path)
        std::string s = "0.";
        for (int i = pick(300, 800); i > 0; --i) s += static_cast<char>('0' + pick(0, 9));
        return s + "e" + std::to_string(pick(-20, 20));
      }
      default:
        return std::to_string(pick(0, 1000)) + "." + std::to_string(pick(0, 999)) + "e" +
               std::to_string(pick(-330, 330));
    }
  }

  // A JSON string (quotes included).
  std::string string() {
    static const char* const kPieces[] = {"a",
                                          "Z",
                                          " ",
                                          "ASCEND_VISIBLE_DEVICES=0-7",
                                          "/dev/davinci0",
                                          "\\n",
                                          "\\\"",
                                          "\\\\",
                                          "\\/",
                                          "\\b",
                                          "\\f",
                                          "\\r",
                                          "\\t",
                                          "\\u0000",
                                          "\\u001f",
                                          "\\u001a",
                                          "\\u00e9",
                                          "\\u20AC",
                                          "\\uD83D\\uDE00",
                                          "\\ud83d\\ude00",
                                          "\xc3\xa9",
                                          "\xe2\x82\xac",
                                          "\xf0\x9f\x98\x80",
                                          "\x7f",
                                          "\xef\xbf\xbf",
                                          "\xf4\x8f\xbf\xbf"};
    static const char* const kBad[] = {"\\uDC00",
                                       "\\uD800",
                                       "\\uD800\\u0041",
                                       "\\uDBFF\\uDBFF",
                                       "\xc0\x80",
                                       "\xed\xa0\x80",
                                       "\xed\xbf\xbf",
                                       "\xf4\x90\x80\x80",
                                       "\xf5\x80\x80",
                                       "\xff",
                                       "\xc3",
                                       "\xe2\x82",
                                       "\x01",
                                       "\x1b",
                                       "\\x",
                                       "\\u12",
                                       "\xe0\x80\x80",
                                       "\\uDE00",
                                       "\\uDFFF\\uD800"};
    std::string s = "\"";
    for (int i = pick(0, 6); i > 0; --i) {
      if (pick(0, 40) == 0) {
        s += kBad[pick(0, static_cast<int>(std::size(kBad)) - 1)];
      } else {
        s += kPieces[pick(0, static_cast<int>(std::size(kPieces)) - 1)];
      }
    }
    return s + "\"";
  }

  int pick(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }

 private:
  void space(std::string& out) {
    static const char* const kSpace[] = {"", "", "", " ", "\n", "\t", "\r\n  "};
    out += kSpace[pick(0, 6)];
  }

  void value(std::string& out, int depth) {
    const int kind = depth > 6 ? pick(0, 4) : pick(0, 6);
    switch (kind) {
      case 0:
        out += "null";
        break;
      case 1:
        out += pick(0, 1) != 0 ? "true" : "false";
        break;
      case 2:
        out += number();
        break;
      case 3:
      case 4:
        out += string();
        break;
      case 5:
        array(out, depth + 1);
        break;
      default:
        object(out, depth + 1);
    }
  }

  void array(std::string& out, int depth) {
    out += '[';
    for (int i = pick(0, 5), first = 1; i > 0; --i, first = 0) {
      if (first == 0) out += ',';
      space(out);
      value(out, depth);
      space(out);
    }
    out += ']';
  }

  void object(std::string& out, int depth) {
    static const char* const kKeys[] = {"\"a\"", "\"b\"", "\"env\"",     "\"path\"",    "\"mounts\"",
                                        "\"\"",  "\"a\"", "\"\\u0061\"", "\"\xc3\xa9\""};
    out += '{';
    for (int i = pick(0, 6), first = 1; i > 0; --i, first = 0) {
      if (first == 0) out += ',';
      space(out);
      out += pick(0, 5) == 0 ? string() : kKeys[pick(0, static_cast<int>(std::size(kKeys)) - 1)];
      space(out);
      out += ':';
      space(out);
      value(out, depth);
      space(out);
    }
    out += '}';
  }

  std::mt19937 rng_;
};

// Texts every reader must agree with nlohmann on: duplicates, nesting, encodings, numbers, what may follow
// the document, NUL bytes.
inline std::vector<std::string> hostile_json_texts() {
  std::vector<std::string> t = {
      R"({"a":1,"a":2})",
      R"({"a":1,"b":2,"a":3})",
      R"({"a":{"x":1},"b":0,"a":[1,2]})",
      R"({"a":1,"\u0061":2})",
      R"({"process":{"env":["A=1"]},"process":{"env":["ASCEND_VISIBLE_DEVICES=0"]}})",
      R"({"a":1,"b":2,"c":3,"a":4,"b":5})",
      "{}",
      "[]",
      "",
      " ",
      "{",
      "{}}",
      "{} {}",
      "{}  \n\t\r ",
      "{}x",
      "{},",
      " {} ",
      "\xef\xbb\xbf{}",
      "\xef\xbb{}",
      "\xef\xbb\xbf\xef\xbb\xbf{}",
      std::string("{}\0", 3),
      std::string("{\"a\":\"b\0\"}", 10),
      std::string("{\"a\":1}\0garbage", 15),
      std::string("\0{}", 3),
      R"({"a":"\uDC00"})",
      R"({"a":"\uD800"})",
      R"({"a":"\uD800\uDC00"})",
      R"({"a":"\uDBFF\uDFFF"})",
      R"({"\uDC00":1})",
      R"({"a":"x\uDFFFy"})",
      "{\"a\":\"\xc0\x80\"}",
      "{\"a\":\"\xed\xa0\x80\"}",
      "{\"a\":\"\xf4\x90\x80\x80\"}",
      "{\"a\":\"\xff\"}",
      // A text that ends inside a character: rapidjson 1.1's validation reads up to three bytes past it.
      "{\"a\":\"\xf0",
      "[\"\xe2\x82",
      "\"\xf4",
      "{\"\xff\":1}",
      "{\"a\":\"\x1f\"}",
      "{\"a\":\"\x1a\"}",  // 0x1A-0x1F: rapidjson 1.1's SSE2 scans take them for plain characters
      R"({"a":"\u001a\u001e x"})",
      "{\"a\":\"\x7f\"}",
      R"({"a":9223372036854775807,"b":-9223372036854775808,"c":18446744073709551615})",
      R"({"a":18446744073709551616,"b":-9223372036854775809})",
      R"({"a":1e400})",
      R"({"a":-1e400})",
      R"({"a":0e400})",
      R"({"a":0.0e99999})",
      R"({"a":1e-400})",
      R"({"a":-0})",
      R"({"a":-0.0})",
      R"({"a":01})",
      R"({"a":1.})",
      R"({"a":.1})",
      R"({"a":+1})",
      R"({"a":1e})",
      R"({"a":NaN})",
      R"({"a":Infinity})",
      R"({"a":1,})",
      R"([1,2,])",
      R"({"a":1/*c*/})",
      R"({'a':1})",
      R"({"a":tru})",
      R"({"a":nul})",
      R"({"a":True})",
  };
  for (int depth : {63, 64, 65, 1000}) {
    t.push_back("{\"a\":" + std::string(static_cast<std::size_t>(depth), '[') +
                std::string(static_cast<std::size_t>(depth), ']') + "}");
  }
  t.push_back(std::string(100000, '[') + std::string(100000, ']'));
  t.push_back(std::string(100000, '['));
  return t;
}

}  // namespace ascend::testing
