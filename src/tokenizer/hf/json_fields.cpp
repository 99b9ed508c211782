#include "tokenizer/hf/json_fields.h"

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/excerpt.h"

namespace hymba::tok {

using nlohmann::json;

std::string sub(const std::string& where, const std::string& suffix) {
  if (!where.empty() && where.back() == '\'') return where.substr(0, where.size() - 1) + suffix + "'";
  return where + suffix;
}

const json& field(const json& j, const char* key, const std::string& where) {
  HYMBA_CHECK(j.is_object() && j.contains(key), sub(where, std::string(".") + key), " is missing");
  return j[key];
}

const json& field_array(const json& j, const char* key, const std::string& where) {
  const json& v = field(j, key, where);
  HYMBA_CHECK(v.is_array(), sub(where, std::string(".") + key), " must be a list");
  return v;
}

bool field_bool(const json& j, const char* key, const std::string& where, bool def) {
  if (!j.is_object() || !j.contains(key) || j[key].is_null()) return def;
  HYMBA_CHECK(j[key].is_boolean(), sub(where, std::string(".") + key), " must be true or false");
  return j[key].get<bool>();
}

std::string field_string(const json& j, const char* key, const std::string& where) {
  const json& v = field(j, key, where);
  HYMBA_CHECK(v.is_string(), sub(where, std::string(".") + key), " must be a string");
  return v.get<std::string>();
}

std::string field_string_or(const json& j, const char* key, const std::string& where, const std::string& def) {
  if (!j.is_object() || !j.contains(key) || j[key].is_null()) return def;
  return field_string(j, key, where);
}

int64_t field_int(const json& j, const char* key, const std::string& where, int64_t def, int64_t lo, int64_t hi) {
  if (!j.is_object() || !j.contains(key) || j[key].is_null()) return def;
  const json& v = j[key];
  HYMBA_CHECK(v.is_number_integer() && v.get<int64_t>() >= lo && v.get<int64_t>() <= hi,
              sub(where, std::string(".") + key), " must be an integer in ", lo, "..", hi);
  return v.get<int64_t>();
}

std::string component_type(const json& j, const std::string& where) {
  HYMBA_CHECK(j.is_object() && j.contains("type") && j["type"].is_string(), where,
              " must be an object with a string \"type\"");
  return j["type"].get<std::string>();
}

void check_sequence_depth(const std::string& where, int depth) {
  HYMBA_CHECK(depth < 8, where, " nests Sequence components more than 8 deep");
}

void unsupported(const std::string& where, const std::string& type, const char* supported) {
  fail(where, " has type \"", excerpt(type), "\", which is not supported (supported: ", supported, ")");
}

}  // namespace hymba::tok
