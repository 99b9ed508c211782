// Reading tokenizer.json fields with one-line errors. A location reads
// "tok.json: field 'pre_tokenizer.pretokenizers[1]'"; sub() names a field in it.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json_fwd.hpp>

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
// Refuses a component type, naming it in full and what is supported.
[[noreturn]] void unsupported(const std::string& where, const std::string& type, const char* supported);

}  // namespace hymba::tok
