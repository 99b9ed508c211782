// The one way user-facing JSON is read: duplicate keys are refused (a JSON
// object would silently keep the last), and every parse or type problem is a
// one-line hymba::Error naming the file and the field, never a raw
// nlohmann exception.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace hymba {

// Parses text; `source` (a path) starts every message. Errors:
//   "SOURCE: not valid JSON (line 3, column 7: ...)"
//   "SOURCE: field 'run.lr': number overflow parsing '1e400'"
//   "SOURCE: field 'run' has key 'lr' twice"
nlohmann::json parse_json(std::string_view text, const std::string& source);

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
