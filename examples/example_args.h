// A minimal flag reader for the two examples, so they need nothing but
// hymba::hymba: positional arguments, then --name VALUE pairs; --help prints
// the usage. Bad input is one line on stderr and exit status 2.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

namespace example {

struct Args {
  std::vector<std::string> positional;
  std::map<std::string, std::string> flags;  // "--steps" -> "20"

  // Parses argv; prints `usage` and exits on --help, on a flag not in
  // `known` or without a value, and when the positional count is not `want`.
  Args(int argc, char** argv, const char* usage, size_t want, const std::vector<std::string>& known)
      : program(argv[0]) {
    for (int i = 1; i < argc; ++i) {
      const std::string a = argv[i];
      if (a == "-h" || a == "--help") {
        std::printf("%s", usage);
        std::exit(0);
      }
      if (a.rfind("--", 0) != 0) {
        positional.push_back(a);
        continue;
      }
      bool ok = false;
      for (const std::string& k : known) ok = ok || k == a;
      if (!ok) die("unknown flag " + a);
      if (i + 1 >= argc) die(a + " needs a value");
      flags[a] = argv[++i];
    }
    if (positional.size() != want)
      die("expected " + std::to_string(want) + " arguments, got " + std::to_string(positional.size()));
  }

  std::string str(const std::string& flag, const std::string& fallback) const {
    auto it = flags.find(flag);
    return it == flags.end() ? fallback : it->second;
  }
  // A number, or the fallback when the flag is absent; the whole text must parse.
  double number(const std::string& flag, double fallback) const {
    auto it = flags.find(flag);
    if (it == flags.end()) return fallback;
    char* end = nullptr;
    const double v = std::strtod(it->second.c_str(), &end);
    if (it->second.empty() || *end != '\0') die(flag + ": '" + it->second + "' is not a number");
    return v;
  }

  [[noreturn]] void die(const std::string& why) const {
    std::fprintf(stderr, "%s: error: %s (see --help)\n", program.c_str(), why.c_str());
    std::exit(2);
  }

  std::string program;
};

}  // namespace example
