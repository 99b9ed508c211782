#include "tokenizer/hf/normalizers.h"

#include <nlohmann/json.hpp>

#include <unictype.h>

#include <algorithm>
#include <string_view>
#include <utility>
#include <vector>

#include "core/error.h"
#include "tokenizer/hf/json_fields.h"
#include "tokenizer/unicode_normalize.h"

namespace hymba::tok {

using nlohmann::json;

namespace {

// Where a normal form may be computed piece by piece: before a character
// that combines with nothing before it (canonical combining class 0, not a
// Hangul vowel or final jamo, which compose with the syllable before).
bool starts_segment(uint32_t cp) {
  if (cp < 0x300) return true;
  if (cp >= kInvalidCp) return true;
  if ((cp >= 0x1161 && cp <= 0x1175) || (cp >= 0x11A8 && cp <= 0x11C2)) return false;
  return uc_combining_class(cp) == 0;
}

// `dst` in place of source bytes [a, b), character by character as HF aligns
// them: characters added by a decomposition map to the source character they
// came from (the first), a composed character to the first it consumed.
void put_aligned(const std::string& src, size_t a, size_t b, const std::string& dst, NormalizedBuilder& out) {
  std::vector<size_t> in;  // source character starts, then b
  for (size_t i = a; i < b; i += char_len(src, i)) in.push_back(i);
  std::vector<size_t> at;  // output character starts, then its size
  for (size_t i = 0; i < dst.size(); i += char_len(dst, i)) at.push_back(i);
  const size_t n_in = in.size(), n_out = at.size();
  in.push_back(b);
  at.push_back(dst.size());
  const size_t extra = n_out > n_in ? n_out - n_in : 0;
  for (size_t k = 0; k < n_out; ++k) {
    const size_t j = std::min(k <= extra ? 0 : k - extra, n_in - 1);
    out.put(std::string_view(dst).substr(at[k], at[k + 1] - at[k]), in[j], in[j + 1]);
  }
}

// The normal form of `run` (source bytes [a, b)) into `b`: segment by
// segment, so each output character maps to the characters it came from,
// when that gives the same text as normalizing the whole run (a few
// compositions across starters do not); else the run maps as one piece.
void normalize_run(const NormalizedString& s, size_t a, size_t b, NormalForm form, NormalizedBuilder& out) {
  const std::string_view run = std::string_view(s.text()).substr(a, b - a);
  const std::string whole = normalize_utf8(run, form);
  if (whole == run) return out.keep(a, b);
  std::vector<std::pair<size_t, std::string>> segments;  // start in run, normalized text
  std::string joined;
  size_t start = 0;
  for (size_t i = 0; i <= run.size();) {
    const CodePoint c = i < run.size() ? next_code_point(run, i) : CodePoint{0, 1};
    if (i == run.size() || (i > start && starts_segment(c.cp))) {
      segments.emplace_back(start, normalize_utf8(run.substr(start, i - start), form));
      joined += segments.back().second;
      start = i;
    }
    if (i == run.size()) break;
    i += c.len;
  }
  if (joined != whole) return out.put(whole, a, b);
  for (size_t k = 0; k < segments.size(); ++k) {
    const size_t sa = a + segments[k].first, sb = k + 1 < segments.size() ? a + segments[k + 1].first : b;
    const std::string_view src = run.substr(segments[k].first, sb - sa);
    if (segments[k].second == src) out.keep(sa, sb);
    else put_aligned(s.text(), sa, sb, segments[k].second, out);
  }
}

// A Unicode normal form of the text. ASCII is stable under every form and
// never composes with what comes before it, so only the runs of non-ASCII
// characters (with the ASCII character before each, a possible base of its
// combining marks) are normalized.
NormalizedString unicode_form(const NormalizedString& s, NormalForm form) {
  const std::string& t = s.text();
  NormalizedBuilder b(s);
  size_t i = 0;
  while (i < t.size()) {
    size_t j = i;
    while (j < t.size() && static_cast<unsigned char>(t[j]) < 0x80) ++j;
    if (j == t.size()) {
      b.keep(i, j);
      break;
    }
    const size_t start = j > i ? j - 1 : j;
    b.keep(i, start);
    size_t end = j;
    while (end < t.size() && static_cast<unsigned char>(t[end]) >= 0x80) ++end;
    normalize_run(s, start, end, form, b);
    i = end;
  }
  return b.finish();
}

// Keeps the characters `keep` accepts.
template <typename Keep>
NormalizedString filter_chars(const NormalizedString& s, Keep&& keep) {
  return map_chars(s, [&](uint32_t cp, std::string& out) {
    if (keep(cp)) cp >= kInvalidCp ? out.push_back(static_cast<char>(cp - kInvalidCp)) : append_utf8(out, cp);
  });
}

NormalizedString lowercase(const NormalizedString& s) {
  return map_chars(s, [](uint32_t cp, std::string& out) { append_lowercase(out, cp); });
}

NormalizedString strip(const NormalizedString& s, bool left, bool right) {
  const std::string& t = s.text();
  size_t a = 0, b = t.size();
  if (left)
    while (a < b) {
      const CodePoint c = next_code_point(t, a);
      if (!is_whitespace(c.cp)) break;
      a += c.len;
    }
  if (right)
    while (b > a) {
      const size_t p = prev_char_start(t, b);
      if (!is_whitespace(next_code_point(t, p).cp)) break;
      b = p;
    }
  return s.slice(a, b);
}

class UnicodeNormalizer final : public Normalizer {
 public:
  explicit UnicodeNormalizer(NormalForm form) : form_(form) {}
  void normalize(NormalizedString& s) const override { s = unicode_form(s, form_); }

 private:
  NormalForm form_;
};

class Lowercase final : public Normalizer {
 public:
  void normalize(NormalizedString& s) const override { s = lowercase(s); }
};

class Strip final : public Normalizer {
 public:
  Strip(bool left, bool right) : left_(left), right_(right) {}
  void normalize(NormalizedString& s) const override { s = strip(s, left_, right_); }

 private:
  bool left_, right_;
};

class StripAccents final : public Normalizer {
 public:
  void normalize(NormalizedString& s) const override {
    s = filter_chars(s, [](uint32_t cp) { return !is_combining_mark(cp); });
  }
};

class Replace final : public Normalizer {
 public:
  Replace(std::unique_ptr<Pattern> pattern, std::string content)
      : pattern_(std::move(pattern)), content_(std::move(content)) {}
  void normalize(NormalizedString& s) const override {
    NormalizedBuilder b(s);
    for (const Piece& p : pattern_->find_matches(s.text())) {
      if (p.match) b.put(content_, p.start, p.end);
      else b.keep(p.start, p.end);
    }
    s = b.finish();
  }

 private:
  std::unique_ptr<Pattern> pattern_;
  std::string content_;
};

class Prepend final : public Normalizer {
 public:
  explicit Prepend(std::string prefix) : prefix_(std::move(prefix)) {}
  void normalize(NormalizedString& s) const override {
    if (s.empty()) return;
    NormalizedBuilder b(s);
    b.put(prefix_, 0, 0);
    b.keep(0, s.size());
    s = b.finish();
  }

 private:
  std::string prefix_;
};

bool is_chinese_char(uint32_t c) {
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
         (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

class BertNormalizer final : public Normalizer {
 public:
  BertNormalizer(bool clean_text, bool chinese, bool strip_accents, bool lower)
      : clean_text_(clean_text), chinese_(chinese), strip_accents_(strip_accents), lower_(lower) {}
  void normalize(NormalizedString& s) const override {
    if (clean_text_) {
      s = map_chars(s, [](uint32_t cp, std::string& out) {
        const bool control = cp != '\t' && cp != '\n' && cp != '\r' && is_other(cp);
        if (cp == 0 || cp == 0xFFFD || control) return;
        if (cp == '\t' || cp == '\n' || cp == '\r' || is_whitespace(cp)) out.push_back(' ');
        else append_utf8(out, cp);
      });
    }
    if (chinese_) {
      s = map_chars(s, [](uint32_t cp, std::string& out) {
        const bool cjk = is_chinese_char(cp);
        if (cjk) out.push_back(' ');
        cp >= kInvalidCp ? out.push_back(static_cast<char>(cp - kInvalidCp)) : append_utf8(out, cp);
        if (cjk) out.push_back(' ');
      });
    }
    if (strip_accents_) {
      s = unicode_form(s, NormalForm::kNFD);
      s = filter_chars(s, [](uint32_t cp) { return !is_mark_nonspacing(cp); });
    }
    if (lower_) s = lowercase(s);
  }

 private:
  bool clean_text_, chinese_, strip_accents_, lower_;
};

class ByteLevelNormalizer final : public Normalizer {
 public:
  void normalize(NormalizedString& s) const override {
    NormalizedBuilder b(s);
    const std::string& t = s.text();
    for (size_t i = 0; i < t.size();) {
      const size_t len = char_len(t, i);
      std::string mapped;
      for (size_t k = 0; k < len; ++k) mapped += byte_level_char(static_cast<unsigned char>(t[i + k]));
      b.put(mapped, i, i + len);
      i += len;
    }
    s = b.finish();
  }
};

class Sequence final : public Normalizer {
 public:
  explicit Sequence(std::vector<std::unique_ptr<Normalizer>> parts) : parts_(std::move(parts)) {}
  void normalize(NormalizedString& s) const override {
    for (const auto& p : parts_) p->normalize(s);
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> parts_;
};

}  // namespace

std::unique_ptr<Normalizer> make_normalizer(const json& j, const std::string& where, int depth) {
  const std::string type = component_type(j, where);
  if (type == "Sequence")
    return std::make_unique<Sequence>(sequence_parts<Normalizer>(j, "normalizers", where, depth, make_normalizer));
  if (const auto form = normal_form_from_name(type)) return std::make_unique<UnicodeNormalizer>(*form);
  if (type == "Lowercase") return std::make_unique<Lowercase>();
  if (type == "Strip")
    return std::make_unique<Strip>(field_bool(j, "strip_left", where, true), field_bool(j, "strip_right", where, true));
  if (type == "StripAccents") return std::make_unique<StripAccents>();
  if (type == "Replace")
    return std::make_unique<Replace>(pattern_from_json(field(j, "pattern", where), where + ".pattern"),
                                     field_string(j, "content", where));
  if (type == "Prepend") return std::make_unique<Prepend>(field_string(j, "prepend", where));
  if (type == "ByteLevel") return std::make_unique<ByteLevelNormalizer>();
  if (type == "BertNormalizer") {
    const bool lower = field_bool(j, "lowercase", where, true);
    const bool strip_accents = j.contains("strip_accents") && !j["strip_accents"].is_null()
                                   ? field_bool(j, "strip_accents", where, false)
                                   : lower;
    return std::make_unique<BertNormalizer>(field_bool(j, "clean_text", where, true),
                                            field_bool(j, "handle_chinese_chars", where, true), strip_accents, lower);
  }
  unsupported(where, type,
              "NFC, NFD, NFKC, NFKD, Lowercase, Strip, StripAccents, Replace, Prepend, BertNormalizer, ByteLevel, "
              "Sequence");
}

}  // namespace hymba::tok
