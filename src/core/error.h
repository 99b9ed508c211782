// Project error type: a one-line message that names the offending field,
// file or flag. main() turns it into "hymba: error: <message>" and exit 1.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace hymba {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

namespace detail {
template <typename... Parts>
std::string concat(Parts&&... parts) {
  std::ostringstream out;
  (out << ... << std::forward<Parts>(parts));
  return out.str();
}
}  // namespace detail

// Throws hymba::Error with the parts streamed together.
template <typename... Parts>
[[noreturn]] void fail(Parts&&... parts) {
  throw Error(detail::concat(std::forward<Parts>(parts)...));
}

}  // namespace hymba

// Checks a condition that user input can break; the message names the culprit.
#define HYMBA_CHECK(cond, ...)                 \
  do {                                         \
    if (!(cond)) ::hymba::fail(__VA_ARGS__);   \
  } while (0)
