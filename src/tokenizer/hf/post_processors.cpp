#include "tokenizer/hf/post_processors.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <map>

#include "core/error.h"
#include "tokenizer/hf/json_fields.h"
#include "tokenizer/hf/unicode_text.h"

namespace hymba::tok {

using nlohmann::json;

namespace {

struct SpecialIds {
  std::vector<int32_t> ids;
  std::vector<std::string> tokens;
};

void append_special(EncodedText& e, const SpecialIds& s) {
  for (size_t k = 0; k < s.ids.size(); ++k) {
    e.ids.push_back(s.ids[k]);
    e.offsets.push_back({});
    e.pieces.push_back(k < s.tokens.size() ? s.tokens[k] : std::string());
    e.special.push_back(true);
  }
}

// The template's parts: special tokens around the sequence.
class Template final : public PostProcessor {
 public:
  Template(std::vector<SpecialIds> before, std::vector<SpecialIds> after)
      : before_(std::move(before)), after_(std::move(after)) {}
  void process(EncodedText& e, bool add_special_tokens) const override {
    if (!add_special_tokens) return;
    EncodedText out;
    for (const SpecialIds& s : before_) append_special(out, s);
    out.ids.insert(out.ids.end(), e.ids.begin(), e.ids.end());
    out.offsets.insert(out.offsets.end(), e.offsets.begin(), e.offsets.end());
    out.pieces.insert(out.pieces.end(), e.pieces.begin(), e.pieces.end());
    out.special.insert(out.special.end(), e.special.begin(), e.special.end());
    for (const SpecialIds& s : after_) append_special(out, s);
    e = std::move(out);
  }

 private:
  std::vector<SpecialIds> before_, after_;
};

class ByteLevelOffsets final : public PostProcessor {
 public:
  ByteLevelOffsets(bool trim, bool add_prefix_space) : trim_(trim), add_prefix_space_(add_prefix_space) {}
  void process(EncodedText& e, bool) const override {
    if (trim_) trim_byte_level_offsets(e, add_prefix_space_);
  }

 private:
  bool trim_, add_prefix_space_;
};

class Sequence final : public PostProcessor {
 public:
  explicit Sequence(std::vector<std::unique_ptr<PostProcessor>> parts) : parts_(std::move(parts)) {}
  void process(EncodedText& e, bool add_special_tokens) const override {
    for (const auto& p : parts_) p->process(e, add_special_tokens);
  }

 private:
  std::vector<std::unique_ptr<PostProcessor>> parts_;
};

// ["[SEP]", 102]
SpecialIds token_pair(const json& j, const char* key, const std::string& where) {
  const json& v = field(j, key, where);
  HYMBA_CHECK(v.is_array() && v.size() == 2 && v[0].is_string() && v[1].is_number_integer() && v[1].get<int64_t>() >= 0,
              sub(where, std::string(".") + key), " must be [\"token\", id]");
  return {{static_cast<int32_t>(v[1].get<int64_t>())}, {v[0].get<std::string>()}};
}

std::unique_ptr<PostProcessor> make_template(const json& j, const std::string& where) {
  std::map<std::string, SpecialIds> specials;
  if (j.contains("special_tokens") && !j["special_tokens"].is_null()) {
    const json& st = j["special_tokens"];
    HYMBA_CHECK(st.is_object(), sub(where, ".special_tokens"), " must be an object");
    for (auto it = st.begin(); it != st.end(); ++it) {
      const std::string at = sub(where, ".special_tokens." + it.key());
      SpecialIds s;
      for (const json& id : field_array(*it, "ids", at)) {
        HYMBA_CHECK(id.is_number_integer() && id.get<int64_t>() >= 0, sub(at, ".ids"), " must be a list of ids");
        s.ids.push_back(static_cast<int32_t>(id.get<int64_t>()));
      }
      if (it->contains("tokens"))
        for (const json& t : field_array(*it, "tokens", at)) s.tokens.push_back(t.is_string() ? t.get<std::string>() : "");
      specials[it.key()] = std::move(s);
    }
  }
  const json& single = field_array(j, "single", where);
  std::vector<SpecialIds> before, after;
  bool seen_sequence = false;
  for (size_t i = 0; i < single.size(); ++i) {
    const json& piece = single[i];
    const std::string at = sub(where, ".single[" + std::to_string(i) + "]");
    if (piece.is_object() && piece.contains("SpecialToken")) {
      const std::string id = field_string(piece["SpecialToken"], "id", sub(at, ".SpecialToken"));
      auto it = specials.find(id);
      HYMBA_CHECK(it != specials.end(), at, " names special token \"", id, "\", which special_tokens does not define");
      (seen_sequence ? after : before).push_back(it->second);
    } else if (piece.is_object() && piece.contains("Sequence")) {
      HYMBA_CHECK(!seen_sequence, at, ": a single-sequence template has one Sequence");
      seen_sequence = true;
    } else {
      fail(at, " must be {\"SpecialToken\": ...} or {\"Sequence\": ...}");
    }
  }
  HYMBA_CHECK(seen_sequence, sub(where, ".single"), " has no Sequence");
  return std::make_unique<Template>(std::move(before), std::move(after));
}

}  // namespace

void trim_byte_level_offsets(EncodedText& e, bool add_prefix_space) {
  const std::string& space_char = byte_level_char(' ');
  for (size_t i = 0; i < e.ids.size(); ++i) {
    if (e.special[i]) continue;
    const std::string& t = e.pieces[i];
    auto is_space = [&](size_t at, size_t len) {
      return t.compare(at, len, space_char) == 0 || is_whitespace(next_code_point(t, at).cp);
    };
    size_t leading = 0, trailing = 0;
    for (size_t k = 0; k < t.size();) {
      const size_t len = char_len(t, k);
      if (!is_space(k, len)) break;
      ++leading;
      k += len;
    }
    for (size_t k = t.size(); k > 0;) {
      const size_t p = prev_char_start(t, k);
      if (!is_space(p, k - p)) break;
      ++trailing;
      k = p;
    }
    TokenSpan& o = e.offsets[i];
    if (leading > 0) {
      const bool first = i == 0 || o.start == 0;
      if (first && add_prefix_space && leading == 1) leading = 0;
      o.start = std::min(o.start + leading, o.end);
    }
    if (trailing > 0 && o.end >= trailing) o.end = std::max(o.end - trailing, o.start);
  }
}

std::unique_ptr<PostProcessor> make_post_processor(const json& j, const std::string& where, int depth) {
  const std::string type = component_type(j, where);
  if (type == "Sequence")
    return std::make_unique<Sequence>(sequence_parts<PostProcessor>(j, "processors", where, depth, make_post_processor));
  if (type == "TemplateProcessing") return make_template(j, where);
  if (type == "ByteLevel")
    return std::make_unique<ByteLevelOffsets>(field_bool(j, "trim_offsets", where, true),
                                              field_bool(j, "add_prefix_space", where, true));
  if (type == "BertProcessing" || type == "RobertaProcessing") {
    const bool roberta = type == "RobertaProcessing";
    std::vector<std::unique_ptr<PostProcessor>> parts;
    if (roberta && field_bool(j, "trim_offsets", where, true))
      parts.push_back(std::make_unique<ByteLevelOffsets>(true, field_bool(j, "add_prefix_space", where, true)));
    parts.push_back(std::make_unique<Template>(std::vector<SpecialIds>{token_pair(j, "cls", where)},
                                               std::vector<SpecialIds>{token_pair(j, "sep", where)}));
    return std::make_unique<Sequence>(std::move(parts));
  }
  unsupported(where, type, "TemplateProcessing, BertProcessing, RobertaProcessing, ByteLevel, Sequence");
}

}  // namespace hymba::tok
