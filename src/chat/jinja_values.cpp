// Runtime values of the Jinja interpreter: truthiness, printing and JSON
// as @huggingface/jinja has them (which follow JavaScript where Python's
// Jinja would differ: booleans print "true", 2.0 prints "2.0").
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "chat/jinja_ast.h"

namespace hymba::jinja {

const Value* Object::find(std::string_view key) const {
  for (const auto& [k, v] : entries)
    if (k == key) return &v;
  return nullptr;
}

void Object::set(const std::string& key, Value v) {
  for (auto& entry : entries)
    if (entry.first == key) {
      entry.second = std::move(v);
      return;
    }
  entries.emplace_back(key, std::move(v));
}

const Value* Args::kwarg(std::string_view name) const {
  for (const auto& [k, v] : keyword)
    if (k == name) return &v;
  return nullptr;
}

const Value* Args::get(size_t i, std::string_view name) const {
  if (i < positional.size()) return &positional[i];
  return kwarg(name);
}

bool Value::truthy() const {
  switch (kind) {
    case Kind::kUndefined:
    case Kind::kNull:
      return false;
    case Kind::kBool:
      return boolean;
    case Kind::kInt:
      return integer != 0;
    case Kind::kFloat:
      return number != 0 && !std::isnan(number);
    case Kind::kString:
      return !string.empty();
    case Kind::kArray:
      return !array->empty();
    case Kind::kObject:
      return !object->entries.empty();
    case Kind::kNamespace:
    case Kind::kFunction:
      return true;
  }
  return false;
}

const char* Value::type_name() const {
  switch (kind) {
    case Kind::kUndefined: return "UndefinedValue";
    case Kind::kNull: return "NullValue";
    case Kind::kBool: return "BooleanValue";
    case Kind::kInt: return "IntegerValue";
    case Kind::kFloat: return "FloatValue";
    case Kind::kString: return "StringValue";
    case Kind::kArray: return "ArrayValue";
    case Kind::kObject: return "ObjectValue";
    case Kind::kNamespace: return "NamespaceValue";
    case Kind::kFunction: return "FunctionValue";
  }
  return "?";
}

std::string js_number(double d) {
  if (std::isnan(d)) return "NaN";
  if (std::isinf(d)) return d > 0 ? "Infinity" : "-Infinity";
  if (d == 0) return "0";
  // Shortest round-trip digits, laid out as ECMAScript's Number::toString.
  char buf[64];
  const auto res = std::to_chars(buf, buf + sizeof(buf), d, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  const bool negative = sci[0] == '-';
  if (negative) sci.erase(0, 1);
  const size_t e = sci.find('e');
  std::string digits = sci.substr(0, e);
  digits.erase(std::remove(digits.begin(), digits.end(), '.'), digits.end());
  const int exponent = std::stoi(sci.substr(e + 1));
  const int k = static_cast<int>(digits.size()), n = exponent + 1;
  std::string out;
  if (k <= n && n <= 21) {
    out = digits + std::string(static_cast<size_t>(n - k), '0');
  } else if (0 < n && n <= 21) {
    out = digits.substr(0, static_cast<size_t>(n)) + "." + digits.substr(static_cast<size_t>(n));
  } else if (-6 < n && n <= 0) {
    out = "0." + std::string(static_cast<size_t>(-n), '0') + digits;
  } else {
    out = digits.substr(0, 1);
    if (k > 1) out += "." + digits.substr(1);
    out += (n - 1 >= 0 ? "e+" : "e-") + std::to_string(std::abs(n - 1));
  }
  return negative ? "-" + out : out;
}

int64_t utf16_length(std::string_view s) {
  int64_t n = 0;
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if ((c & 0xC0) != 0x80) n += c >= 0xF0 ? 2 : 1;  // 4-byte sequences are surrogate pairs in JS
  }
  return n;
}

namespace {

// JSON.stringify of a string (JS escapes: \" \\ \b \f \n \r \t, \u00XX for
// other controls, lone surrogates aside; everything else as is).
std::string json_string(std::string_view s, bool ensure_ascii) {
  std::string out = "\"";
  for (size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    switch (c) {
      case '"': out += "\\\""; continue;
      case '\\': out += "\\\\"; continue;
      case '\b': out += "\\b"; continue;
      case '\f': out += "\\f"; continue;
      case '\n': out += "\\n"; continue;
      case '\r': out += "\\r"; continue;
      case '\t': out += "\\t"; continue;
      default: break;
    }
    char hex[16];
    if (c < 0x20) {
      std::snprintf(hex, sizeof(hex), "\\u%04x", c);
      out += hex;
    } else if (ensure_ascii && c >= 0x7f) {
      // Python-style \uXXXX for each UTF-16 unit (makeAsciiSafe).
      uint32_t cp = c;
      size_t n = 1;
      if (c >= 0xC0) {
        n = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2;
        cp = c & (0xFF >> (n + 1));
        for (size_t k = 1; k < n && i + k < s.size(); ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
      }
      i += n - 1;
      if (cp >= 0x10000) {
        cp -= 0x10000;
        std::snprintf(hex, sizeof(hex), "\\u%04x\\u%04x", 0xD800 + (cp >> 10), 0xDC00 + (cp & 0x3FF));
      } else {
        std::snprintf(hex, sizeof(hex), "\\u%04x", cp);
      }
      out += hex;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

}  // namespace

std::string to_json(const Value& v, const JsonOptions& o, int depth, bool undefined_as_null) {
  if (depth > kMaxNesting) throw SyntaxError("a value nests too deeply to write as JSON");
  std::string item_sep = o.has_separators ? o.item_separator : o.indent > 0 ? "," : ", ";
  std::string key_sep = o.has_separators ? o.key_separator : ": ";
  switch (v.kind) {
    case Value::Kind::kNull: return "null";
    case Value::Kind::kUndefined: return undefined_as_null ? "null" : "undefined";
    case Value::Kind::kInt: return std::to_string(v.integer);
    case Value::Kind::kFloat: return std::isfinite(v.number) ? js_number(v.number) : "null";
    case Value::Kind::kBool: return v.boolean ? "true" : "false";
    case Value::Kind::kString: return json_string(v.string, o.ensure_ascii);
    case Value::Kind::kFunction: throw SyntaxError("cannot convert a function to JSON");
    default: break;
  }
  const std::string indent = o.indent > 0 ? std::string(static_cast<size_t>(o.indent), ' ') : "";
  std::string base = "\n";
  for (int d = 0; d < depth; ++d) base += indent;
  const std::string child = base + indent;
  std::vector<std::string> core;
  if (v.kind == Value::Kind::kArray) {
    for (const Value& x : *v.array) core.push_back(to_json(x, o, depth + 1, undefined_as_null));
  } else {
    auto entries = v.object->entries;
    if (o.sort_keys)  // localeCompare; byte order agrees for ASCII keys
      std::stable_sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    for (const auto& [key, value] : entries)
      core.push_back((o.indent > 0 ? child : "") + json_string(key, o.ensure_ascii) + key_sep +
                     to_json(value, o, depth + 1, undefined_as_null));
  }
  std::string out;
  const bool array = v.kind == Value::Kind::kArray;
  out += array ? "[" : "{";
  const bool spread = o.indent > 0 && !core.empty();
  if (spread && array) out += child;
  for (size_t i = 0; i < core.size(); ++i) {
    if (i > 0) out += array && spread ? item_sep + child : item_sep;
    out += core[i];
    if (out.size() > kMaxStringBytes) throw SyntaxError("a JSON text is larger than 16 MiB");
  }
  if (spread) out += base;
  out += array ? "]" : "}";
  return out;
}

std::string Value::to_output() const {
  switch (kind) {
    case Kind::kUndefined: return "undefined";
    case Kind::kNull: return "null";
    case Kind::kBool: return boolean ? "true" : "false";
    case Kind::kInt: return std::to_string(integer);
    case Kind::kFloat:
      if (number == 0 && std::signbit(number)) return "-0.0";
      if (std::isfinite(number) && number == std::floor(number) && std::fabs(number) < 1e21) {
        return js_number(number) + ".0";
      }
      return js_number(number);
    case Kind::kString: return string;
    case Kind::kArray:
    case Kind::kObject:
    case Kind::kNamespace: return to_json(*this, {}, 0, false);
    case Kind::kFunction: throw SyntaxError("cannot print a function");
  }
  return "";
}

}  // namespace hymba::jinja
