// Evaluator of the Jinja subset, following @huggingface/jinja's Interpreter
// (operators, member access, filters, tests, string/dict methods), plus the
// JinjaTemplate front end that turns every failure into one line naming
// the template.
#include <algorithm>
#include <cmath>
#include <map>

#include "core/error.h"
#include "chat/jinja.h"
#include "chat/jinja_ast.h"

namespace hymba {

namespace jinja {

namespace {

using Kind = Value::Kind;

struct BreakSignal {};
struct ContinueSignal {};

class Env {
 public:
  explicit Env(Env* parent) : parent_(parent) {}
  void set(const std::string& name, Value v) { vars_[name] = std::move(v); }
  const Value* lookup(const std::string& name) const {
    for (const Env* e = this; e != nullptr; e = e->parent_)
      if (const auto it = e->vars_.find(name); it != e->vars_.end()) return &it->second;
    return nullptr;
  }

 private:
  Env* parent_;
  std::map<std::string, Value> vars_;
};

std::string check_size(std::string s) {
  if (s.size() > kMaxStringBytes) throw SyntaxError("the template made a string larger than 16 MiB");
  return s;
}

// String(value) of a JS primitive, as `~`, `+` on strings and join use it.
std::string raw_string(const Value& v) {
  switch (v.kind) {
    case Kind::kString: return v.string;
    case Kind::kInt: return std::to_string(v.integer);
    case Kind::kFloat: return js_number(v.number);
    case Kind::kBool: return v.boolean ? "true" : "false";
    case Kind::kNull: return "null";
    case Kind::kUndefined: return "undefined";
    default: throw SyntaxError(std::string("cannot turn a ") + v.type_name() + " into a string here");
  }
}

// JS Number(string), for == between a string and a number.
double js_to_number(const std::string& s) {
  const std::string t = js_trim(s, true, true);
  if (t.empty()) return 0;
  try {
    size_t used = 0;
    const double d = std::stod(t, &used);
    return used == t.size() ? d : NAN;
  } catch (const std::exception&) {
    return NAN;
  }
}

// JS loose equality of the raw values (left.value == right.value).
bool loose_equal(const Value& a, const Value& b) {
  if (a.is_undefined_or_null() || b.is_undefined_or_null()) return a.is_undefined_or_null() && b.is_undefined_or_null();
  const bool a_scalar = a.is_number() || a.is(Kind::kBool) || a.is(Kind::kString);
  const bool b_scalar = b.is_number() || b.is(Kind::kBool) || b.is(Kind::kString);
  if (a_scalar && b_scalar) {
    if (a.is(Kind::kString) && b.is(Kind::kString)) return a.string == b.string;
    const double x = a.is(Kind::kString) ? js_to_number(a.string) : a.as_double();
    const double y = b.is(Kind::kString) ? js_to_number(b.string) : b.as_double();
    return x == y;
  }
  if (a.kind != b.kind) return false;
  if (a.is(Kind::kArray)) return a.array == b.array;
  if (a.is(Kind::kObject) || a.is(Kind::kNamespace)) return a.object == b.object;
  return a.function == b.function;
}

// JS strict equality of the raw values (`in` on lists).
bool strict_equal(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) return a.as_double() == b.as_double();
  if (a.kind != b.kind) return false;
  return loose_equal(a, b);
}

std::vector<Value> slice(const std::vector<Value>& items, const Value& start_v, const Value& stop_v,
                         const Value& step_v) {
  const auto len = static_cast<int64_t>(items.size());
  const int64_t step = step_v.is(Kind::kInt) ? step_v.integer : 1;
  if (step == 0) throw SyntaxError("slice step cannot be zero");
  int64_t start = 0, stop = 0;
  if (step > 0) {
    start = start_v.is(Kind::kInt) ? start_v.integer : 0;
    stop = stop_v.is(Kind::kInt) ? stop_v.integer : len;
    start = start < 0 ? std::max(len + start, int64_t{0}) : std::min(start, len);
    stop = stop < 0 ? std::max(len + stop, int64_t{0}) : std::min(stop, len);
  } else {
    start = start_v.is(Kind::kInt) ? start_v.integer : len - 1;
    stop = stop_v.is(Kind::kInt) ? stop_v.integer : -1;
    start = start < 0 ? std::max(len + start, int64_t{-1}) : std::min(start, len - 1);
    stop = stop < -1 ? std::max(len + stop, int64_t{-1}) : std::min(stop, len - 1);
  }
  std::vector<Value> out;
  const int64_t dir = step > 0 ? 1 : -1;
  for (int64_t i = start; dir * i < dir * stop; i += step) out.push_back(items[static_cast<size_t>(i)]);
  return out;
}

// Splits UTF-8 text into code points (Array.from(string)).
std::vector<Value> code_points(const std::string& s) {
  std::vector<Value> out;
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t n = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    n = std::min(n, s.size() - i);
    out.push_back(Value::of(s.substr(i, n)));
    i += n;
  }
  return out;
}

std::string ascii_case(std::string s, bool upper) {
  for (char& c : s) {
    if (upper && c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
    if (!upper && c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return s;
}

bool is_word_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

std::string title_case(std::string s) {  // /\b\w/g upper-cased
  for (size_t i = 0; i < s.size(); ++i)
    if (is_word_char(s[i]) && (i == 0 || !is_word_char(s[i - 1])) && s[i] >= 'a' && s[i] <= 'z')
      s[i] = static_cast<char>(s[i] - 'a' + 'A');
  return s;
}

std::string replace_all(const std::string& s, const std::string& from, const std::string& to, int64_t count) {
  std::string out;
  size_t pos = 0;
  int64_t done = 0;
  if (from.empty()) {  // Python: insert `to` between every character
    const auto chars = code_points(s);
    for (const Value& c : chars) {
      if (count < 0 || done < count) {
        out += to;
        ++done;
      }
      out += c.string;
    }
    if (count < 0 || done < count) out += to;
    return check_size(out);
  }
  for (;;) {
    const size_t hit = s.find(from, pos);
    if (hit == std::string::npos || (count >= 0 && done >= count)) break;
    out.append(s, pos, hit - pos);
    out += to;
    pos = hit + from.size();
    ++done;
    if (out.size() > kMaxStringBytes) throw SyntaxError("the template made a string larger than 16 MiB");
  }
  out.append(s, pos, std::string::npos);
  return check_size(out);
}

// compareRuntimeValues: numbers (booleans count) and strings (case-folded
// unless case_sensitive); anything else cannot be ordered.
int compare_values(const Value& a, const Value& b, bool case_sensitive) {
  if (a.is_undefined_or_null() || b.is_undefined_or_null()) {
    if (a.kind == b.kind) return 0;
    throw SyntaxError(std::string("cannot compare ") + a.type_name() + " with " + b.type_name());
  }
  const bool a_num = a.is_number() || a.is(Kind::kBool), b_num = b.is_number() || b.is(Kind::kBool);
  if (a_num && b_num) return a.as_double() < b.as_double() ? -1 : a.as_double() > b.as_double() ? 1 : 0;
  if (!a.is(Kind::kString) || !b.is(Kind::kString))
    throw SyntaxError(std::string("cannot compare ") + a.type_name() + " with " + b.type_name());
  const std::string x = case_sensitive ? a.string : ascii_case(a.string, false);
  const std::string y = case_sensitive ? b.string : ascii_case(b.string, false);
  return x < y ? -1 : x > y ? 1 : 0;
}

Value sorted(const std::vector<Value>& items, bool reverse, bool case_sensitive, const std::string& attribute) {
  std::vector<Value> out = items;
  const auto key = [&](const Value& v) -> Value {
    if (attribute.empty()) return v;
    if (v.is(Kind::kObject) || v.is(Kind::kNamespace)) {
      const Value* found = v.object->find(attribute);
      return found != nullptr ? *found : Value{};
    }
    return Value{};
  };
  std::stable_sort(out.begin(), out.end(), [&](const Value& a, const Value& b) {
    const int c = compare_values(key(a), key(b), case_sensitive);
    return reverse ? c > 0 : c < 0;
  });
  return Value::of(std::move(out));
}

Value items_of(const Object& o) {
  std::vector<Value> items;
  for (const auto& [k, v] : o.entries) items.push_back(Value::of(std::vector<Value>{Value::of(k), v}));
  return Value::of(std::move(items));
}

Value keys_of(const Object& o) {
  std::vector<Value> keys;
  for (const auto& entry : o.entries) keys.push_back(Value::of(entry.first));
  return Value::of(std::move(keys));
}

bool string_arg_matches(const Value& pattern, const std::function<bool(const std::string&)>& test, const char* method) {
  if (pattern.is(Kind::kString)) return test(pattern.string);
  if (pattern.is(Kind::kArray)) {
    for (const Value& item : *pattern.array) {
      if (!item.is(Kind::kString)) throw SyntaxError(std::string(method) + "() tuple elements must be strings");
      if (test(item.string)) return true;
    }
    return false;
  }
  throw SyntaxError(std::string(method) + "() argument must be a string or tuple of strings");
}

// A string's methods and `length` (StringValue.builtins).
Value string_builtin(const std::string& s, const std::string& name) {
  const auto method = [](auto f) { return Value::of(Function(f)); };
  if (name == "length") return Value::of_int(utf16_length(s));
  if (name == "upper" || name == "lower")
    return method([s, upper = name == "upper"](Args&) { return Value::of(ascii_case(s, upper)); });
  // strip/lstrip/rstrip take no characters argument here, as in @huggingface/jinja.
  if (name == "strip") return method([s](Args&) { return Value::of(js_trim(s, true, true)); });
  if (name == "lstrip") return method([s](Args&) { return Value::of(js_trim(s, true, false)); });
  if (name == "rstrip") return method([s](Args&) { return Value::of(js_trim(s, false, true)); });
  if (name == "title") return method([s](Args&) { return Value::of(title_case(s)); });
  if (name == "capitalize")
    return method([s](Args&) { return Value::of(s.empty() ? s : ascii_case(s.substr(0, 1), true) + s.substr(1)); });
  if (name == "startswith" || name == "endswith")
    return method([s, starts = name == "startswith"](Args& args) {
      if (args.positional.empty()) throw SyntaxError(starts ? "startswith() requires an argument" : "endswith() requires an argument");
      return Value::of(string_arg_matches(
          args.positional[0],
          [&](const std::string& p) {
            return p.size() <= s.size() && (starts ? s.compare(0, p.size(), p) == 0 : s.compare(s.size() - p.size(), p.size(), p) == 0);
          },
          starts ? "startswith" : "endswith"));
    });
  if (name == "split")
    return method([s](Args& args) {
      const Value sep = args.positional.empty() ? Value::null() : args.positional[0];
      const int64_t maxsplit = args.positional.size() > 1 && args.positional[1].is(Kind::kInt) ? args.positional[1].integer : -1;
      std::vector<Value> parts;
      if (sep.is(Kind::kNull)) {  // runs of whitespace
        const std::string text = js_trim(s, true, false);
        size_t i = 0;
        while (i < text.size()) {
          size_t j = i;
          while (j < text.size() && js_space_at(text, j) == 0) ++j;
          if (maxsplit != -1 && static_cast<int64_t>(parts.size()) >= maxsplit) {
            parts.push_back(Value::of(text.substr(i)));
            break;
          }
          parts.push_back(Value::of(text.substr(i, j - i)));
          i = j;
          while (size_t n = js_space_at(text, i)) i += n;
        }
      } else {
        if (!sep.is(Kind::kString)) throw SyntaxError("split() separator must be a string or none");
        if (sep.string.empty()) throw SyntaxError("split(): empty separator");
        size_t pos = 0;
        for (;;) {
          const size_t hit = s.find(sep.string, pos);
          if (hit == std::string::npos || (maxsplit != -1 && static_cast<int64_t>(parts.size()) >= maxsplit)) break;
          parts.push_back(Value::of(s.substr(pos, hit - pos)));
          pos = hit + sep.string.size();
        }
        parts.push_back(Value::of(s.substr(pos)));
      }
      return Value::of(std::move(parts));
    });
  if (name == "replace")
    return method([s](Args& args) {
      if (args.positional.size() < 2 || !args.positional[0].is(Kind::kString) || !args.positional[1].is(Kind::kString))
        throw SyntaxError("replace() takes two strings");
      const Value* count = args.get(2, "count");
      if (count != nullptr && !count->is(Kind::kInt) && !count->is(Kind::kNull))
        throw SyntaxError("replace() count must be an integer");
      return Value::of(replace_all(s, args.positional[0].string, args.positional[1].string,
                                   count != nullptr && count->is(Kind::kInt) ? count->integer : -1));
    });
  return Value{};
}

Value object_builtin(const std::shared_ptr<Object>& o, const std::string& name) {
  const auto method = [](auto f) { return Value::of(Function(f)); };
  if (name == "get")
    return method([o](Args& args) {
      if (args.positional.empty() || !args.positional[0].is(Kind::kString)) throw SyntaxError("get() key must be a string");
      if (const Value* v = o->find(args.positional[0].string)) return *v;
      return args.positional.size() > 1 ? args.positional[1] : Value::null();
    });
  if (name == "items") return method([o](Args&) { return items_of(*o); });
  if (name == "keys") return method([o](Args&) { return keys_of(*o); });
  if (name == "values")
    return method([o](Args&) {
      std::vector<Value> values;
      for (const auto& entry : o->entries) values.push_back(entry.second);
      return Value::of(std::move(values));
    });
  return Value{};
}

class Interpreter {
 public:
  std::string run(const Node& program, Env& env) {
    std::string out;
    block(program.body, env, out);
    return out;
  }

 private:
  void block(const std::vector<NodePtr>& statements, Env& env, std::string& out) {
    for (const NodePtr& s : statements) {
      const Value v = eval(*s, env, &out);
      if (!v.is_undefined_or_null()) {
        out += v.to_output();
        if (out.size() > kMaxStringBytes) throw SyntaxError("the output is larger than 16 MiB");
      }
    }
  }

  // Statements append to *out and return null; expressions return a value.
  Value eval(const Node& n, Env& env, std::string* out = nullptr) {
    switch (n.kind) {
      case NodeKind::kText:
      case NodeKind::kString: return Value::of(n.text);
      case NodeKind::kComment: return Value::null();
      case NodeKind::kInteger: return Value::of_int(n.integer);
      case NodeKind::kFloat: return Value::of_float(n.number);
      case NodeKind::kIdentifier: {
        const Value* v = env.lookup(n.text);
        return v != nullptr ? *v : Value{};
      }
      case NodeKind::kArray:
      case NodeKind::kTuple: {
        std::vector<Value> items;
        for (const NodePtr& item : n.items) items.push_back(eval(*item, env));
        return Value::of(std::move(items));
      }
      case NodeKind::kObject: {
        auto o = std::make_shared<Object>();
        for (size_t i = 0; i + 1 < n.items.size(); i += 2) {
          const Value key = eval(*n.items[i], env);
          if (!key.is(Kind::kString)) throw SyntaxError(std::string("object keys must be strings: got ") + key.type_name());
          o->set(key.string, eval(*n.items[i + 1], env));
        }
        return Value::of(std::move(o));
      }
      case NodeKind::kUnary: return unary(n, env);
      case NodeKind::kBinary: return binary(n, env);
      case NodeKind::kTernary: return eval(*n.a, env).truthy() ? eval(*n.b, env) : eval(*n.c, env);
      case NodeKind::kSelect: return eval(*n.b, env).truthy() ? eval(*n.a, env) : Value{};
      case NodeKind::kMember: return member(n, env);
      case NodeKind::kCall: {
        Args args = arguments(n.items, env);
        const Value fn = eval(*n.a, env);
        if (!fn.is(Kind::kFunction)) throw SyntaxError(std::string("cannot call something that is not a function: got ") + fn.type_name());
        return (*fn.function)(args);
      }
      case NodeKind::kFilter: return filter(eval(*n.a, env), *n.b, env);
      case NodeKind::kTest: {
        const bool result = test(n.text, eval(*n.a, env));
        return Value::of(n.flag ? !result : result);
      }
      case NodeKind::kIf: {
        std::string& o = *out;
        block(eval(*n.a, env).truthy() ? n.body : n.alternate, env, o);
        return Value::null();
      }
      case NodeKind::kFor: for_loop(n, env, *out); return Value::null();
      case NodeKind::kSet: set(n, env); return Value::null();
      case NodeKind::kFilterStatement: {
        std::string body;
        block(n.body, env, body);
        return filter(Value::of(std::move(body)), *n.a, env);
      }
      case NodeKind::kBreak: throw BreakSignal{};
      case NodeKind::kContinue: throw ContinueSignal{};
      default: throw SyntaxError("unsupported expression");
    }
  }

  Args arguments(const std::vector<NodePtr>& nodes, Env& env) {
    Args args;
    for (const NodePtr& a : nodes)
      if (a->kind != NodeKind::kKeyword) args.positional.push_back(eval(*a, env));
    for (const NodePtr& a : nodes)
      if (a->kind == NodeKind::kKeyword) {
        if (args.kwarg(a->text) != nullptr) throw SyntaxError("got multiple values for keyword argument '" + a->text + "'");
        args.keyword.emplace_back(a->text, eval(*a->b, env));
      }
    return args;
  }

  Value unary(const Node& n, Env& env) {
    const Value v = eval(*n.a, env);
    if (n.text == "not") return Value::of(!v.truthy());
    const int sign = n.text == "-" ? -1 : 1;
    if (v.is(Kind::kFloat)) return Value::of_float(sign * v.number);
    if (v.is(Kind::kInt) || v.is(Kind::kBool)) return Value::of_int(sign * (v.is(Kind::kBool) ? int64_t{v.boolean} : v.integer));
    throw SyntaxError("unknown operator \"" + n.text + "\" for " + v.type_name());
  }

  Value binary(const Node& n, Env& env) {
    const std::string& op = n.text;
    const Value left = eval(*n.a, env);
    if (op == "and") return left.truthy() ? eval(*n.b, env) : left;
    if (op == "or") return left.truthy() ? left : eval(*n.b, env);
    const Value right = eval(*n.b, env);
    if (op == "==") return Value::of(loose_equal(left, right));
    if (op == "!=") return Value::of(!loose_equal(left, right));
    if (left.is(Kind::kUndefined) || right.is(Kind::kUndefined)) {
      if (right.is(Kind::kUndefined) && (op == "in" || op == "not in")) return Value::of(op == "not in");
      throw SyntaxError("cannot perform operation " + op + " on undefined values");
    }
    if (left.is(Kind::kNull) || right.is(Kind::kNull)) throw SyntaxError("cannot perform operation " + op + " on null values");
    if (op == "~") return Value::of(check_size(raw_string(left) + raw_string(right)));
    const bool left_num = left.is_number(), right_num = right.is_number();
    if (op == "**" && (left_num || left.is(Kind::kBool)) && (right_num || right.is(Kind::kBool))) {
      const double a = left.as_double(), b = right.as_double();
      if (a == 0 && b < 0) throw SyntaxError("0.0 cannot be raised to a negative power");
      const double r = std::pow(a, b);
      if (!std::isfinite(r)) throw SyntaxError("exponentiation result is not a finite real number");
      if (left.is(Kind::kFloat) || right.is(Kind::kFloat) || b < 0 || std::fabs(r) > 9e15) return Value::of_float(r);
      return Value::of_int(static_cast<int64_t>(r));
    }
    if (left_num && right_num) {
      const bool is_float = left.is(Kind::kFloat) || right.is(Kind::kFloat);
      if (op == "+" || op == "-" || op == "*") {
        if (is_float) {
          const double a = left.as_double(), b = right.as_double();
          return Value::of_float(op == "+" ? a + b : op == "-" ? a - b : a * b);
        }
        int64_t r = 0;
        const bool overflow = op == "+" ? __builtin_add_overflow(left.integer, right.integer, &r)
                              : op == "-" ? __builtin_sub_overflow(left.integer, right.integer, &r)
                                          : __builtin_mul_overflow(left.integer, right.integer, &r);
        if (overflow) throw SyntaxError("integer overflow in " + op);
        return Value::of_int(r);
      }
      if (op == "/") return Value::of_float(left.as_double() / right.as_double());
      if (op == "//" || op == "%") {
        if (!is_float && right.integer == 0) throw SyntaxError("integer division or modulo by zero");
        if (op == "//") {
          const double r = std::floor(left.as_double() / right.as_double());
          return is_float ? Value::of_float(r) : Value::of_int(static_cast<int64_t>(r));
        }
        if (is_float) return Value::of_float(std::fmod(left.as_double(), right.as_double()));
        return Value::of_int(right.integer == -1 ? 0 : left.integer % right.integer);  // JS: sign of the dividend
      }
      const double a = left.as_double(), b = right.as_double();
      if (op == "<") return Value::of(a < b);
      if (op == ">") return Value::of(a > b);
      if (op == "<=") return Value::of(a <= b);
      if (op == ">=") return Value::of(a >= b);
    } else if (left.is(Kind::kArray) && right.is(Kind::kArray)) {
      if (op == "+") {
        if (left.array->size() + right.array->size() > kMaxArrayItems) throw SyntaxError("a list grew past 100,000 items");
        std::vector<Value> items = *left.array;
        items.insert(items.end(), right.array->begin(), right.array->end());
        return Value::of(std::move(items));
      }
    } else if (right.is(Kind::kArray)) {
      bool member = false;
      for (const Value& x : *right.array) member = member || strict_equal(x, left);
      if (op == "in") return Value::of(member);
      if (op == "not in") return Value::of(!member);
    }
    if ((left.is(Kind::kString) || right.is(Kind::kString)) && op == "+")
      return Value::of(check_size(raw_string(left) + raw_string(right)));
    if (left.is(Kind::kString) && right.is(Kind::kString) && (op == "in" || op == "not in"))
      return Value::of((right.string.find(left.string) != std::string::npos) == (op == "in"));
    if (left.is(Kind::kString) && right.is(Kind::kObject) && (op == "in" || op == "not in"))
      return Value::of((right.object->find(left.string) != nullptr) == (op == "in"));
    throw SyntaxError("unknown operator \"" + op + "\" between " + left.type_name() + " and " + right.type_name());
  }

  Value member(const Node& n, Env& env) {
    const Value object = eval(*n.a, env);
    Value property;
    if (n.flag) {
      if (n.b->kind == NodeKind::kSlice) return slice_of(object, *n.b, env);
      property = eval(*n.b, env);
    } else if (n.b->kind == NodeKind::kInteger) {
      property = Value::of_int(n.b->integer);
    } else {
      property = Value::of(n.b->text);
    }
    if (object.is(Kind::kObject) || object.is(Kind::kNamespace)) {
      if (!property.is(Kind::kString)) throw SyntaxError(std::string("cannot access a property with a non-string: got ") + property.type_name());
      if (const Value* v = object.object->find(property.string)) return *v;
      return object.is(Kind::kObject) ? object_builtin(object.object, property.string) : Value{};
    }
    if (object.is(Kind::kArray) || object.is(Kind::kString)) {
      if (property.is(Kind::kInt)) {
        const std::vector<Value> chars = object.is(Kind::kString) ? code_points(object.string) : std::vector<Value>{};
        const std::vector<Value>& items = object.is(Kind::kString) ? chars : *object.array;
        int64_t i = property.integer;
        if (i < 0) i += static_cast<int64_t>(items.size());
        return i >= 0 && i < static_cast<int64_t>(items.size()) ? items[static_cast<size_t>(i)] : Value{};
      }
      if (!property.is(Kind::kString)) throw SyntaxError(std::string("cannot access a property with a non-string/non-number: got ") + property.type_name());
      if (object.is(Kind::kArray)) return property.string == "length" ? Value::of_int(static_cast<int64_t>(object.array->size())) : Value{};
      return string_builtin(object.string, property.string);
    }
    if (!property.is(Kind::kString)) throw SyntaxError(std::string("cannot access a property with a non-string: got ") + property.type_name());
    return Value{};  // numbers, booleans, none and undefined have no attributes
  }

  Value slice_of(const Value& object, const Node& s, Env& env) {
    const Value start = s.a ? eval(*s.a, env) : Value{}, stop = s.b ? eval(*s.b, env) : Value{},
                step = s.c ? eval(*s.c, env) : Value{};
    for (const Value* v : {&start, &stop, &step})
      if (!v->is(Kind::kInt) && !v->is(Kind::kUndefined)) throw SyntaxError("slice indices must be integers");
    if (object.is(Kind::kArray)) return Value::of(slice(*object.array, start, stop, step));
    if (!object.is(Kind::kString)) throw SyntaxError("slice object must be an array or string");
    std::string out;
    for (const Value& c : slice(code_points(object.string), start, stop, step)) out += c.string;
    return Value::of(std::move(out));
  }

  void set(const Node& n, Env& env) {
    Value rhs;
    if (n.b) {
      rhs = eval(*n.b, env);
    } else {
      std::string body;
      block(n.body, env, body);
      rhs = Value::of(std::move(body));
    }
    const Node& target = *n.a;
    if (target.kind == NodeKind::kIdentifier) {
      env.set(target.text, std::move(rhs));
    } else if (target.kind == NodeKind::kTuple) {
      if (!rhs.is(Kind::kArray)) throw SyntaxError(std::string("cannot unpack non-iterable type in set: ") + rhs.type_name());
      if (rhs.array->size() != target.items.size()) throw SyntaxError("wrong number of items to unpack in set");
      for (size_t i = 0; i < target.items.size(); ++i) {
        if (target.items[i]->kind != NodeKind::kIdentifier) throw SyntaxError("cannot unpack to a non-name in set");
        env.set(target.items[i]->text, (*rhs.array)[i]);
      }
    } else if (target.kind == NodeKind::kMember) {
      const Value object = eval(*target.a, env);
      if (!object.is(Kind::kNamespace)) throw SyntaxError("cannot assign an attribute of a non-namespace object");
      if (target.flag || target.b->kind != NodeKind::kIdentifier) throw SyntaxError("cannot assign to a member with a non-name property");
      object.object->set(target.b->text, std::move(rhs));
    } else {
      throw SyntaxError("invalid target of set");
    }
  }

  void bind_loop_var(const Node& var, const Value& current, Env& scope) {
    if (var.kind == NodeKind::kIdentifier) {
      scope.set(var.text, current);
      return;
    }
    if (!current.is(Kind::kArray)) throw SyntaxError(std::string("cannot unpack non-iterable type: ") + current.type_name());
    if (current.array->size() != var.items.size()) throw SyntaxError("wrong number of items to unpack in for");
    for (size_t j = 0; j < var.items.size(); ++j) {
      if (var.items[j]->kind != NodeKind::kIdentifier) throw SyntaxError("cannot unpack to a non-name in for");
      scope.set(var.items[j]->text, (*current.array)[j]);
    }
  }

  void for_loop(const Node& n, Env& env, std::string& out) {
    Env scope(&env);
    const Node* condition = nullptr;
    Value iterable;
    if (n.b->kind == NodeKind::kSelect) {  // for x in xs if cond
      iterable = eval(*n.b->a, scope);
      condition = n.b->b.get();
    } else {
      iterable = eval(*n.b, scope);
    }
    if (iterable.is(Kind::kObject)) iterable = keys_of(*iterable.object);
    if (!iterable.is(Kind::kArray)) throw SyntaxError(std::string("expected an iterable or object type in for loop: got ") + iterable.type_name());
    std::vector<Value> items;
    for (const Value& current : *iterable.array) {
      if (condition != nullptr) {
        Env test_scope(&scope);
        bind_loop_var(*n.a, current, test_scope);
        if (!eval(*condition, test_scope).truthy()) continue;
      }
      items.push_back(current);
    }
    bool no_iteration = true;
    const auto count = static_cast<int64_t>(items.size());
    for (int64_t i = 0; i < count; ++i) {
      if (++iterations_ > kMaxLoopIterations) throw SyntaxError("the template ran more than 100,000 loop iterations");
      auto loop = std::make_shared<Object>();
      loop->entries = {{"index", Value::of_int(i + 1)},
                       {"index0", Value::of_int(i)},
                       {"revindex", Value::of_int(count - i)},
                       {"revindex0", Value::of_int(count - i - 1)},
                       {"first", Value::of(i == 0)},
                       {"last", Value::of(i == count - 1)},
                       {"length", Value::of_int(count)},
                       {"previtem", i > 0 ? items[static_cast<size_t>(i - 1)] : Value{}},
                       {"nextitem", i < count - 1 ? items[static_cast<size_t>(i + 1)] : Value{}}};
      scope.set("loop", Value::of(std::move(loop)));
      bind_loop_var(*n.a, items[static_cast<size_t>(i)], scope);
      std::string body;
      try {
        block(n.body, scope, body);
      } catch (const ContinueSignal&) {
        continue;  // the partial output of the iteration is dropped, as upstream
      } catch (const BreakSignal&) {
        break;
      }
      out += body;
      if (out.size() > kMaxStringBytes) throw SyntaxError("the output is larger than 16 MiB");
      no_iteration = false;
    }
    if (no_iteration) block(n.alternate, scope, out);
  }

  bool test(const std::string& name, const Value& v, const Value* other = nullptr) {
    if (name == "boolean") return v.is(Kind::kBool);
    if (name == "callable") return v.is(Kind::kFunction);
    if (name == "odd" || name == "even") {
      if (!v.is(Kind::kInt)) throw SyntaxError("cannot " + name + " on " + v.type_name());
      return (v.integer % 2 != 0) == (name == "odd");
    }
    if (name == "false") return v.is(Kind::kBool) && !v.boolean;
    if (name == "true") return v.is(Kind::kBool) && v.boolean;
    if (name == "none") return v.is(Kind::kNull);
    if (name == "string") return v.is(Kind::kString);
    if (name == "number") return v.is_number();
    if (name == "integer") return v.is(Kind::kInt);
    if (name == "iterable") return v.is(Kind::kArray) || v.is(Kind::kString);
    if (name == "mapping") return v.is(Kind::kObject);
    if (name == "sequence") return v.is(Kind::kArray) || v.is(Kind::kObject) || v.is(Kind::kString);
    if (name == "lower") return v.is(Kind::kString) && v.string == ascii_case(v.string, false);
    if (name == "upper") return v.is(Kind::kString) && v.string == ascii_case(v.string, true);
    if (name == "defined") return !v.is(Kind::kUndefined);
    if (name == "undefined") return v.is(Kind::kUndefined);
    if (name == "equalto" || name == "eq") return other != nullptr ? strict_equal(v, *other) : v.is(Kind::kUndefined);
    throw SyntaxError("unknown test: " + name);
  }

  Value filter(const Value& v, const Node& f, Env& env) {
    if (f.kind == NodeKind::kIdentifier) return plain_filter(v, f.text);
    const std::string& name = f.a->text;
    if (f.a->kind != NodeKind::kIdentifier) throw SyntaxError("unknown filter");
    Args args = arguments(f.items, env);
    if (name == "tojson") {
      JsonOptions o;
      if (const Value* indent = args.kwarg("indent"); indent != nullptr && !indent->is(Kind::kNull)) {
        if (!indent->is(Kind::kInt)) throw SyntaxError("tojson: indent must be a number");
        o.indent = static_cast<int>(std::clamp<int64_t>(indent->integer, -1, 64));
      }
      if (const Value* a = args.kwarg("ensure_ascii")) o.ensure_ascii = a->truthy();
      if (const Value* a = args.kwarg("sort_keys")) o.sort_keys = a->truthy();
      if (const Value* a = args.kwarg("separators"); a != nullptr && !a->is(Kind::kNull)) {
        if (!a->is(Kind::kArray) || a->array->size() != 2 || !(*a->array)[0].is(Kind::kString) || !(*a->array)[1].is(Kind::kString))
          throw SyntaxError("tojson: separators must be a tuple of two strings");
        o.has_separators = true;
        o.item_separator = (*a->array)[0].string;
        o.key_separator = (*a->array)[1].string;
      }
      return Value::of(to_json(v, o, 0, true));
    }
    if (name == "join") {
      const std::vector<Value> items = v.is(Kind::kString) ? code_points(v.string)
                                       : v.is(Kind::kArray) ? *v.array
                                                            : throw SyntaxError(std::string("cannot apply filter \"join\" to type: ") + v.type_name());
      const Value* sep = args.get(0, "separator");
      if (sep != nullptr && !sep->is(Kind::kString)) throw SyntaxError("join: separator must be a string");
      std::string out;
      for (size_t i = 0; i < items.size(); ++i) {
        if (i > 0 && sep != nullptr) out += sep->string;
        if (!items[i].is_undefined_or_null()) out += raw_string(items[i]);
        if (out.size() > kMaxStringBytes) throw SyntaxError("the template made a string larger than 16 MiB");
      }
      return Value::of(std::move(out));
    }
    if (name == "default") {
      const Value fallback = args.positional.empty() ? Value::of(std::string()) : args.positional[0];
      const Value* boolean = args.get(1, "boolean");
      if (v.is(Kind::kUndefined) || (boolean != nullptr && boolean->truthy() && !v.truthy())) return fallback;
      return v;
    }
    if (name == "int" || name == "float") {
      const Value* fallback = args.get(0, "default");
      if (v.is(Kind::kString)) {
        const std::string t = js_trim(v.string, true, false);
        const bool numeric = !t.empty() && ((t[0] >= '0' && t[0] <= '9') ||
                                            ((t[0] == '-' || t[0] == '+' || t[0] == '.') && t.size() > 1));
        if (!numeric && fallback != nullptr) return *fallback;  // parseInt/parseFloat gave NaN
        return plain_filter(v, name);
      }
      if (v.is_number()) return v;
      if (v.is(Kind::kBool)) return name == "int" ? Value::of_int(v.boolean) : Value::of_float(v.boolean);
      if (fallback != nullptr) return *fallback;
      throw SyntaxError("cannot apply filter \"" + name + "\" to type: " + v.type_name());
    }
    if (v.is(Kind::kString) && name == "indent") {
      const Value* width = args.get(0, "width");
      const Value* first = args.get(1, "first");
      const Value* blank = args.get(2, "blank");
      if (width != nullptr && !width->is(Kind::kInt)) throw SyntaxError("indent: width must be a number");
      return Value::of(indent(v.string, width != nullptr ? width->integer : 4, first != nullptr && first->truthy(),
                              blank != nullptr && blank->truthy()));
    }
    if (v.is(Kind::kString) && name == "replace") return (*string_builtin(v.string, "replace").function)(args);
    if (v.is(Kind::kArray) && name == "sort") {
      const Value* reverse = args.get(0, "reverse");
      const Value* case_sensitive = args.get(1, "case_sensitive");
      const Value* attribute = args.get(2, "attribute");
      return sorted(*v.array, reverse != nullptr && reverse->truthy(), case_sensitive != nullptr && case_sensitive->truthy(),
                    attribute == nullptr || attribute->is(Kind::kNull) ? "" : raw_string(*attribute));
    }
    if (v.is(Kind::kArray) && name == "map") {
      const Value* attribute = args.kwarg("attribute");
      if (attribute == nullptr || !attribute->is(Kind::kString)) throw SyntaxError("map: only map(attribute='name') is supported");
      std::vector<Value> mapped;
      for (const Value& item : *v.array) {
        if (!item.is(Kind::kObject) && !item.is(Kind::kNamespace)) throw SyntaxError("items in map must be objects");
        const Value* found = item.object->find(attribute->string);
        const Value* fallback = args.kwarg("default");
        mapped.push_back(found != nullptr ? *found : fallback != nullptr ? *fallback : Value{});
      }
      return Value::of(std::move(mapped));
    }
    if (v.is(Kind::kArray) && (name == "selectattr" || name == "rejectattr")) {
      const bool select = name == "selectattr";
      if (args.positional.empty() || !args.positional[0].is(Kind::kString)) throw SyntaxError(name + ": the attribute must be a string");
      std::vector<Value> kept;
      for (const Value& item : *v.array) {
        if (!item.is(Kind::kObject) && !item.is(Kind::kNamespace)) throw SyntaxError(name + " can only be applied to a list of objects");
        const Value* a = item.object->find(args.positional[0].string);
        bool result = false;
        if (a != nullptr && a->truthy())
          result = args.positional.size() > 1
                       ? test(raw_string(args.positional[1]), *a, args.positional.size() > 2 ? &args.positional[2] : nullptr)
                       : true;
        if (result == select) kept.push_back(item);
      }
      return Value::of(std::move(kept));
    }
    if (v.is(Kind::kObject)) {
      const Value builtin = object_builtin(v.object, name);
      if (builtin.is(Kind::kFunction)) return (*builtin.function)(args);
    }
    throw SyntaxError("filter \"" + name + "(...)\" is not supported on " + v.type_name());
  }

  static std::string indent(const std::string& s, int64_t width, bool first, bool blank) {
    const std::string pad(static_cast<size_t>(std::clamp<int64_t>(width, 0, 256)), ' ');
    std::string out;
    size_t start = 0;
    for (size_t line = 0;; ++line) {
      const size_t end = s.find('\n', start);
      const std::string_view text = std::string_view(s).substr(start, end == std::string::npos ? std::string::npos : end - start);
      if (!((!first && line == 0) || (!blank && text.empty()))) out += pad;
      out += text;
      if (end == std::string::npos) break;
      out += '\n';
      start = end + 1;
    }
    return check_size(out);
  }

  Value plain_filter(const Value& v, const std::string& name) {
    if (name == "safe") return v;
    if (name == "tojson") return Value::of(to_json(v, {}, 0, true));
    const auto unsupported = [&]() -> Value {
      throw SyntaxError("filter \"" + name + "\" is not supported on " + v.type_name());
    };
    switch (v.kind) {
      case Kind::kArray: {
        const std::vector<Value>& a = *v.array;
        if (name == "list") return v;
        if (name == "first") return a.empty() ? Value{} : a.front();
        if (name == "last") return a.empty() ? Value{} : a.back();
        if (name == "length") return Value::of_int(static_cast<int64_t>(a.size()));
        if (name == "reverse") return Value::of(std::vector<Value>(a.rbegin(), a.rend()));
        if (name == "sort") return sorted(a, false, false, "");
        if (name == "join") {
          std::string out;
          for (const Value& x : a)
            if (!x.is_undefined_or_null()) out += raw_string(x);
          return Value::of(check_size(out));
        }
        if (name == "string") return Value::of(to_json(v, {}, 0, false));
        if (name == "unique") {
          std::vector<Value> out;
          for (const Value& x : a) {
            bool seen = false;
            for (const Value& y : out) seen = seen || strict_equal(x, y);
            if (!seen) out.push_back(x);
          }
          return Value::of(std::move(out));
        }
        return unsupported();
      }
      case Kind::kString: {
        if (name == "length" || name == "upper" || name == "lower" || name == "title" || name == "capitalize") {
          const Value b = string_builtin(v.string, name);
          Args none;
          return b.is(Kind::kFunction) ? (*b.function)(none) : b;
        }
        if (name == "trim") return Value::of(js_trim(v.string, true, true));
        if (name == "indent") return Value::of(indent(v.string, 4, false, false));
        if (name == "join" || name == "string") return v;
        if (name == "int") {  // parseInt(s, 10): leading digits after whitespace, else 0
          const std::string t = js_trim(v.string, true, false);
          size_t i = (t[0] == '-' || t[0] == '+') ? 1 : 0;
          int64_t x = 0;
          bool any = false;
          for (; i < t.size() && t[i] >= '0' && t[i] <= '9' && x < int64_t{1} << 53; ++i, any = true) x = x * 10 + (t[i] - '0');
          return Value::of_int(any ? (t[0] == '-' ? -x : x) : 0);
        }
        if (name == "float") {
          try {
            return Value::of_float(std::stod(js_trim(v.string, true, false)));
          } catch (const std::exception&) {
            return Value::of_float(0);
          }
        }
        return unsupported();
      }
      case Kind::kInt:
      case Kind::kFloat:
        if (name == "abs") return v.is(Kind::kInt) ? Value::of_int(v.integer < 0 ? -v.integer : v.integer) : Value::of_float(std::fabs(v.number));
        if (name == "int") return v.is(Kind::kInt) ? v : Value::of_int(static_cast<int64_t>(std::floor(v.number)));
        if (name == "float") return Value::of_float(v.as_double());
        if (name == "string") return Value::of(v.to_output());
        return unsupported();
      case Kind::kObject: {
        if (name == "items") return items_of(*v.object);
        if (name == "length") return Value::of_int(static_cast<int64_t>(v.object->entries.size()));
        const Value b = object_builtin(v.object, name);
        Args none;
        if (b.is(Kind::kFunction)) return (*b.function)(none);
        return unsupported();
      }
      case Kind::kBool:
        if (name == "bool") return v;
        if (name == "int") return Value::of_int(v.boolean);
        if (name == "float") return Value::of_float(v.boolean);
        if (name == "string") return Value::of(std::string(v.boolean ? "true" : "false"));
        return unsupported();
      default:
        throw SyntaxError("cannot apply filter \"" + name + "\" to type: " + v.type_name());
    }
  }

  int64_t iterations_ = 0;
};

Value from_json(const nlohmann::ordered_json& j, int depth) {
  if (depth > kMaxNesting) throw SyntaxError("the context nests too deeply");
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null: return Value::null();
    case nlohmann::ordered_json::value_t::boolean: return Value::of(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer: return Value::of_int(j.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: return Value::of_int(static_cast<int64_t>(j.get<uint64_t>()));
    case nlohmann::ordered_json::value_t::number_float: {
      const double d = j.get<double>();  // JS has one number type: 2.0 arrives as the integer 2
      return d == std::floor(d) && std::fabs(d) < 9e15 ? Value::of_int(static_cast<int64_t>(d)) : Value::of_float(d);
    }
    case nlohmann::ordered_json::value_t::string: return Value::of(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      std::vector<Value> items;
      for (const auto& x : j) items.push_back(from_json(x, depth + 1));
      return Value::of(std::move(items));
    }
    case nlohmann::ordered_json::value_t::object: {
      auto o = std::make_shared<Object>();
      for (const auto& [k, x] : j.items()) o->set(k, from_json(x, depth + 1));
      return Value::of(std::move(o));
    }
    default: throw SyntaxError("unsupported value in the context");
  }
}

Value namespace_function() {
  return Value::of(Function([](Args& args) {
    auto o = std::make_shared<Object>();
    if (args.positional.size() > 1) throw SyntaxError("namespace() takes at most 1 positional argument");
    if (!args.positional.empty()) {
      const Value& source = args.positional[0];
      if (!source.is(Kind::kObject)) throw SyntaxError("namespace() expects a dict");
      for (const auto& [k, v] : source.object->entries) o->set(k, v);
    }
    for (const auto& [k, v] : args.keyword) o->set(k, v);
    return Value::of(std::move(o), Kind::kNamespace);
  }));
}

Value range_function() {
  return Value::of(Function([](Args& args) {
    for (const Value& a : args.positional)
      if (!a.is(Kind::kInt)) throw SyntaxError("range() arguments must be integers");
    if (args.positional.empty() || args.positional.size() > 3) throw SyntaxError("range() takes 1 to 3 arguments");
    int64_t start = 0, stop = 0, step = 1;
    if (args.positional.size() == 1) {
      stop = args.positional[0].integer;
    } else {
      start = args.positional[0].integer;
      stop = args.positional[1].integer;
      if (args.positional.size() == 3) step = args.positional[2].integer;
    }
    if (step == 0) throw SyntaxError("range() step must not be zero");
    std::vector<Value> out;
    for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
      if (out.size() >= kMaxArrayItems) throw SyntaxError("range() of more than 100,000 items");
      out.push_back(Value::of_int(i));
    }
    return Value::of(std::move(out));
  }));
}

// raise_exception(message): the template's own refusal of its input.
struct TemplateRaised : std::runtime_error {
  using std::runtime_error::runtime_error;
};

}  // namespace

}  // namespace jinja

JinjaTemplate::JinjaTemplate(std::string_view source, std::string name) : name_(std::move(name)) {
  try {
    program_ = jinja::parse(jinja::tokenize(source));
  } catch (const std::exception& e) {
    fail(name_, ": cannot parse the template: ", e.what());
  }
}

JinjaTemplate::~JinjaTemplate() = default;
JinjaTemplate::JinjaTemplate(JinjaTemplate&&) noexcept = default;
JinjaTemplate& JinjaTemplate::operator=(JinjaTemplate&&) noexcept = default;

std::string JinjaTemplate::render(const nlohmann::ordered_json& context) const {
  using jinja::Value;
  try {
    jinja::Env globals(nullptr);
    globals.set("false", Value::of(false));
    globals.set("true", Value::of(true));
    globals.set("False", Value::of(false));
    globals.set("True", Value::of(true));
    globals.set("none", Value::null());
    globals.set("None", Value::null());
    globals.set("namespace", jinja::namespace_function());
    globals.set("range", jinja::range_function());
    globals.set("raise_exception", Value::of(jinja::Function([](jinja::Args& args) -> Value {
      std::string message;
      for (const Value& a : args.positional) message += (message.empty() ? "" : ",") + a.to_output();
      throw jinja::TemplateRaised(message);
    })));
    if (!context.is_object()) fail(name_, ": the context must be an object");
    for (const auto& [key, value] : context.items()) globals.set(key, jinja::from_json(value, 0));
    jinja::Env env(&globals);
    return jinja::Interpreter().run(*program_, env);
  } catch (const jinja::TemplateRaised& e) {
    std::string message = e.what();  // the template's own text: kept to one short line
    std::replace(message.begin(), message.end(), '\n', ' ');
    if (message.size() > 300) message = message.substr(0, 300) + "...";
    fail(name_, ": the template refused the input: ", message);
  } catch (const jinja::BreakSignal&) {
    fail(name_, ": 'break' outside a loop");
  } catch (const jinja::ContinueSignal&) {
    fail(name_, ": 'continue' outside a loop");
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    fail(name_, ": ", e.what());
  }
}

}  // namespace hymba
