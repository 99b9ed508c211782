#include "tokenizer/hf/decoders.h"

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "tokenizer/hf/json_fields.h"
#include "tokenizer/hf/pattern.h"
#include "tokenizer/hf/unicode_text.h"

namespace hymba::tok {

using nlohmann::json;

namespace {

// All tokens' bytes (printable characters back to bytes) as one string.
class ByteLevel final : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens, bool keep_bytes) const override {
    std::string bytes;
    for (const std::string& t : tokens) {
      std::string mapped;
      bool all = true;
      for (size_t i = 0; i < t.size() && all;) {
        const CodePoint c = next_code_point(t, i);
        const int b = byte_level_byte(c.cp);
        all = b >= 0;
        if (all) mapped.push_back(static_cast<char>(b));
        i += c.len;
      }
      bytes += all ? mapped : t;
    }
    tokens.assign(1, keep_bytes ? bytes : utf8_lossy(bytes));
  }
};

class Metaspace final : public Decoder {
 public:
  Metaspace(std::string replacement, bool strip_first) : replacement_(std::move(replacement)), strip_first_(strip_first) {}
  void decode_chain(std::vector<std::string>& tokens, bool) const override {
    for (size_t i = 0; i < tokens.size(); ++i) {
      std::string out;
      const std::string& t = tokens[i];
      for (size_t k = 0; k < t.size();) {
        if (t.compare(k, replacement_.size(), replacement_) == 0) {
          if (!(i == 0 && strip_first_)) out.push_back(' ');  // every mark of the first token goes, as in HF
          k += replacement_.size();
        } else {
          out.push_back(t[k++]);
        }
      }
      tokens[i] = std::move(out);
    }
  }

 private:
  std::string replacement_;
  bool strip_first_;
};

// Runs of <0xAB> tokens become their bytes; each byte of a run that is not
// valid UTF-8 becomes U+FFFD.
class ByteFallback final : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens, bool keep_bytes) const override {
    std::vector<std::string> out;
    std::string run;
    auto flush = [&] {
      if (run.empty()) return;
      if (keep_bytes || is_valid_utf8(run)) out.push_back(run);
      else out.insert(out.end(), run.size(), "\xEF\xBF\xBD");
      run.clear();
    };
    for (std::string& t : tokens) {
      int byte = -1;
      if (t.size() == 6 && t.compare(0, 3, "<0x") == 0 && t[5] == '>') byte = hex_byte(t[3], t[4]);
      if (byte >= 0) {
        run.push_back(static_cast<char>(byte));
        continue;
      }
      flush();
      out.push_back(std::move(t));
    }
    flush();
    tokens = std::move(out);
  }

 private:
  static int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }
  static int hex_byte(char hi, char lo) {
    const int h = hex_digit(hi), l = hex_digit(lo);
    return h < 0 || l < 0 ? -1 : h * 16 + l;
  }
};

class Fuse final : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens, bool) const override {
    std::string all;
    for (const std::string& t : tokens) all += t;
    tokens.assign(1, all);
  }
};

// Up to `start` leading and `stop` trailing `content` characters of each token.
class Strip final : public Decoder {
 public:
  Strip(std::string content, size_t start, size_t stop) : content_(std::move(content)), start_(start), stop_(stop) {}
  void decode_chain(std::vector<std::string>& tokens, bool) const override {
    for (std::string& t : tokens) {
      size_t a = 0, b = t.size();
      for (size_t n = 0; n < start_ && t.compare(a, content_.size(), content_) == 0 && a < b; ++n) a += content_.size();
      for (size_t n = 0; n < stop_ && b - a >= content_.size() && t.compare(b - content_.size(), content_.size(), content_) == 0; ++n)
        b -= content_.size();
      t = t.substr(a, b - a);
    }
  }

 private:
  std::string content_;
  size_t start_, stop_;
};

class Replace final : public Decoder {
 public:
  Replace(std::unique_ptr<Pattern> pattern, std::string content)
      : pattern_(std::move(pattern)), content_(std::move(content)) {}
  void decode_chain(std::vector<std::string>& tokens, bool) const override {
    for (std::string& t : tokens) {
      std::string out;
      for (const Piece& p : pattern_->find_matches(t)) out += p.match ? content_ : t.substr(p.start, p.end - p.start);
      t = std::move(out);
    }
  }

 private:
  std::unique_ptr<Pattern> pattern_;
  std::string content_;
};

void replace_all(std::string& s, std::string_view from, std::string_view to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size())) s.replace(at, from.size(), to);
}

class WordPiece final : public Decoder {
 public:
  WordPiece(std::string prefix, bool cleanup) : prefix_(std::move(prefix)), cleanup_(cleanup) {}
  void decode_chain(std::vector<std::string>& tokens, bool) const override {
    for (size_t i = 0; i < tokens.size(); ++i) {
      std::string& t = tokens[i];
      if (i != 0) {
        if (t.compare(0, prefix_.size(), prefix_) == 0) t.erase(0, prefix_.size());
        else t.insert(0, " ");
      }
      if (cleanup_) {
        static constexpr std::pair<std::string_view, std::string_view> kCleanup[] = {
            {" .", "."}, {" ?", "?"}, {" !", "!"}, {" ,", ","}, {" ' ", "'"}, {" n't", "n't"},
            {" 'm", "'m"}, {" do not", " don't"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}};
        for (const auto& [from, to] : kCleanup) replace_all(t, from, to);
      }
    }
  }

 private:
  std::string prefix_;
  bool cleanup_;
};

class BpeDecoder final : public Decoder {
 public:
  explicit BpeDecoder(std::string suffix) : suffix_(std::move(suffix)) {}
  void decode_chain(std::vector<std::string>& tokens, bool) const override {
    for (size_t i = 0; i < tokens.size(); ++i) replace_all(tokens[i], suffix_, i + 1 == tokens.size() ? "" : " ");
  }

 private:
  std::string suffix_;
};

class Sequence final : public Decoder {
 public:
  explicit Sequence(std::vector<std::unique_ptr<Decoder>> parts) : parts_(std::move(parts)) {}
  void decode_chain(std::vector<std::string>& tokens, bool keep_bytes) const override {
    for (const auto& p : parts_) p->decode_chain(tokens, keep_bytes);
  }

 private:
  std::vector<std::unique_ptr<Decoder>> parts_;
};

}  // namespace

std::unique_ptr<Decoder> make_decoder(const json& j, const std::string& where, int depth) {
  const std::string type = component_type(j, where);
  if (type == "Sequence")
    return std::make_unique<Sequence>(sequence_parts<Decoder>(j, "decoders", where, depth, make_decoder));
  if (type == "ByteLevel") return std::make_unique<ByteLevel>();
  if (type == "Metaspace") {
    const std::string scheme = field_string_or(j, "prepend_scheme", where, "");
    const bool strip_first = scheme.empty() ? field_bool(j, "add_prefix_space", where, true) : scheme != "never";
    const std::string rep = field_string_or(j, "replacement", where, "\xE2\x96\x81");
    HYMBA_CHECK(!rep.empty() && char_len(rep, 0) == rep.size(), sub(where, ".replacement"), " must be one character");
    return std::make_unique<Metaspace>(rep, strip_first);
  }
  if (type == "ByteFallback") return std::make_unique<ByteFallback>();
  if (type == "Fuse") return std::make_unique<Fuse>();
  if (type == "Strip") {
    const std::string content = field_string(j, "content", where);
    HYMBA_CHECK(!content.empty() && char_len(content, 0) == content.size(), sub(where, ".content"),
                " must be one character");
    return std::make_unique<Strip>(content, static_cast<size_t>(field_int(j, "start", where, 0, 0, 1 << 20)),
                                   static_cast<size_t>(field_int(j, "stop", where, 0, 0, 1 << 20)));
  }
  if (type == "Replace")
    return std::make_unique<Replace>(pattern_from_json(field(j, "pattern", where), sub(where, ".pattern")),
                                     field_string(j, "content", where));
  if (type == "WordPiece")
    return std::make_unique<WordPiece>(field_string_or(j, "prefix", where, "##"), field_bool(j, "cleanup", where, true));
  if (type == "BPEDecoder") return std::make_unique<BpeDecoder>(field_string_or(j, "suffix", where, "</w>"));
  unsupported(where, type, "ByteLevel, Metaspace, ByteFallback, Fuse, Strip, Replace, WordPiece, BPEDecoder, Sequence");
}

}  // namespace hymba::tok
