// Small helpers shared by the synth settings readers: one-line errors naming
// a flag, and typed reads of JSON keys with unknown keys rejected.
#pragma once

#include <set>
#include <string>
#include <type_traits>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace hymba::synth {

// Throws "FLAG: why" unless ok.
inline void need(bool ok, const char* flag, const std::string& why) {
  if (!ok) fail(flag, ": ", why);
}

// Reads the keys of `j` into fields by name; unknown keys and wrong types are
// errors naming `source` and the key.
class JsonFields {
 public:
  JsonFields(const nlohmann::json& j, std::string source) : j_(j), source_(std::move(source)) {
    HYMBA_CHECK(j.is_object(), source_, ": expected a JSON object");
  }
  template <class T>
  void get(const char* key, T& out) {
    if (!j_.contains(key)) return;
    seen_.insert(key);
    const nlohmann::json& v = j_.at(key);
    if constexpr (std::is_same_v<T, std::string>) {
      HYMBA_CHECK(v.is_string(), source_, ": '", key, "' must be a string");
    } else if constexpr (std::is_same_v<T, bool>) {
      HYMBA_CHECK(v.is_boolean(), source_, ": '", key, "' must be true or false");
    } else if constexpr (std::is_unsigned_v<T>) {
      HYMBA_CHECK(v.is_number_unsigned(), source_, ": '", key, "' must be a non-negative integer");
    } else if constexpr (std::is_integral_v<T>) {
      HYMBA_CHECK(v.is_number_integer(), source_, ": '", key, "' must be an integer");
    } else {
      HYMBA_CHECK(v.is_number(), source_, ": '", key, "' must be a number");
    }
    out = v.get<T>();
  }
  void reject_unknown() const {
    for (auto it = j_.begin(); it != j_.end(); ++it)
      HYMBA_CHECK(seen_.count(it.key()) != 0, source_, ": unknown key '", it.key(), "'");
  }

 private:
  const nlohmann::json& j_;
  std::string source_;
  std::set<std::string> seen_;
};

}  // namespace hymba::synth
