// Helpers shared by the fuzz targets: a scratch folder that lives as long as the fuzzing process (the
// targets that read files write each input there), and splitting an input into text parts.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

namespace ascend::fuzz {

// Stops the fuzzer with a message: an oracle's finding (libFuzzer records the input as a crash).
[[noreturn]] inline void fail(const std::string& what) {
  std::fprintf(stderr, "fuzz oracle: %s\n", what.c_str());
  std::abort();
}

inline void check(bool ok, const std::string& what) {
  if (!ok) fail(what);
}

// A folder under $TMPDIR (else /var/tmp) removed when the process exits normally.
class ScratchDir {
 public:
  ScratchDir() {
    const char* t = std::getenv("TMPDIR");
    std::string tmpl = std::string(t != nullptr && *t != '\0' ? t : "/var/tmp") + "/ascend-fuzz-XXXXXX";
    if (::mkdtemp(tmpl.data()) == nullptr) fail("mkdtemp " + tmpl);
    path_ = tmpl;
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& rel) const { return path_ + "/" + rel; }

 private:
  std::string path_;
};

inline void write_file(const std::string& path, std::string_view text) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(text.data(), static_cast<std::streamsize>(text.size()));
  if (!f) fail("write " + path);
}

// `text` cut at every line that is exactly `sep` (the separator lines are dropped).
inline std::vector<std::string_view> split_sections(std::string_view text, std::string_view sep) {
  std::vector<std::string_view> out;
  std::size_t start = 0;
  std::size_t pos = 0;
  while (pos <= text.size()) {
    std::size_t eol = text.find('\n', pos);
    std::size_t end = eol == std::string_view::npos ? text.size() : eol;
    if (text.substr(pos, end - pos) == sep) {
      out.push_back(text.substr(start, pos - start));
      start = eol == std::string_view::npos ? text.size() : eol + 1;
    }
    if (eol == std::string_view::npos) break;
    pos = eol + 1;
  }
  out.push_back(text.substr(start));
  return out;
}

// The lines of `text`, without their '\n'.
inline std::vector<std::string> lines(std::string_view text) {
  std::vector<std::string> out;
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t eol = text.find('\n', pos);
    if (eol == std::string_view::npos) eol = text.size();
    out.emplace_back(text.substr(pos, eol - pos));
    pos = eol + 1;
  }
  return out;
}

inline std::string_view as_text(const std::uint8_t* data, std::size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

}  // namespace ascend::fuzz
