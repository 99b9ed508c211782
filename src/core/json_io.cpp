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

}  // namespace

json parse_json(std::string_view text, const std::string& source) {
  std::vector<Frame> stack;
  // The callback tracks the field being read, for messages, and refuses a
  // key seen before in the same object.
  auto on_event = [&](int, json::parse_event_t event, json& parsed) {
    switch (event) {
      case json::parse_event_t::object_start:
      case json::parse_event_t::array_start:
        if (!stack.empty() && !stack.back().object) ++stack.back().index;
        stack.push_back(Frame{event == json::parse_event_t::object_start, {}, {}, -1});
        break;
      case json::parse_event_t::key: {
        Frame& f = stack.back();
        f.key = parsed.get<std::string>();
        if (!f.keys.insert(f.key).second) {
          f.key.clear();
          const std::string where = path_of(stack);
          fail(source, ": ", where.empty() ? std::string("the top-level object") : "field '" + where + "'",
               " has key '", parsed.get<std::string>(), "' twice");
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
    fail(source, ": not valid JSON (", without_tag(e.what()), ")");
  } catch (const json::exception& e) {
    // Raised inside a value (a number out of range): name the field.
    if (!stack.empty() && !stack.back().object) ++stack.back().index;
    const std::string where = path_of(stack);
    fail(source, ": ", where.empty() ? std::string("value") : "field '" + where + "'", ": ", without_tag(e.what()));
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
  fail(where(name), " must be ", expected, " (got ", j_.at(name).dump(), ")");
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
