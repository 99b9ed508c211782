// Reading tokenizer.json fields with one-line errors. A location reads
// "tok.json: field 'pre_tokenizer.pretokenizers[1]'"; sub() names a field in it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace hymba::tok {

// "file: field 'a.b'" + ".c" -> "file: field 'a.b.c'".
std::string sub(const std::string& where, const std::string& suffix);

const nlohmann::json& field(const nlohmann::json& j, const char* key, const std::string& where);
const nlohmann::json& field_array(const nlohmann::json& j, const char* key, const std::string& where);
// Absent or null fields give the default.
bool field_bool(const nlohmann::json& j, const char* key, const std::string& where, bool def);
std::string field_string(const nlohmann::json& j, const char* key, const std::string& where);
std::string field_string_or(const nlohmann::json& j, const char* key, const std::string& where, const std::string& def);
int64_t field_int(const nlohmann::json& j, const char* key, const std::string& where, int64_t def, int64_t lo,
                  int64_t hi);

// The "type" of a component object.
std::string component_type(const nlohmann::json& j, const std::string& where);
void check_sequence_depth(const std::string& where, int depth);

// The parts of a Sequence component: list `key` of `j`, each made by
// make(json, where, depth + 1). A hostile file could nest sequences deep
// enough to exhaust the stack, so nesting stops at 8.
template <typename T, typename Make>
std::vector<std::unique_ptr<T>> sequence_parts(const nlohmann::json& j, const char* key, const std::string& where,
                                               int depth, Make&& make) {
  check_sequence_depth(where, depth);
  const nlohmann::json& list = field_array(j, key, where);
  std::vector<std::unique_ptr<T>> parts;
  for (size_t i = 0; i < list.size(); ++i)
    parts.push_back(make(list[i], sub(where, std::string(".") + key + "[" + std::to_string(i) + "]"), depth + 1));
  return parts;
}

// Refuses a component type, naming it in full and what is supported.
[[noreturn]] void unsupported(const std::string& where, const std::string& type, const char* supported);

}  // namespace hymba::tok
