// Shared by the libFuzzer harnesses (docs/security.md). Each harness feeds
// one input to one parser the way the engine reads that file, and accepts
// exactly one outcome besides success: a hymba::Error (the one-line refusal
// every parser must give). Anything else escapes and libFuzzer reports it:
// a sanitizer report, a crash, a raw nlohmann / std::filesystem /
// std::out_of_range exception (which the CLI would print as an internal
// error), a stack overflow, a leak, an allocation past -malloc_limit_mb or a
// timeout.
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>

#include "core/error.h"
#include "core/excerpt.h"

namespace hymba::fuzz {

// A directory of this process's own under $TMPDIR (or /tmp), made once and
// removed at exit; harnesses write their input there when the parser reads
// a path (as the engine's loaders do).
inline const std::filesystem::path& work_dir() {
  static const std::filesystem::path dir = [] {
    const char* tmp = std::getenv("TMPDIR");
    std::filesystem::path d = std::filesystem::path(tmp != nullptr && *tmp ? tmp : "/tmp") /
                              ("hymba_fuzz_" + std::to_string(::getpid()));
    std::filesystem::create_directories(d);
    static const struct Cleanup {
      std::filesystem::path p;
      ~Cleanup() {
        std::error_code ec;
        std::filesystem::remove_all(p, ec);
      }
    } cleanup{d};
    return d;
  }();
  return dir;
}

// Writes bytes to `name` in the work directory (or a subdirectory of it) and
// returns the path.
inline std::string write_input(const std::string& name, std::string_view bytes) {
  const std::filesystem::path p = work_dir() / name;
  std::filesystem::create_directories(p.parent_path());
  std::FILE* f = std::fopen(p.c_str(), "wb");
  if (f == nullptr) std::abort();
  if (!bytes.empty() && std::fwrite(bytes.data(), 1, bytes.size(), f) != bytes.size()) std::abort();
  std::fclose(f);
  return p.string();
}

inline std::string_view as_text(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// Runs `body`; a hymba::Error is the expected refusal. Its message must be
// one line and short enough to read: an over-long or multi-line message is
// a defect too (messages quote at most ~80 bytes of a value).
// `backstop`: the start of a last-resort message (a reader's catch-all for a
// raw library exception): the user gets a clean line, but the field read
// without a type check should be found and fixed, so it counts as a defect.
template <typename Body>
void expect_clean(Body&& body, const std::string& backstop = "") {
  try {
    body();
  } catch (const hymba::Error& e) {
    const std::string_view msg = e.what();
    if (msg.find('\n') != std::string_view::npos || msg.size() > 600) {
      std::fprintf(stderr, "fuzz: unclear error message (%zu bytes): %.300s\n", msg.size(), e.what());
      std::abort();
    }
    if (!backstop.empty() && msg.substr(0, backstop.size()) == backstop) {
      std::fprintf(stderr, "fuzz: a JSON field was read without a type check: %.300s\n", e.what());
      std::abort();
    }
  }
}

}  // namespace hymba::fuzz
