// Parser of the Jinja subset: @huggingface/jinja's grammar and operator
// precedence (or < and < not < comparisons/in < + - ~ < * / // % < ** <
// is-tests < filters < unary sign < calls and members < primaries), with
// nesting bounded so that a hostile template cannot exhaust the stack.
#include <charconv>

#include "chat/jinja_ast.h"

namespace hymba::jinja {

namespace {

NodePtr make(NodeKind kind, std::string text = {}, NodePtr a = nullptr, NodePtr b = nullptr, NodePtr c = nullptr) {
  auto n = std::make_shared<Node>();
  n->kind = kind;
  n->text = std::move(text);
  n->a = std::move(a);
  n->b = std::move(b);
  n->c = std::move(c);
  return n;
}

class Parser {
 public:
  explicit Parser(const std::vector<Token>& tokens) : t_(tokens) {}

  NodePtr program() {
    auto p = std::make_shared<Node>();
    p->kind = NodeKind::kProgram;
    while (i_ < t_.size()) p->body.push_back(any());
    return p;
  }

 private:
  // Bounds the recursion of nested blocks and expressions.
  struct Depth {
    explicit Depth(int& d) : d_(d) {
      if (++d_ > kMaxNesting) throw SyntaxError("the template nests deeper than " + std::to_string(kMaxNesting) + " levels");
    }
    ~Depth() { --d_; }
    int& d_;
  };

  bool is(Tok type, size_t ahead = 0) const { return i_ + ahead < t_.size() && t_[i_ + ahead].type == type; }
  bool is_identifier(std::string_view name, size_t ahead = 0) const {
    return is(Tok::kIdentifier, ahead) && t_[i_ + ahead].value == name;
  }
  bool is_statement(std::initializer_list<std::string_view> names) const {
    if (!is(Tok::kOpenStatement) || !is(Tok::kIdentifier, 1)) return false;
    for (const auto name : names)
      if (t_[i_ + 1].value == name) return true;
    return false;
  }
  const Token& expect(Tok type, const char* what) {
    if (!is(type)) throw SyntaxError(std::string("expected ") + what + (i_ < t_.size() ? ", got '" + t_[i_].value + "'" : " before the end"));
    return t_[i_++];
  }
  void expect_identifier(const char* name) {
    if (!is_identifier(name)) throw SyntaxError(std::string("expected '") + name + "'");
    ++i_;
  }
  void check_not_end(const char* block) const {
    if (i_ >= t_.size()) throw SyntaxError(std::string("unclosed '") + block + "' block");
  }

  NodePtr any() {
    Depth depth(depth_);
    switch (t_[i_].type) {
      case Tok::kComment:
        return make(NodeKind::kComment, t_[i_++].value);
      case Tok::kText:
        return make(NodeKind::kText, t_[i_++].value);
      case Tok::kOpenStatement:
        return statement();
      case Tok::kOpenExpression: {
        ++i_;
        NodePtr e = expression();
        expect(Tok::kCloseExpression, "'}}'");
        return e;
      }
      default:
        throw SyntaxError("unexpected '" + t_[i_].value + "'");
    }
  }

  std::vector<NodePtr> block_until(std::initializer_list<std::string_view> ends, const char* block) {
    std::vector<NodePtr> body;
    while (!is_statement(ends)) {
      check_not_end(block);
      body.push_back(any());
    }
    return body;
  }

  NodePtr statement() {
    expect(Tok::kOpenStatement, "'{%'");
    if (!is(Tok::kIdentifier)) throw SyntaxError("expected a statement name after '{%'");
    const std::string name = t_[i_++].value;
    if (name == "set") return set_statement();
    if (name == "if") {
      NodePtr n = if_statement();
      close_block("endif");
      return n;
    }
    if (name == "for") {
      NodePtr n = for_statement();
      close_block("endfor");
      return n;
    }
    if (name == "break" || name == "continue") {
      expect(Tok::kCloseStatement, "'%}'");
      return make(name == "break" ? NodeKind::kBreak : NodeKind::kContinue);
    }
    if (name == "filter") {
      NodePtr filter = primary();
      if (filter->kind == NodeKind::kIdentifier && is(Tok::kOpenParen)) filter = call(filter);
      expect(Tok::kCloseStatement, "'%}'");
      auto n = std::make_shared<Node>();
      n->kind = NodeKind::kFilterStatement;
      n->a = filter;
      n->body = block_until({"endfilter"}, "filter");
      close_block("endfilter");
      return n;
    }
    if (name == "macro" || name == "call" || name == "include" || name == "import" || name == "extends" ||
        name == "block" || name == "raw" || name == "with")
      throw SyntaxError("'{% " + name + " %}' is not supported");
    throw SyntaxError("unknown statement '" + name + "'");
  }

  void close_block(const char* end) {
    expect(Tok::kOpenStatement, "'{%'");
    expect_identifier(end);
    expect(Tok::kCloseStatement, "'%}'");
  }

  NodePtr set_statement() {
    auto n = std::make_shared<Node>();
    n->kind = NodeKind::kSet;
    n->a = sequence(false);
    if (is(Tok::kEquals)) {
      ++i_;
      n->b = sequence(false);
    } else {
      expect(Tok::kCloseStatement, "'%}'");
      n->body = block_until({"endset"}, "set");
      expect(Tok::kOpenStatement, "'{%'");
      expect_identifier("endset");
    }
    expect(Tok::kCloseStatement, "'%}'");
    return n;
  }

  NodePtr if_statement() {
    Depth depth(depth_);
    auto n = std::make_shared<Node>();
    n->kind = NodeKind::kIf;
    n->a = expression();
    expect(Tok::kCloseStatement, "'%}'");
    n->body = block_until({"elif", "else", "endif"}, "if");
    if (is_statement({"elif"})) {
      i_ += 2;
      n->alternate.push_back(if_statement());
    } else if (is_statement({"else"})) {
      i_ += 2;
      expect(Tok::kCloseStatement, "'%}'");
      n->alternate = block_until({"endif"}, "if");
    }
    return n;
  }

  NodePtr for_statement() {
    auto n = std::make_shared<Node>();
    n->kind = NodeKind::kFor;
    n->a = sequence(true);
    if (n->a->kind != NodeKind::kIdentifier && n->a->kind != NodeKind::kTuple)
      throw SyntaxError("expected a name or a tuple of names after 'for'");
    expect_identifier("in");
    n->b = expression();
    expect(Tok::kCloseStatement, "'%}'");
    n->body = block_until({"endfor", "else"}, "for");
    if (is_statement({"else"})) {
      i_ += 2;
      expect(Tok::kCloseStatement, "'%}'");
      n->alternate = block_until({"endfor"}, "for");
    }
    return n;
  }

  NodePtr sequence(bool primary_only) {
    std::vector<NodePtr> items{primary_only ? primary() : expression()};
    const bool tuple = is(Tok::kComma);
    while (tuple) {
      ++i_;
      items.push_back(primary_only ? primary() : expression());
      if (!is(Tok::kComma)) break;
    }
    if (!tuple) return items[0];
    auto n = std::make_shared<Node>();
    n->kind = NodeKind::kTuple;
    n->items = std::move(items);
    return n;
  }

  NodePtr expression() {
    Depth depth(depth_);
    NodePtr a = logical_or();
    if (is_identifier("if")) {
      ++i_;
      NodePtr test = logical_or();
      if (is_identifier("else")) {
        ++i_;
        NodePtr otherwise = expression();
        return make(NodeKind::kTernary, "", test, a, otherwise);
      }
      return make(NodeKind::kSelect, "", a, test);
    }
    return a;
  }
  NodePtr logical_or() {
    NodePtr left = logical_and();
    while (is_identifier("or")) {
      ++i_;
      left = make(NodeKind::kBinary, "or", left, logical_and());
    }
    return left;
  }
  NodePtr logical_and() {
    NodePtr left = logical_not();
    while (is_identifier("and")) {
      ++i_;
      left = make(NodeKind::kBinary, "and", left, logical_not());
    }
    return left;
  }
  NodePtr logical_not() {
    Depth depth(depth_);
    NodePtr result;
    while (is_identifier("not")) {
      ++i_;
      result = make(NodeKind::kUnary, "not", logical_not());
    }
    return result ? result : comparison();
  }
  NodePtr comparison() {
    NodePtr left = additive();
    for (;;) {
      std::string op;
      if (is_identifier("not") && is_identifier("in", 1)) {
        op = "not in";
        i_ += 2;
      } else if (is_identifier("in") || is(Tok::kComparison)) {
        op = t_[i_++].value;
      } else {
        break;
      }
      left = make(NodeKind::kBinary, op, left, additive());
    }
    return left;
  }
  NodePtr additive() {
    NodePtr left = multiplicative();
    while (is(Tok::kAdditive)) {
      const std::string op = t_[i_++].value;
      left = make(NodeKind::kBinary, op, left, multiplicative());
    }
    return left;
  }
  NodePtr multiplicative() {
    NodePtr left = power();
    while (is(Tok::kMultiplicative)) {
      const std::string op = t_[i_++].value;
      left = make(NodeKind::kBinary, op, left, power());
    }
    return left;
  }
  NodePtr power() {
    NodePtr left = test();
    while (is(Tok::kPower)) {
      ++i_;
      left = make(NodeKind::kBinary, "**", left, test());
    }
    return left;
  }
  NodePtr test() {
    NodePtr operand = filter();
    while (is_identifier("is")) {
      ++i_;
      const bool negate = is_identifier("not");
      if (negate) ++i_;
      NodePtr name = primary();
      if (name->kind != NodeKind::kIdentifier) throw SyntaxError("expected a test name after 'is'");
      auto n = std::make_shared<Node>();
      n->kind = NodeKind::kTest;
      n->a = operand;
      n->text = name->text;
      n->flag = negate;
      operand = n;
    }
    return operand;
  }
  NodePtr filter() {
    NodePtr operand = unary_sign();
    while (is(Tok::kPipe)) {
      ++i_;
      NodePtr f = primary();
      if (f->kind != NodeKind::kIdentifier) throw SyntaxError("expected a filter name after '|'");
      if (is(Tok::kOpenParen)) f = call(f);
      operand = make(NodeKind::kFilter, "", operand, f);
    }
    return operand;
  }
  NodePtr unary_sign() {
    Depth depth(depth_);
    if (i_ < t_.size() && (t_[i_].type == Tok::kUnary || t_[i_].type == Tok::kAdditive) &&
        (t_[i_].value == "-" || t_[i_].value == "+")) {
      const std::string op = t_[i_++].value;
      return make(NodeKind::kUnary, op, unary_sign());
    }
    NodePtr member_expr = member(primary());
    return is(Tok::kOpenParen) ? call(member_expr) : member_expr;
  }
  NodePtr call(NodePtr callee) {
    Depth depth(depth_);
    auto n = std::make_shared<Node>();
    n->kind = NodeKind::kCall;
    n->a = std::move(callee);
    expect(Tok::kOpenParen, "'('");
    bool saw_keyword = false;
    while (!is(Tok::kCloseParen)) {
      if (i_ >= t_.size()) throw SyntaxError("unclosed '('");
      if (is(Tok::kPower) || (is(Tok::kMultiplicative) && t_[i_].value == "*"))
        throw SyntaxError("argument unpacking (* and **) is not supported");
      NodePtr arg = expression();
      if (is(Tok::kEquals)) {
        ++i_;
        if (arg->kind != NodeKind::kIdentifier) throw SyntaxError("expected a name for a keyword argument");
        arg = make(NodeKind::kKeyword, arg->text, arg, expression());
        saw_keyword = true;
      } else if (saw_keyword) {
        throw SyntaxError("positional arguments must come before keyword arguments");
      }
      n->items.push_back(arg);
      if (is(Tok::kComma)) ++i_;
    }
    ++i_;
    NodePtr result = member(n);
    return is(Tok::kOpenParen) ? call(result) : result;
  }
  NodePtr member(NodePtr object) {
    while (is(Tok::kDot) || is(Tok::kOpenSquare)) {
      Depth depth(depth_);
      const bool computed = t_[i_++].type == Tok::kOpenSquare;
      NodePtr property;
      if (computed) {
        property = subscript();
        expect(Tok::kCloseSquare, "']'");
      } else {
        property = primary();
        if (property->kind != NodeKind::kIdentifier && property->kind != NodeKind::kInteger)
          throw SyntaxError("expected a name or an integer after '.'");
      }
      auto n = std::make_shared<Node>();
      n->kind = NodeKind::kMember;
      n->a = std::move(object);
      n->b = std::move(property);
      n->flag = computed;
      object = n;
    }
    return object;
  }
  // An index, or a slice a:b:c with any part left out.
  NodePtr subscript() {
    std::vector<NodePtr> parts;
    bool slice = false;
    while (!is(Tok::kCloseSquare)) {
      if (i_ >= t_.size()) throw SyntaxError("unclosed '['");
      if (is(Tok::kColon)) {
        parts.push_back(nullptr);
        ++i_;
        slice = true;
      } else {
        parts.push_back(expression());
        if (is(Tok::kColon)) {
          ++i_;
          slice = true;
        }
      }
    }
    if (parts.empty()) throw SyntaxError("expected an index or a slice in '[]'");
    if (!slice) return parts[0];
    if (parts.size() > 3) throw SyntaxError("a slice has at most 3 parts");
    parts.resize(3);
    return make(NodeKind::kSlice, "", parts[0], parts[1], parts[2]);
  }
  NodePtr primary() {
    Depth depth(depth_);
    if (i_ >= t_.size()) throw SyntaxError("unexpected end of the template inside a tag");
    const Token& token = t_[i_++];
    switch (token.type) {
      case Tok::kNumber: {
        auto n = std::make_shared<Node>();
        if (token.value.find('.') != std::string::npos) {
          n->kind = NodeKind::kFloat;
          n->number = std::stod(token.value);
        } else {
          n->kind = NodeKind::kInteger;
          const auto [end, ec] = std::from_chars(token.value.data() + (token.value[0] == '+'),
                                                 token.value.data() + token.value.size(), n->integer);
          if (ec != std::errc() || end != token.value.data() + token.value.size())
            throw SyntaxError("integer literal out of range: " + token.value.substr(0, 40));
        }
        return n;
      }
      case Tok::kString: {
        std::string value = token.value;
        while (is(Tok::kString)) value += t_[i_++].value;
        return make(NodeKind::kString, std::move(value));
      }
      case Tok::kIdentifier:
        return make(NodeKind::kIdentifier, token.value);
      case Tok::kOpenParen: {
        NodePtr e = sequence(false);
        expect(Tok::kCloseParen, "')'");
        return e;
      }
      case Tok::kOpenSquare: {
        auto n = std::make_shared<Node>();
        n->kind = NodeKind::kArray;
        while (!is(Tok::kCloseSquare)) {
          if (i_ >= t_.size()) throw SyntaxError("unclosed '['");
          n->items.push_back(expression());
          if (is(Tok::kComma)) ++i_;
        }
        ++i_;
        return n;
      }
      case Tok::kOpenCurly: {
        auto n = std::make_shared<Node>();
        n->kind = NodeKind::kObject;
        while (!is(Tok::kCloseCurly)) {
          if (i_ >= t_.size()) throw SyntaxError("unclosed '{'");
          n->items.push_back(expression());
          expect(Tok::kColon, "':' between a key and its value");
          n->items.push_back(expression());
          if (is(Tok::kComma)) ++i_;
        }
        ++i_;
        return n;
      }
      default:
        throw SyntaxError("unexpected '" + token.value + "'");
    }
  }

  const std::vector<Token>& t_;
  size_t i_ = 0;
  int depth_ = 0;
};

}  // namespace

NodePtr parse(const std::vector<Token>& tokens) { return Parser(tokens).program(); }

}  // namespace hymba::jinja
