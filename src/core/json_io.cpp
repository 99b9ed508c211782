#include "core/json_io.h"

#include <set>
#include <vector>

#include "core/error.h"

namespace hymba {

using nlohmann::json;

namespace {

// Where the parser is: one frame per open object or array.
struct Frame {
  bool object = false;
  std::set<std::string> keys;
  std::string key;    // object: the key whose value is being read
  int64_t index = 0;  // array: the element being read
};

std::string path_of(const std::vector<Frame>& stack) {
  std::string path;
  for (const Frame& f : stack) {
    if (f.object) {
      if (f.key.empty()) continue;
      if (!path.empty()) path += '.';
      path += f.key;
    } else {
      path += '[' + std::to_string(f.index) + ']';
    }
  }
  return path;
}

// nlohmann's what() is "[json.exception.KIND.ID] message": keep the message.
std::string without_tag(const char* what) {
  const std::string s = what;
  const size_t end = s.find("] ");
  return s.rfind("[json.exception", 0) == 0 && end != std::string::npos ? s.substr(end + 2) : s;
}

// A field path for a message: long paths (deep or long keys) are cut.
std::string field_of(const std::vector<Frame>& stack) { return excerpt(path_of(stack)); }

void excerpt_into(const json& v, std::string& out, std::size_t max, int depth) {
  if (out.size() > max) return;
  auto quoted = [&](const std::string& s) {
    const std::string cut = s.size() > max ? s.substr(0, max) : s;
    out += json(cut).dump(-1, ' ', false, json::error_handler_t::replace);
  };
  switch (v.type()) {
    case json::value_t::string: quoted(v.get_ref<const std::string&>()); return;
    case json::value_t::array: {
      if (depth > 8) { out += "[...]"; return; }
      out += '[';
      bool first = true;
      for (const json& e : v) {
        if (out.size() > max) break;
        if (!first) out += ',';
        first = false;
        excerpt_into(e, out, max, depth + 1);
      }
      out += ']';
      return;
    }
    case json::value_t::object: {
      if (depth > 8) { out += "{...}"; return; }
      out += '{';
      bool first = true;
      for (auto it = v.begin(); it != v.end(); ++it) {
        if (out.size() > max) break;
        if (!first) out += ',';
        first = false;
        quoted(it.key());
        out += ':';
        excerpt_into(it.value(), out, max, depth + 1);
      }
      out += '}';
      return;
    }
    case json::value_t::binary: out += "<binary>"; return;
    default: out += v.dump(); return;  // numbers, booleans, null, discarded: short
  }
}

}  // namespace

std::string json_excerpt(const json& value, std::size_t max) {
  std::string out;
  excerpt_into(value, out, max, 0);
  if (out.size() > max) {
    out.resize(max);
    // Drop a partial UTF-8 sequence at the cut.
    while (!out.empty() && (static_cast<unsigned char>(out.back()) & 0xC0) == 0x80) out.pop_back();
    if (!out.empty() && static_cast<unsigned char>(out.back()) >= 0xC0) out.pop_back();
    out += "...";
  }
  return out;
}

std::string json_error_message(const std::exception& e) { return without_tag(e.what()); }

bool optional_bool(const json& object, const char* key, bool fallback, const std::string& source,
                   const std::string& prefix) {
  if (!object.is_object()) return fallback;
  const auto it = object.find(key);
  if (it == object.end() || it->is_null()) return fallback;
  if (!it->is_boolean())
    fail(source, ": field '", prefix, key, "' must be true or false (got ", json_excerpt(*it), ")");
  return it->get<bool>();
}

std::string optional_string(const json& object, const char* key, const std::string& fallback,
                            const std::string& source, const std::string& prefix) {
  if (!object.is_object()) return fallback;
  const auto it = object.find(key);
  if (it == object.end() || it->is_null()) return fallback;
  if (!it->is_string()) fail(source, ": field '", prefix, key, "' must be a string (got ", json_excerpt(*it), ")");
  return it->get<std::string>();
}

json parse_json(std::string_view text, const std::string& source, int max_depth) {
  std::vector<Frame> stack;
  // The callback tracks the field being read, for messages, and refuses a
  // key seen before in the same object.
  auto on_event = [&](int, json::parse_event_t event, json& parsed) {
    switch (event) {
      case json::parse_event_t::object_start:
      case json::parse_event_t::array_start:
        if (!stack.empty() && !stack.back().object) ++stack.back().index;
        stack.push_back(Frame{event == json::parse_event_t::object_start, {}, {}, -1});
        if (static_cast<int64_t>(stack.size()) > max_depth) {
          const std::string where = field_of(stack);
          fail(source, ": ", where.empty() ? std::string("the value") : "field '" + where + "'",
               " nests arrays and objects deeper than ", max_depth, " levels");
        }
        break;
      case json::parse_event_t::key: {
        Frame& f = stack.back();
        f.key = parsed.get<std::string>();
        if (!f.keys.insert(f.key).second) {
          f.key.clear();
          const std::string where = field_of(stack);
          fail(source, ": ", where.empty() ? std::string("the top-level object") : "field '" + where + "'",
               " has key '", excerpt(parsed.get<std::string>()), "' twice");
        }
        break;
      }
      case json::parse_event_t::object_end:
      case json::parse_event_t::array_end:
        stack.pop_back();
        break;
      case json::parse_event_t::value:
        if (!stack.empty() && !stack.back().object) ++stack.back().index;
        break;
    }
    return true;
  };
  try {
    return json::parse(text.begin(), text.end(), on_event);
  } catch (const json::parse_error& e) {
    fail(source, ": not valid JSON (", excerpt(without_tag(e.what()), 160), ")");
  } catch (const json::exception& e) {
    // Raised inside a value (a number out of range): name the field.
    if (!stack.empty() && !stack.back().object) ++stack.back().index;
    const std::string where = field_of(stack);
    fail(source, ": ", where.empty() ? std::string("value") : "field '" + where + "'", ": ",
         excerpt(without_tag(e.what()), 160));
  }
}

JsonFields::JsonFields(const json& object, std::string source, std::string prefix)
    : j_(object), source_(std::move(source)), prefix_(std::move(prefix)) {
  HYMBA_CHECK(j_.is_object(), source_, ": ", prefix_.empty() ? std::string("expected a JSON object")
                                                              : "field '" + prefix_.substr(0, prefix_.size() - 1) +
                                                                    "' must be an object");
}

std::string JsonFields::where(const char* name) const { return source_ + ": field '" + prefix_ + name + "'"; }

void JsonFields::wrong_type(const char* name, const char* expected) const {
  fail(where(name), " must be ", expected, " (got ", json_excerpt(j_.at(name)), ")");
}

const json& JsonFields::at(const char* name) const {
  auto it = j_.find(name);
  HYMBA_CHECK(it != j_.end(), where(name), " is missing");
  return *it;
}

int64_t JsonFields::i64(const char* name) const {
  const json& v = at(name);
  if (!v.is_number_integer() || (v.is_number_unsigned() && v.get<uint64_t>() > INT64_MAX))
    wrong_type(name, "an integer");
  return v.get<int64_t>();
}

uint64_t JsonFields::u64(const char* name) const {
  const json& v = at(name);
  if (!v.is_number_unsigned()) wrong_type(name, "a non-negative integer");
  return v.get<uint64_t>();
}

double JsonFields::f64(const char* name) const {
  const json& v = at(name);
  if (!v.is_number()) wrong_type(name, "a number");
  return v.get<double>();
}

double JsonFields::f64_or_null(const char* name, double if_null) const {
  const json& v = at(name);
  if (v.is_null()) return if_null;
  if (!v.is_number()) wrong_type(name, "a number or null");
  return v.get<double>();
}

bool JsonFields::boolean(const char* name) const {
  const json& v = at(name);
  if (!v.is_boolean()) wrong_type(name, "true or false");
  return v.get<bool>();
}

std::string JsonFields::str(const char* name) const {
  const json& v = at(name);
  if (!v.is_string()) wrong_type(name, "a string");
  return v.get<std::string>();
}

JsonFields JsonFields::object(const char* name) const {
  const json& v = at(name);
  if (!v.is_object()) wrong_type(name, "an object");
  return JsonFields(v, source_, prefix_ + name + ".");
}

}  // namespace hymba
