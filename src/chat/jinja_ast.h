// Internals of the Jinja interpreter (chat/jinja.h): tokens, syntax tree
// and runtime values, shared by jinja_lexer.cpp, jinja_parser.cpp and
// jinja_eval.cpp. The structure follows @huggingface/jinja so that edge
// cases (which operators exist, what a member access on undefined gives)
// behave the same.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace hymba::jinja {

// Thrown inside the interpreter; JinjaTemplate prefixes the template's name.
struct SyntaxError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// ---- limits: templates are untrusted input ----
constexpr int kMaxNesting = 200;                          // parse depth (expressions and blocks)
constexpr int64_t kMaxLoopIterations = 100'000;           // all for-loops of one render together
constexpr size_t kMaxStringBytes = size_t{16} << 20;      // any string made while rendering, and the output
constexpr size_t kMaxArrayItems = 100'000;                // range(), + of lists
constexpr size_t kMaxTemplateBytes = size_t{1} << 20;

// ---- lexer ----
enum class Tok {
  kText, kNumber, kString, kIdentifier, kEquals, kOpenParen, kCloseParen, kOpenStatement, kCloseStatement,
  kOpenExpression, kCloseExpression, kOpenSquare, kCloseSquare, kOpenCurly, kCloseCurly, kComma, kDot, kColon,
  kPipe, kAdditive, kMultiplicative, kPower, kComparison, kUnary, kComment
};
struct Token {
  std::string value;
  Tok type;
};
std::vector<Token> tokenize(std::string_view source);

// JavaScript's \s (what String.prototype.trim removes): the UTF-8 length of
// the whitespace character at s[i], or 0 when there is none.
size_t js_space_at(std::string_view s, size_t i);
// ... and the length of one ending at s[end - 1], or 0.
size_t js_space_before(std::string_view s, size_t end);
std::string js_trim(std::string_view s, bool start, bool end);

// ---- syntax tree ----
enum class NodeKind {
  kProgram, kText, kIf, kFor, kSet, kBreak, kContinue, kComment, kFilterStatement,
  kInteger, kFloat, kString, kArray, kTuple, kObject, kIdentifier, kCall, kMember, kUnary, kBinary,
  kFilter, kTest, kSelect, kTernary, kSlice, kKeyword, kMacro, kCallStatement
};
struct Node {
  NodeKind kind;
  std::string text;  // identifier name, string literal, operator, test name, text
  int64_t integer = 0;
  double number = 0;
  bool flag = false;  // member: computed ([...]); test: negated
  // Children by role (null when absent):
  // if: a=test, body, alternate; for: a=loop var, b=iterable, body, alternate (else)
  // set: a=target, b=value or body; filter statement: a=filter, body
  // call: a=callee, items=args; member: a=object, b=property; unary: a=operand
  // binary: a, b; filter: a=operand, b=filter (identifier or call); test: a=operand
  // select: a=value, b=test; ternary: a=condition, b=true, c=false; slice: a, b, c
  // keyword: a=key identifier, b=value; array/tuple: items; object: items (key, value pairs)
  std::shared_ptr<const Node> a, b, c;
  std::vector<std::shared_ptr<const Node>> items, body, alternate;
};
using NodePtr = std::shared_ptr<const Node>;
NodePtr parse(const std::vector<Token>& tokens);

// ---- values ----
struct Value;
struct Object {
  std::vector<std::pair<std::string, Value>> entries;  // insertion order, as JS Maps keep it
  const Value* find(std::string_view key) const;
  void set(const std::string& key, Value v);
};
struct Args;
using Function = std::function<Value(Args&)>;

struct Value {
  enum class Kind { kUndefined, kNull, kBool, kInt, kFloat, kString, kArray, kObject, kNamespace, kFunction };
  Kind kind = Kind::kUndefined;
  bool boolean = false;
  int64_t integer = 0;
  double number = 0;
  std::string string;
  std::shared_ptr<std::vector<Value>> array;  // shared: lists are references, as in JS
  std::shared_ptr<Object> object;             // object and namespace
  std::shared_ptr<Function> function;

  static Value null() { return make(Kind::kNull); }
  static Value of(bool b) { Value v = make(Kind::kBool); v.boolean = b; return v; }
  static Value of_int(int64_t i) { Value v = make(Kind::kInt); v.integer = i; return v; }
  static Value of_float(double d) { Value v = make(Kind::kFloat); v.number = d; return v; }
  static Value of(std::string s) { Value v = make(Kind::kString); v.string = std::move(s); return v; }
  static Value of(std::vector<Value> items) {
    Value v = make(Kind::kArray);
    v.array = std::make_shared<std::vector<Value>>(std::move(items));
    return v;
  }
  static Value of(std::shared_ptr<Object> o, Kind kind = Kind::kObject) { Value v = make(kind); v.object = std::move(o); return v; }
  static Value of(Function f) { Value v = make(Kind::kFunction); v.function = std::make_shared<Function>(std::move(f)); return v; }
  static Value make(Kind k) { Value v; v.kind = k; return v; }

  bool is(Kind k) const { return kind == k; }
  bool is_number() const { return kind == Kind::kInt || kind == Kind::kFloat; }
  bool is_undefined_or_null() const { return kind == Kind::kUndefined || kind == Kind::kNull; }
  double as_double() const { return kind == Kind::kInt ? static_cast<double>(integer) : kind == Kind::kBool ? boolean : number; }
  bool truthy() const;
  // The text printed by {{ }} (RuntimeValue.toString()).
  std::string to_output() const;
  const char* type_name() const;
};

struct Args {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
  const Value* kwarg(std::string_view name) const;
  // positional[i], else keyword `name`, else null.
  const Value* get(size_t i, std::string_view name) const;
};

// JSON text as @huggingface/jinja's toJSON writes it (tojson and printing
// of lists, dicts and namespaces).
struct JsonOptions {
  int indent = -1;  // < 0: none
  bool ensure_ascii = false;
  bool sort_keys = false;
  std::string item_separator, key_separator;  // empty: the defaults for indent
  bool has_separators = false;
};
std::string to_json(const Value& v, const JsonOptions& options, int depth, bool undefined_as_null);

// A JS number as Number.prototype.toString() writes it.
std::string js_number(double d);
// The length of a string in UTF-16 code units, as JS counts it.
int64_t utf16_length(std::string_view s);

}  // namespace hymba::jinja
