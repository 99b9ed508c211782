// The one way user-facing JSON is read: duplicate keys are refused (a JSON
// object would silently keep the last), and every parse or type problem is a
// one-line hymba::Error naming the file and the field, never a raw
// nlohmann exception.
#pragma once

#include <cstddef>
#include <cstdint>
#include <exception>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/excerpt.h"

namespace hymba {

// Deepest nesting of arrays and objects any file may have. Every file the
// engine reads nests a few levels; a bound keeps every recursive walk of a
// parsed value (copy, compare, dump) far from the end of the stack.
inline constexpr int kMaxJsonDepth = 128;

// Parses text; `source` (a path) starts every message. Errors:
//   "SOURCE: not valid JSON (line 3, column 7: ...)"
//   "SOURCE: field 'run.lr': number overflow parsing '1e400'"
//   "SOURCE: field 'run' has key 'lr' twice"
//   "SOURCE: field 'a[0][0]...' nests arrays and objects deeper than 128 levels"
nlohmann::json parse_json(std::string_view text, const std::string& source, int max_depth = kMaxJsonDepth);

// A JSON value for a one-line message: at most about `max` characters of its
// compact serialisation (strings escaped, invalid UTF-8 replaced), "..." when
// cut. Never serialises the whole of a large value.
std::string json_excerpt(const nlohmann::json& value, std::size_t max = 80);

// nlohmann's what() without its "[json.exception.KIND.ID] " tag.
std::string json_error_message(const std::exception& e);

// Optional fields of an object, read without nlohmann's value() (whose type
// errors would escape as raw exceptions): the fallback when the key is absent
// or null; a wrong type is a hymba::Error "SOURCE: field 'PREFIXkey' must be
// true or false (got 1)". `object` need not be an object (then: fallback).
bool optional_bool(const nlohmann::json& object, const char* key, bool fallback, const std::string& source,
                   const std::string& prefix = "");
std::string optional_string(const nlohmann::json& object, const char* key, const std::string& fallback,
                            const std::string& source, const std::string& prefix = "");

// Typed, required fields of one JSON object, with errors such as
//   "SOURCE: field 'step' is missing" or
//   "SOURCE: field 'step' must be an integer (got \"ten\")".
// `prefix` names nested objects in messages ("run." for fields of "run").
class JsonFields {
 public:
  JsonFields(const nlohmann::json& object, std::string source, std::string prefix = "");

  bool has(const char* name) const { return j_.contains(name); }
  const nlohmann::json& at(const char* name) const;  // present (any type)
  int64_t i64(const char* name) const;
  uint64_t u64(const char* name) const;
  double f64(const char* name) const;                // any number
  double f64_or_null(const char* name, double if_null) const;
  bool boolean(const char* name) const;
  std::string str(const char* name) const;
  JsonFields object(const char* name) const;         // a nested object's fields

  const nlohmann::json& value() const { return j_; }
  const std::string& source() const { return source_; }
  // "SOURCE: field 'PREFIX.name'" for messages of callers.
  std::string where(const char* name) const;

 private:
  [[noreturn]] void wrong_type(const char* name, const char* expected) const;
  const nlohmann::json& j_;
  std::string source_, prefix_;
};

}  // namespace hymba
