// A CLI11 check from one of the project's parsers (a function returning Result<T>): the option's value is
// refused with the parser's own message, so a flag, a config-file key and a library call say the same thing.
// Header-only; for the binaries' option tables.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <utility>

namespace ascend {

template <typename Parse>
CLI::Validator parsed_by(Parse parse, std::string what) {
  return CLI::Validator(
      [parse](std::string& v) -> std::string {
        auto r = parse(v);
        return r ? std::string() : r.error().message();
      },
      std::move(what));
}

}  // namespace ascend
