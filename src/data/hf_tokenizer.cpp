// Byte-level BPE as GPT-2 defined it and HF `tokenizers` stores it:
//   1. added tokens (<|endoftext|>, ...) are cut out of the text first, and
//      the text between them goes through the normalizer (NFC, ...), if any;
//   2. the rest is split by GPT-2's pattern
//        's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//      (hand-coded below; Unicode classes are exact for ASCII and Latin-1 and
//      cover the common letter, digit, space and punctuation blocks elsewhere);
//   3. each piece's bytes become printable characters (bytes_to_unicode) and
//      are merged pairwise, lowest merge rank first, into vocabulary entries.
#include "data/hf_tokenizer.h"

#include <algorithm>
#include <array>
#include <climits>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/atomic_file.h"
#include "core/json_io.h"
#include "core/error.h"
#include "data/unicode_normalize.h"

namespace hymba {

using nlohmann::json;
namespace fs = std::filesystem;

namespace {

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

// One code point of s at i: its value and byte length. An invalid byte is
// returned as itself (a code point >= 0x110000 marks it) with length 1.
std::pair<uint32_t, size_t> next_cp(std::string_view s, size_t i) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  if (b0 < 0x80) return {b0, 1};
  size_t len = (b0 & 0xE0) == 0xC0 ? 2 : (b0 & 0xF0) == 0xE0 ? 3 : (b0 & 0xF8) == 0xF0 ? 4 : 0;
  if (len == 0 || i + len > s.size()) return {0x110000u + b0, 1};
  uint32_t cp = b0 & (0x7F >> len);
  for (size_t k = 1; k < len; ++k) {
    const auto b = static_cast<unsigned char>(s[i + k]);
    if ((b & 0xC0) != 0x80) return {0x110000u + b0, 1};
    cp = (cp << 6) | (b & 0x3F);
  }
  return {cp, len};
}

bool is_space(uint32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

bool is_number(uint32_t c) {
  if (c < 0x80) return c >= '0' && c <= '9';
  return c == 0xB2 || c == 0xB3 || c == 0xB9 || (c >= 0xBC && c <= 0xBE) || (c >= 0x660 && c <= 0x669) ||
         (c >= 0x6F0 && c <= 0x6F9) || (c >= 0x966 && c <= 0x96F) || (c >= 0x2070 && c <= 0x2079) ||
         (c >= 0x2080 && c <= 0x2089) || (c >= 0x2150 && c <= 0x218B) || (c >= 0x2460 && c <= 0x249B) ||
         (c >= 0xFF10 && c <= 0xFF19) || c == 0x3007 || (c >= 0x3021 && c <= 0x3029);
}

// Neither letter nor number nor space: punctuation, symbols, marks.
bool is_other(uint32_t c) {
  if (c < 0x80) return !((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) && !is_space(c);
  if (c >= 0x110000) return true;  // an invalid byte
  if (c <= 0xBF) return c != 0xAA && c != 0xB5 && c != 0xBA && !is_number(c) && !is_space(c);
  return c == 0xD7 || c == 0xF7 || (c >= 0x2C2 && c <= 0x2C5) || (c >= 0x2D2 && c <= 0x2DF) ||
         (c >= 0x300 && c <= 0x36F) || (c >= 0x2010 && c <= 0x2027) || (c >= 0x2030 && c <= 0x205E) ||
         (c >= 0x20A0 && c <= 0x20FF) || (c >= 0x2190 && c <= 0x245F) || (c >= 0x2500 && c <= 0x2BFF) ||
         (c >= 0x2E00 && c <= 0x2E7F) || (c >= 0x3001 && c <= 0x3003) || (c >= 0x3008 && c <= 0x3020) ||
         (c >= 0xFE30 && c <= 0xFE4F) || (c >= 0xFF01 && c <= 0xFF0F) || (c >= 0xFF1A && c <= 0xFF20) ||
         (c >= 0xFF3B && c <= 0xFF40) || (c >= 0xFF5B && c <= 0xFF65) || (c >= 0x1F000 && c <= 0x1FAFF);
}

bool is_letter(uint32_t c) { return !is_space(c) && !is_number(c) && !is_other(c); }

// Splits text by GPT-2's pattern; calls emit with each piece.
template <typename Emit>
void gpt2_split(std::string_view s, Emit&& emit) {
  // Code points with their byte offsets (one extra entry at the end).
  std::vector<uint32_t> cp;
  std::vector<size_t> at;
  for (size_t i = 0; i < s.size();) {
    const auto [c, len] = next_cp(s, i);
    cp.push_back(c);
    at.push_back(i);
    i += len;
  }
  const size_t n = cp.size();
  at.push_back(s.size());
  size_t i = 0;
  auto run = [&](size_t j, bool (*cls)(uint32_t)) {
    while (j < n && cls(cp[j])) ++j;
    return j;
  };
  while (i < n) {
    size_t end = i;
    if (cp[i] == '\'' && i + 1 < n) {
      const uint32_t a = cp[i + 1], b = i + 2 < n ? cp[i + 2] : 0;
      if (a == 's' || a == 't' || a == 'm' || a == 'd') end = i + 2;
      else if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) end = i + 3;
    }
    if (end == i) {
      const size_t j = cp[i] == ' ' && i + 1 < n ? i + 1 : i;  // the optional leading space
      if (is_letter(cp[j])) end = run(j, is_letter);
      else if (is_number(cp[j])) end = run(j, is_number);
      else if (is_other(cp[j])) end = run(j, is_other);
      else {
        // Whitespace: a run not followed by text, else the run minus its last
        // character (which then leads the next piece), at least one character.
        const size_t e = run(i, is_space);
        end = (e == n || e - i == 1) ? e : e - 1;
      }
    }
    emit(s.substr(at[i], at[end] - at[i]));
    i = end;
  }
}

struct AddedToken {
  std::string content;
  int32_t id = 0;
  bool special = false;
};

class HfBpeTokenizer final : public Tokenizer {
 public:
  HfBpeTokenizer(const std::string& path, std::string contents) : contents_(std::move(contents)) {
    const json j = parse_json(contents_, path);  // duplicate keys refused, errors name the file
    HYMBA_CHECK(j.is_object(), path, ": expected a JSON object");
    HYMBA_CHECK(j.contains("model") && j["model"].is_object(), path, ": field 'model' is missing");
    const json& m = j["model"];
    const std::string type = optional_string(m, "type", "BPE", path, "model.");
    HYMBA_CHECK(type == "BPE", path, ": field 'model.type' is \"", excerpt(type), "\"; only byte-level BPE is supported");
    for (const char* f : {"continuing_subword_prefix", "end_of_word_suffix"})
      HYMBA_CHECK(!m.contains(f) || m[f].is_null() || m[f] == "", path, ": field 'model.", f,
                  "' is set; only byte-level BPE without affixes is supported");
    HYMBA_CHECK(!optional_bool(m, "byte_fallback", false, path, "model."), path,
                ": field 'model.byte_fallback' is true; only byte-level BPE is supported");
    check_byte_level(j, "pre_tokenizer", path, /*required=*/true);
    check_byte_level(j, "decoder", path, /*required=*/false);
    if (j.contains("normalizer") && !j["normalizer"].is_null()) add_normalizer(j["normalizer"], "normalizer", path);
    add_prefix_space_ = optional_bool(j["pre_tokenizer"], "add_prefix_space", false, path, "pre_tokenizer.");

    HYMBA_CHECK(m.contains("vocab") && m["vocab"].is_object(), path, ": field 'model.vocab' must be an object");
    // Ids index the piece table: bounded by the number of entries the file
    // defines, so one id (2^33, 2^30 - 1) cannot size the table (to GiBs).
    const int64_t max_ids = static_cast<int64_t>(m["vocab"].size()) +
                            (j.contains("added_tokens") && j["added_tokens"].is_array()
                                 ? static_cast<int64_t>(j["added_tokens"].size()) : 0);
    for (auto it = m["vocab"].begin(); it != m["vocab"].end(); ++it) {
      HYMBA_CHECK(it->is_number_integer() && it->get<int64_t>() >= 0 && it->get<int64_t>() < max_ids, path,
                  ": field 'model.vocab' entry '", excerpt(it.key()), "' must be an id in 0..", max_ids - 1,
                  " (the file defines ", max_ids, " tokens; got ", json_excerpt(*it), ")");
      const auto id = static_cast<int32_t>(it->get<int64_t>());
      vocab_[it.key()] = id;
      set_piece(id, it.key());
    }
    HYMBA_CHECK(m.contains("merges") && m["merges"].is_array(), path, ": field 'model.merges' must be a list");
    int32_t rank = 0;
    for (const json& e : m["merges"]) {
      std::string a, b;
      if (e.is_string()) {
        const std::string s = e.get<std::string>();
        const size_t sp = s.find(' ', 1);
        HYMBA_CHECK(sp != std::string::npos && sp + 1 < s.size(), path, ": field 'model.merges' entry ", rank,
                    " (\"", excerpt(s), "\") is not two pieces separated by a space");
        a = s.substr(0, sp);
        b = s.substr(sp + 1);
      } else if (e.is_array() && e.size() == 2 && e[0].is_string() && e[1].is_string()) {
        a = e[0].get<std::string>();
        b = e[1].get<std::string>();
      } else {
        fail(path, ": field 'model.merges' entry ", rank, " must be \"a b\" or [\"a\", \"b\"]");
      }
      ranks_.emplace(a + '\x01' + b, rank++);
    }
    if (j.contains("added_tokens") && !j["added_tokens"].is_null()) {
      HYMBA_CHECK(j["added_tokens"].is_array(), path, ": field 'added_tokens' must be a list");
      for (const json& t : j["added_tokens"]) {
        HYMBA_CHECK(t.is_object() && t.contains("id") && t["id"].is_number_integer() && t["id"].get<int64_t>() >= 0 &&
                        t["id"].get<int64_t>() < max_ids && t.contains("content") && t["content"].is_string() &&
                        !t["content"].get<std::string>().empty(),
                    path, ": field 'added_tokens' entries need an id in 0..", max_ids - 1,
                    " (the file defines ", max_ids, " tokens) and a non-empty content");
        AddedToken a{t["content"].get<std::string>(), static_cast<int32_t>(t["id"].get<int64_t>()),
                     optional_bool(t, "special", false, path, "added_tokens[].")};
        added_.push_back(a);
        vocab_[a.content] = a.id;
        set_piece(a.id, a.content);
        if (static_cast<size_t>(a.id) >= added_kind_.size()) added_kind_.resize(static_cast<size_t>(a.id) + 1, 0);
        added_kind_[static_cast<size_t>(a.id)] = a.special ? 2 : 1;
      }
    }
    // Longest first, so "<|endoftext|>" wins over a shorter token it starts with.
    std::sort(added_.begin(), added_.end(),
              [](const AddedToken& x, const AddedToken& y) { return x.content.size() > y.content.size(); });
    HYMBA_CHECK(!pieces_.empty(), path, ": field 'model.vocab' is empty");

    // Byte <-> printable character (GPT-2's bytes_to_unicode).
    int extra = 0;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      const uint32_t c = printable ? static_cast<uint32_t>(b) : 256u + static_cast<uint32_t>(extra++);
      append_utf8(byte_char_[static_cast<size_t>(b)], c);
      char_byte_[c] = static_cast<unsigned char>(b);
    }
    for (int b = 0; b < 256; ++b)
      HYMBA_CHECK(vocab_.count(byte_char_[static_cast<size_t>(b)]) != 0, path, ": field 'model.vocab' lacks byte ", b,
                  " (\"", byte_char_[static_cast<size_t>(b)], "\"); a byte-level BPE vocabulary has all 256");

    unk_ = -1;
    if (m.contains("unk_token") && m["unk_token"].is_string() && vocab_.count(m["unk_token"].get<std::string>()))
      unk_ = vocab_.at(m["unk_token"].get<std::string>());
    read_special_tokens(path);
  }

  TokenizerKind kind() const override { return TokenizerKind::kBpe; }
  int32_t vocab_size() const override { return static_cast<int32_t>(pieces_.size()); }

  std::vector<int32_t> encode(std::string_view text) const override {
    std::vector<int32_t> out;
    size_t start = 0, i = 0;
    while (i < text.size()) {
      const AddedToken* hit = nullptr;
      for (const AddedToken& a : added_)
        if (text.compare(i, a.content.size(), a.content) == 0) {
          hit = &a;
          break;
        }
      if (hit == nullptr) {
        ++i;
        continue;
      }
      encode_plain(text.substr(start, i - start), out);
      out.push_back(hit->id);
      i += hit->content.size();
      start = i;
    }
    encode_plain(text.substr(start), out);
    return out;
  }

  std::string decode(const std::vector<int32_t>& ids) const override {
    std::string out;
    for (int32_t id : ids) {
      if (id < 0 || id >= vocab_size()) continue;
      const auto k = static_cast<size_t>(id);
      const int added = k < added_kind_.size() ? added_kind_[k] : 0;
      if (added == 2) continue;        // special tokens decode to nothing
      if (added == 1) {                // added tokens are plain text
        out += pieces_[k];
        continue;
      }
      const std::string& piece = pieces_[k];
      for (size_t i = 0; i < piece.size();) {
        const auto [c, len] = next_cp(piece, i);
        auto it = char_byte_.find(c);
        if (it != char_byte_.end()) out.push_back(static_cast<char>(it->second));
        else out.append(piece, i, len);
        i += len;
      }
    }
    return out;
  }

  int32_t bos_id() const override { return bos_; }
  int32_t eos_id() const override { return eos_; }
  int32_t pad_id() const override { return pad_; }
  int32_t unk_id() const override { return unk_; }
  std::string fingerprint() const override {
    uint64_t h = 0xcbf29ce484222325ull;
    for (unsigned char c : contents_) h = (h ^ c) * 0x100000001b3ull;
    char hex[17];
    std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
    return std::string("hf-bpe:") + hex;
  }
  void save(const std::string& path) const override { write_text_atomic(path, contents_); }

 private:
  static void check_byte_level(const json& j, const char* field, const std::string& path, bool required) {
    if (!j.contains(field) || j[field].is_null()) {
      HYMBA_CHECK(!required, path, ": field '", field, "' is missing; only a ByteLevel ", field, " is supported");
      return;
    }
    const json& v = j[field];
    HYMBA_CHECK(v.is_object() && v.contains("type") && v["type"] == "ByteLevel", path, ": field '", field, "' is ",
                json_excerpt(v), "; only ByteLevel (GPT-2 / GPT-NeoX byte-level BPE) is supported");
    HYMBA_CHECK(optional_bool(v, "use_regex", true, path, std::string(field) + "."), path, ": field '", field,
                ".use_regex' is false; only GPT-2's split pattern is supported");
  }

  // HF's normalizer: one of the Unicode forms, or a Sequence of normalizers
  // applied in order (nested sequences flatten). Anything else (Lowercase,
  // Replace, ...) is refused naming the field.
  void add_normalizer(const json& nm, const std::string& field, const std::string& path, int depth = 0) {
    HYMBA_CHECK(nm.is_object() && nm.contains("type") && nm["type"].is_string(), path, ": field '", field,
                "' must be an object with a string \"type\"");
    const std::string type = nm["type"].get<std::string>();
    if (type == "Sequence") {
      // A hostile file could nest sequences deep enough to exhaust the stack.
      HYMBA_CHECK(depth < 8, path, ": field '", field, "' nests Sequence normalizers more than 8 deep");
      HYMBA_CHECK(nm.contains("normalizers") && nm["normalizers"].is_array(), path, ": field '", field,
                  ".normalizers' must be a list");
      for (size_t i = 0; i < nm["normalizers"].size(); ++i)
        add_normalizer(nm["normalizers"][i], field + ".normalizers[" + std::to_string(i) + "]", path, depth + 1);
      return;
    }
    const std::optional<NormalForm> form = normal_form_from_name(type);
    HYMBA_CHECK(form.has_value(), path, ": field '", field, "' has type \"", excerpt(type),
                "\"; only NFC, NFD, NFKC, NFKD or a Sequence of them is supported");
    normalizers_.push_back(*form);
  }

  void set_piece(int32_t id, const std::string& piece) {
    if (static_cast<size_t>(id) >= pieces_.size()) pieces_.resize(static_cast<size_t>(id) + 1);
    pieces_[static_cast<size_t>(id)] = piece;
  }

  int32_t id_of(const json& token) const {
    const json& t = token.is_object() && token.contains("content") ? token["content"] : token;
    if (!t.is_string()) return -1;
    auto it = vocab_.find(t.get<std::string>());
    return it == vocab_.end() ? -1 : it->second;
  }

  // bos/eos/pad/unk: tokenizer_config.json beside the file, else the usual names.
  void read_special_tokens(const std::string& path) {
    const fs::path cfg_path = fs::path(path).parent_path() / "tokenizer_config.json";
    json cfg = json::object();
    if (fs::exists(cfg_path)) cfg = read_json_file(cfg_path.string());
    auto named = [&](const char* key, std::initializer_list<const char*> fallbacks) {
      if (cfg.is_object() && cfg.contains(key) && !cfg[key].is_null()) {
        const int32_t id = id_of(cfg[key]);
        HYMBA_CHECK(id >= 0, cfg_path.string(), ": field '", key, "' names ", json_excerpt(cfg[key]),
                    ", which is not in the vocabulary of ", path);
        return id;
      }
      for (const char* f : fallbacks)
        if (auto it = vocab_.find(f); it != vocab_.end()) return it->second;
      return -1;
    };
    eos_ = named("eos_token", {"<|endoftext|>", "</s>", "<|end_of_text|>"});
    HYMBA_CHECK(eos_ >= 0, path, ": no end-of-text token (set eos_token in tokenizer_config.json)");
    bos_ = named("bos_token", {"<|endoftext|>", "<s>", "<|begin_of_text|>"});
    if (bos_ < 0) bos_ = eos_;
    pad_ = named("pad_token", {"<|padding|>", "<pad>"});
    if (pad_ < 0) pad_ = eos_;
    const int32_t unk = named("unk_token", {});
    if (unk >= 0) unk_ = unk;
  }

  void encode_plain(std::string_view raw, std::vector<int32_t>& out) const {
    if (raw.empty()) return;
    std::string text(raw);
    for (NormalForm form : normalizers_) text = normalize_utf8(text, form);
    if (add_prefix_space_ && !text.empty() && text.front() != ' ') text.insert(text.begin(), ' ');
    gpt2_split(text, [&](std::string_view piece) { encode_piece(piece, out); });
  }

  // BPE of one pre-tokenized piece: merge the lowest-ranked adjacent pair
  // (all its occurrences) until no pair has a rank.
  void encode_piece(std::string_view piece, std::vector<int32_t>& out) const {
    std::vector<std::string> sym;
    sym.reserve(piece.size());
    for (unsigned char b : piece) sym.push_back(byte_char_[b]);
    while (sym.size() > 1) {
      int32_t best = INT32_MAX;
      for (size_t k = 0; k + 1 < sym.size(); ++k) {
        auto it = ranks_.find(sym[k] + '\x01' + sym[k + 1]);
        if (it != ranks_.end()) best = std::min(best, it->second);
      }
      if (best == INT32_MAX) break;
      std::vector<std::string> merged;
      merged.reserve(sym.size());
      for (size_t k = 0; k < sym.size(); ++k) {
        if (k + 1 < sym.size()) {
          auto it = ranks_.find(sym[k] + '\x01' + sym[k + 1]);
          if (it != ranks_.end() && it->second == best) {
            merged.push_back(sym[k] + sym[k + 1]);
            ++k;
            continue;
          }
        }
        merged.push_back(sym[k]);
      }
      sym.swap(merged);
    }
    for (const std::string& s : sym) {
      auto it = vocab_.find(s);
      if (it != vocab_.end()) {
        out.push_back(it->second);
      } else {  // a merge result without a vocabulary entry: fall back to its bytes
        for (size_t i = 0; i < s.size();) {
          const auto [c, len] = next_cp(s, i);
          out.push_back(vocab_.at(std::string(s, i, len)));
          i += len;
        }
      }
    }
  }

  std::string contents_;
  std::unordered_map<std::string, int32_t> vocab_;
  std::unordered_map<std::string, int32_t> ranks_;
  std::vector<std::string> pieces_;  // id -> piece (byte characters) or added content
  std::vector<int> added_kind_;      // id -> 0 model piece, 1 added, 2 added special
  std::vector<AddedToken> added_;
  std::array<std::string, 256> byte_char_;
  std::unordered_map<uint32_t, unsigned char> char_byte_;
  std::vector<NormalForm> normalizers_;  // applied in order to the text between added tokens
  bool add_prefix_space_ = false;
  int32_t bos_ = -1, eos_ = -1, pad_ = -1, unk_ = -1;
};

}  // namespace

std::unique_ptr<Tokenizer> load_hf_tokenizer_json(const std::string& path, const std::string& contents) {
  try {
    return std::make_unique<HfBpeTokenizer>(path, contents);
  } catch (const json::exception& e) {  // a field read without a type check: still name the file
    fail(path, ": unexpected value (", excerpt(json_error_message(e), 160), ")");
  }
}

std::string checkpoint_tokenizer_path(const std::string& dir) {
  for (const char* name : {kTokenizerFile, "tokenizer.json"}) {
    const fs::path p = fs::path(dir) / name;
    if (fs::exists(p)) return p.string();
  }
  return "";
}

CheckpointTokenizer load_checkpoint_tokenizer(const std::string& dir) {
  CheckpointTokenizer t;
  t.path = checkpoint_tokenizer_path(dir);
  HYMBA_CHECK(!t.path.empty(), dir, ": no tokenizer next to the checkpoint (tokenizer.model or tokenizer.json)");
  t.tokenizer = load_tokenizer(t.path);
  const fs::path cfg = fs::path(dir) / "tokenizer_config.json";
  if (fs::exists(cfg)) {
    const json j = read_json_file(cfg.string());
    HYMBA_CHECK(j.is_object(), cfg.string(), ": expected a JSON object");
    if (j.contains("add_bos_token") && !j["add_bos_token"].is_null()) {
      HYMBA_CHECK(j["add_bos_token"].is_boolean(), cfg.string(), ": field 'add_bos_token' must be true or false");
      t.add_bos = j["add_bos_token"].get<bool>();
    }
  }
  return t;
}

}  // namespace hymba
