#include "formats/gguf_tokenizer.h"

#include <sentencepiece_processor.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <optional>
#include <tuple>

#include <nlohmann/json.hpp>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/excerpt.h"
#include "core/json_io.h"
#include "tokenizer/hf_tokenizer.h"
#include "tokenizer/sentencepiece_model.h"
#include "tokenizer/sentencepiece_tokenizer.h"
#include "tokenizer/hf/unicode_text.h"
#include "formats/gguf_pre_tokenizers.h"

namespace hymba::gguf {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// llama.cpp's token types (llama_token_type).
enum TokenType { kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6 };

constexpr const char* kFileKey = "hymba.tokenizer.file";
constexpr const char* kFileNameKey = "hymba.tokenizer.file_name";
constexpr const char* kConfigKey = "hymba.tokenizer.config";
constexpr const char* kFingerprintKey = "hymba.tokenizer.fingerprint";

bool flag(const json& cfg, const char* key) {
  return cfg.is_object() && cfg.contains(key) && cfg[key].is_boolean() && cfg[key].get<bool>();
}

struct GgmlVocab {
  std::vector<std::string> tokens;
  std::vector<double> types, scores;
  std::vector<std::string> merges;
  std::string model, pre = "default";
  bool add_space_prefix = true;           // llama, t5
  bool remove_extra_whitespaces = false;  // t5
  std::string charsmap;                   // t5: the normalizer's precompiled charsmap
};

// llama.cpp's t5 (UGM) vocabulary, as read from or written to a file.
struct T5Form {
  std::vector<std::string> tokens;
  std::vector<double> scores, types;
  std::string charsmap;
  bool add_space_prefix = false, remove_extra_whitespaces = false;
  int64_t unk = 2, eos = 1, bos = -1, pad = 0;
};
std::string t5_sentencepiece_model(const T5Form& t, const std::string& src);

// The byte tokenizer: 256 byte tokens (no merges) then pad, bos, eos.
GgmlVocab byte_vocab() {
  GgmlVocab v;
  v.model = "gpt2";
  for (int b = 0; b < 256; ++b) {
    v.tokens.push_back(byte_level_char(static_cast<uint8_t>(b)));
    v.types.push_back(kNormal);
  }
  for (const char* s : {"<pad>", "<s>", "</s>"}) {
    v.tokens.push_back(s);
    v.types.push_back(kControl);
  }
  return v;
}

// True when a tokenizer.json pre-tokenizer is GPT-2's ByteLevel (with its regex).
bool is_gpt2_pre(const json& pre) {
  return pre.is_object() && pre.value("type", "") == "ByteLevel" && pre.value("use_regex", true);
}
// The regexes of a pre-tokenizer made of isolated regex splits and a
// ByteLevel without its own regex (Llama-3's and Qwen's tokenizer.json, and
// the engine's reading of llama.cpp's gpt2 form); empty for any other shape.
std::vector<std::string> isolated_split_regexes(const json& pre) {
  if (!pre.is_object() || pre.value("type", "") != "Sequence" || !pre.contains("pretokenizers")) return {};
  const json& p = pre["pretokenizers"];
  if (!p.is_array() || p.size() < 2) return {};
  const json& last = p.back();
  if (!last.is_object() || last.value("type", "") != "ByteLevel" || last.value("use_regex", true) ||
      last.value("add_prefix_space", true))
    return {};
  std::vector<std::string> out;
  for (size_t i = 0; i + 1 < p.size(); ++i) {
    const json& s = p[i];
    if (!s.is_object() || s.value("type", "") != "Split" || s.value("behavior", "") != "Isolated" ||
        s.value("invert", false) || !s.contains("pattern") || !s["pattern"].is_object() ||
        !s["pattern"].contains("Regex") || !s["pattern"]["Regex"].is_string())
      return {};
    out.push_back(s["pattern"]["Regex"].get<std::string>());
  }
  return out;
}

// The tokenizer.ggml.pre of a tokenizer.json pre-tokenizer: GPT-2's
// ByteLevel, a published regex llama.cpp's converter recognizes, or the
// regexes of a value llama.cpp maps (the first value with them). "" when none.
std::string ggml_pre_of(const json& pre) {
  if (is_gpt2_pre(pre)) return "gpt-2";
  const std::vector<std::string> regexes = isolated_split_regexes(pre);
  if (regexes.empty()) return "";
  if (regexes.size() == 1)
    if (const std::optional<std::string> name = pre_of_published_regex(regexes[0])) return *name;
  for (const std::string& name : bpe_pre_tokenizer_names()) {
    const std::optional<BpePreTokenizer> p = bpe_pre_tokenizer(name);
    if (p->byte_encode && p->regexes == regexes) return name;
  }
  return "";
}

// A byte-level BPE tokenizer.json as llama.cpp's "gpt2" form; false when it
// is another kind. `note` says, in one line, what llama.cpp does not apply.
bool bpe_json_vocab(const std::string& text, const std::string& path, GgmlVocab& v, std::string& note) {
  const json j = parse_json(text, path);
  if (!j.contains("model") || !j["model"].is_object() || j["model"].value("type", "") != "BPE") return false;
  const json& m = j["model"];
  if (m.contains("byte_fallback") && m["byte_fallback"].is_boolean() && m["byte_fallback"].get<bool>()) return false;
  const json pre = j.contains("pre_tokenizer") ? j["pre_tokenizer"] : json();
  v.pre = ggml_pre_of(pre);
  if (v.pre.empty()) return false;
  if (j.contains("normalizer") && j["normalizer"].is_object())
    note = "llama.cpp applies no " + j["normalizer"].value("type", std::string("?")) +
           " normalizer (its gpt2 form has none): text the normalizer would change may tokenize differently there";
  v.model = "gpt2";
  std::map<int64_t, std::pair<std::string, int>> by_id;
  for (const auto& [token, id] : m["vocab"].items()) by_id[id.get<int64_t>()] = {token, kNormal};
  if (j.contains("added_tokens") && j["added_tokens"].is_array())
    for (const json& a : j["added_tokens"])
      by_id[a["id"].get<int64_t>()] = {a["content"].get<std::string>(), a.value("special", false) ? kControl : kUserDefined};
  const int64_t n = by_id.empty() ? 0 : by_id.rbegin()->first + 1;
  HYMBA_CHECK(n <= (int64_t{1} << 24), path, ": token ids up to ", n, " are too many for GGUF export");
  for (int64_t id = 0; id < n; ++id) {
    auto it = by_id.find(id);
    // GGUF token lists are dense: a gap becomes an unused placeholder llama.cpp never emits.
    v.tokens.push_back(it != by_id.end() ? it->second.first : "<unused" + std::to_string(id) + ">");
    v.types.push_back(it != by_id.end() ? it->second.second : kUnused);
  }
  for (const json& mg : m["merges"])
    v.merges.push_back(mg.is_string() ? mg.get<std::string>()
                                      : mg[0].get<std::string>() + " " + mg[1].get<std::string>());
  return true;
}

// A sentencepiece model as llama.cpp reads it: "t5" (UGM: pieces, scores,
// types, the normalizer's precompiled charsmap and whitespace flags) for a
// Unigram model, "llama" (SPM) for the others. `note` says, in one line, where
// llama.cpp will tokenize differently than sentencepiece ("" when nowhere known).
GgmlVocab spm_vocab(const std::string& model, const std::string& path, std::string& note) {
  sentencepiece::SentencePieceProcessor sp;
  HYMBA_CHECK(sp.LoadFromSerializedProto(model).ok(), path, ": not a sentencepiece model");
  const spm::ModelSettings s = spm::read_model_settings(model);
  GgmlVocab v;
  v.model = s.model_type == 1 ? "t5" : "llama";
  const std::vector<spm::UnigramModel::Piece> pieces = spm::read_pieces(model);
  HYMBA_CHECK(pieces.size() == static_cast<size_t>(sp.GetPieceSize()), path, ": sentencepiece model's pieces unreadable");
  for (int id = 0; id < sp.GetPieceSize(); ++id) {
    v.tokens.push_back(sp.IdToPiece(id));
    v.scores.push_back(sp.GetScore(id));
    v.types.push_back(sp.IsUnknown(id) ? kUnknown : sp.IsControl(id) ? kControl : sp.IsUnused(id) ? kUnused
                      : sp.IsByte(id)  ? kByte : pieces[static_cast<size_t>(id)].type == spm::kUserDefined ? kUserDefined
                                                                                            : kNormal);
  }
  v.add_space_prefix = s.add_dummy_prefix;
  if (v.model != "t5") return v;
  v.charsmap = s.precompiled_charsmap;
  v.remove_extra_whitespaces = s.remove_extra_whitespaces;
  // What llama.cpp's UGM tokenizer does not read or do (src/llama-vocab.cpp).
  std::vector<std::string> differs;
  if (s.byte_fallback) differs.push_back("it has no byte fallback (a character outside the vocabulary is <unk> there)");
  if (!s.escape_whitespaces) differs.push_back("it always writes spaces as U+2581 (the model has escape_whitespaces off)");
  if (s.treat_whitespace_as_suffix) differs.push_back("it reads no treat_whitespace_as_suffix");
  if (!s.add_dummy_prefix && s.remove_extra_whitespaces)
    differs.push_back("with remove_extra_whitespaces it puts a space before the first word even without add_dummy_prefix");
  for (size_t i = 0; i < differs.size(); ++i) note += (i ? "; " : "llama.cpp's t5 tokenizer differs from sentencepiece: ") + differs[i];
  return v;
}

// Texts whose ids decide whether llama.cpp's t5 form reproduces a
// tokenizer.json Unigram pipeline: spaces leading, doubled and trailing,
// tabs and newlines, accents composed and not, full-width and CJK letters.
const char* const kUgmProbeTexts[] = {
    "Hello world, the theory of everything!", "  two  spaces\tand tab\n", " leading and trailing ",
    "naïve café 12345", "e\xCC\x81 decomposed", "日本語のテキスト 🎉", "Ｆｕｌｌｗｉｄｔｈ ＡＢＣ", "UPPER lower",
    "line one\nline two\r\nline three", "a"};

// A Unigram tokenizer.json as llama.cpp's "t5" form, when llama.cpp's UGM
// tokenizer can run its pipeline: no normalizer (a t5 vocabulary's only
// normalizer is a precompiled charsmap) and a Metaspace pre-tokenizer, and
// then only if the form read back gives the file's own ids on the probe
// texts. Otherwise false, with `why` saying in one line what differs.
bool unigram_json_vocab(const std::string& text, const std::string& path, const Tokenizer& original, GgmlVocab& v,
                        std::string& why) {
  const json j = parse_json(text, path);
  if (!j.contains("model") || !j["model"].is_object() || j["model"].value("type", "") != "Unigram") return false;
  const json& m = j["model"];
  const auto type_of = [](const json& x) { return x.is_object() ? x.value("type", std::string("?")) : std::string("?"); };
  if (j.contains("normalizer") && !j["normalizer"].is_null()) {
    why = "its Unigram tokenizer.json has a " + type_of(j["normalizer"]) +
          " normalizer, which llama.cpp's t5 tokenizer cannot express (it takes a sentencepiece precompiled charsmap)";
    return false;
  }
  const json pre = j.contains("pre_tokenizer") ? j["pre_tokenizer"] : json();
  if (type_of(pre) != "Metaspace" || pre.value("replacement", "\xE2\x96\x81") != "\xE2\x96\x81") {
    why = "its Unigram tokenizer.json pre-tokenizer is " + (pre.is_null() ? std::string("none") : type_of(pre)) +
          ", not the Metaspace (U+2581) llama.cpp's t5 tokenizer applies";
    return false;
  }
  const std::string scheme = pre.value("prepend_scheme", pre.value("add_prefix_space", true) ? "always" : "never");
  v.model = "t5";
  v.add_space_prefix = scheme != "never";
  v.remove_extra_whitespaces = false;
  const bool byte_fallback = m.value("byte_fallback", false);
  const int64_t unk = m.contains("unk_id") && m["unk_id"].is_number_integer() ? m["unk_id"].get<int64_t>() : -1;
  for (const json& entry : m["vocab"]) {
    const std::string piece = entry.at(0).get<std::string>();
    const int64_t id = static_cast<int64_t>(v.tokens.size());
    const bool byte = byte_fallback && piece.size() == 6 && piece.rfind("<0x", 0) == 0 && piece.back() == '>';
    v.tokens.push_back(piece);
    v.scores.push_back(entry.at(1).get<double>());
    v.types.push_back(id == unk ? kUnknown : byte ? kByte : kNormal);
  }
  if (j.contains("added_tokens") && j["added_tokens"].is_array())
    for (const json& a : j["added_tokens"]) {
      const int64_t id = a.value("id", int64_t{-1});
      if (id >= 0 && id < static_cast<int64_t>(v.types.size()) && id != unk)
        v.types[static_cast<size_t>(id)] = a.value("special", false) ? kControl : kUserDefined;
    }
  T5Form t{v.tokens, v.scores, v.types, "", v.add_space_prefix, false, unk, original.eos_id(), original.bos_id(),
           original.pad_id()};
  if (unk < 0) {
    why = "its Unigram tokenizer.json has no unk_id, which llama.cpp's t5 tokenizer needs";
    return false;
  }
  const auto ugm = load_sentencepiece_tokenizer(t5_sentencepiece_model(t, path), path + " (as t5)");
  for (const char* probe : kUgmProbeTexts) {
    const std::vector<int32_t> ours = original.encode(probe), theirs = ugm->encode(probe);
    if (ours == theirs) continue;
    why = "its Unigram tokenizer.json (Metaspace prepend " + scheme + (byte_fallback ? ", byte fallback" : "") +
          ") would tokenize \"" + excerpt(probe, 40) + "\" into " + std::to_string(theirs.size()) +
          " ids in llama.cpp's t5 form against its own " + std::to_string(ours.size());
    return false;
  }
  return true;
}

void copy_metadata_of_gguf(const std::string& source, Writer& w) {
  const File f = File::open(source);
  for (const std::string& key : f.keys())
    if (key.rfind("tokenizer.", 0) == 0 || key.rfind("hymba.tokenizer.", 0) == 0) w.set(key, f.get(key));
}

}  // namespace

std::string byte_level_char(uint8_t b) {
  // Printable bytes stand for themselves; the others take 256, 257, ... in order.
  auto printable = [](int x) { return (x >= 33 && x <= 126) || (x >= 161 && x <= 172) || (x >= 174 && x <= 255); };
  uint32_t cp = b;
  if (!printable(b)) {
    cp = 256;
    for (int x = 0; x < b; ++x) cp += printable(x) ? 0 : 1;
  }
  std::string s;
  tok::append_utf8(s, cp);
  return s;
}

std::string add_tokenizer_metadata(const std::string& source, Writer& w) {
  if (source.empty()) return "";
  std::error_code ec;
  if (fs::is_regular_file(source, ec)) {
    copy_metadata_of_gguf(source, w);
    return "";
  }
  const std::string path = checkpoint_tokenizer_path(source);
  if (path.empty()) return "the checkpoint has no tokenizer, so the file carries none";
  const CheckpointTokenizer ct = load_checkpoint_tokenizer(source);
  const Tokenizer& tok = *ct.tokenizer;
  const std::string bytes = read_file(path);
  const fs::path cfg_path = fs::path(path).parent_path() / "tokenizer_config.json";
  const std::string config = fs::exists(cfg_path, ec) ? read_file(cfg_path.string()) : std::string();
  // The engine's own file, byte for byte.
  w.set(kFileNameKey, Value::str(fs::path(path).filename().string()));
  std::vector<double> file_bytes(bytes.size());
  for (size_t i = 0; i < bytes.size(); ++i) file_bytes[i] = static_cast<uint8_t>(bytes[i]);  // chars may be signed
  w.set(kFileKey, Value::array(ValueType::kU8, std::move(file_bytes)));
  if (!config.empty()) w.set(kConfigKey, Value::str(config));
  // A tokenizer imported from a file's tokenizer.ggml.* keys goes back out with those keys.
  const fs::path kept = fs::path(source) / kGgmlVocabFile;
  if (fs::exists(kept, ec)) {
    const File v = File::open(kept.string());
    if (v.has(kFingerprintKey) && v.get_string(kFingerprintKey) == tok.fingerprint()) {
      for (const std::string& key : v.keys())
        if (key.rfind("tokenizer.", 0) == 0) w.set(key, v.get(key));
      return "";
    }
  }
  GgmlVocab vocab;
  std::string note;
  bool known = true;
  if (tok.kind() == TokenizerKind::kByte) vocab = byte_vocab();
  else if (fs::path(path).filename() == "tokenizer.json") {
    std::string why;
    known = bpe_json_vocab(bytes, path, vocab, note) || unigram_json_vocab(bytes, path, tok, vocab, why);
    if (!why.empty()) return why + ", so llama.cpp gets no tokenizer.ggml.* vocabulary";
  } else {
    vocab = spm_vocab(bytes, path, note);
  }
  if (!known) return "its tokenizer.json is neither a byte-level BPE (gpt-2 or llama-3 pre-tokenizer) nor a Unigram "
                     "llama.cpp's t5 form can express, so llama.cpp gets no tokenizer.ggml.* vocabulary";
  w.set("tokenizer.ggml.model", Value::str(vocab.model));
  w.set("tokenizer.ggml.pre", Value::str(vocab.pre));
  w.set("tokenizer.ggml.tokens", Value::string_array(vocab.tokens));
  w.set("tokenizer.ggml.token_type", Value::array(ValueType::kI32, vocab.types));
  if (vocab.model == "gpt2") w.set("tokenizer.ggml.merges", Value::string_array(vocab.merges));
  if (vocab.model == "llama" || vocab.model == "t5") {
    w.set("tokenizer.ggml.scores", Value::array(ValueType::kF32, vocab.scores));
    w.set("tokenizer.ggml.add_space_prefix", Value::boolean(vocab.add_space_prefix));
  }
  if (vocab.model == "t5") {
    w.set("tokenizer.ggml.remove_extra_whitespaces", Value::boolean(vocab.remove_extra_whitespaces));
    // No charsmap is no normalization; llama.cpp refuses an empty one.
    std::vector<double> charsmap(vocab.charsmap.size());
    for (size_t i = 0; i < charsmap.size(); ++i) charsmap[i] = static_cast<uint8_t>(vocab.charsmap[i]);
    if (!charsmap.empty())
      w.set("tokenizer.ggml.precompiled_charsmap", Value::array(ValueType::kU8, std::move(charsmap)));
  }
  const auto id = [&](const char* key, int32_t v) {
    if (v >= 0 && v < static_cast<int32_t>(vocab.tokens.size())) w.set(key, Value::u32(static_cast<uint32_t>(v)));
  };
  id("tokenizer.ggml.bos_token_id", tok.bos_id());
  id("tokenizer.ggml.eos_token_id", tok.eos_id());
  id("tokenizer.ggml.unknown_token_id", tok.unk_id());
  id("tokenizer.ggml.padding_token_id", tok.pad_id());
  const json cfg = config.empty() ? json::object() : parse_json(config, cfg_path.string());
  w.set("tokenizer.ggml.add_bos_token", Value::boolean(ct.add_bos));
  w.set("tokenizer.ggml.add_eos_token", Value::boolean(flag(cfg, "add_eos_token")));
  return note;
}

namespace {

// llama.cpp's spelling of "no vocabulary" (the engine writes no_vocab for a model without a tokenizer).
bool no_vocab(const File& f) {
  const Value* m = f.find("tokenizer.ggml.model");
  return m == nullptr || (m->type == ValueType::kString && (m->s == "no_vocab" || m->s == "none"));
}

}  // namespace

bool has_tokenizer(const File& f) { return f.has(kFileKey) || !no_vocab(f); }

void save_ggml_vocab(const File& f, const Tokenizer& tok, const std::string& dir) {
  if (f.has(kFileKey) || no_vocab(f)) return;
  Writer w;
  for (const std::string& key : f.keys())
    if (key.rfind("tokenizer.", 0) == 0) w.set(key, f.get(key));
  w.set(kFingerprintKey, Value::str(tok.fingerprint()));
  w.write((fs::path(dir) / kGgmlVocabFile).string());
}

namespace {

// llama.cpp's BPE forms ("gpt2", and "gemma4": BPE on UTF-8 with spaces as
// U+2581) as a tokenizer.json the engine's pipeline runs: the pre-tokenizer
// llama.cpp gives tokenizer.ggml.pre (gguf_pre_tokenizers.h) as isolated
// regex splits, then GPT-2's byte-level characters or, for the UTF-8 forms,
// <0xXX> byte tokens for characters outside the vocabulary.
std::string gpt2_tokenizer_json(const File& f, const std::vector<std::string>& tokens,
                                const std::vector<double>& types, const BpePreTokenizer& p) {
  const std::string& src = f.source();
  json j;
  j["version"] = "1.0";
  j["truncation"] = nullptr;
  j["padding"] = nullptr;
  const std::string space = "\xE2\x96\x81";  // U+2581
  j["normalizer"] = nullptr;
  if (p.escape_whitespaces)
    j["normalizer"] = {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", space}};
  json parts = json::array();
  for (const std::string& r : p.regexes)
    parts.push_back({{"type", "Split"}, {"pattern", {{"Regex", r}}}, {"behavior", "Isolated"}, {"invert", false}});
  const json byte_level = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true},
                           {"use_regex", false}};
  if (p.byte_encode) parts.push_back(byte_level);
  j["pre_tokenizer"] = {{"type", "Sequence"}, {"pretokenizers", parts}};
  j["post_processor"] = nullptr;
  j["decoder"] = byte_level;
  if (!p.byte_encode)
    j["decoder"] = {{"type", "Sequence"},
                    {"decoders", json::array({{{"type", "Replace"}, {"pattern", {{"String", space}}}, {"content", " "}},
                                              {{"type", "ByteFallback"}}, {{"type", "Fuse"}}})}};

  json vocab = json::object(), added = json::array();
  for (size_t id = 0; id < tokens.size(); ++id) {
    HYMBA_CHECK(!vocab.contains(tokens[id]), src, ": key 'tokenizer.ggml.tokens' lists \"", excerpt(tokens[id], 40),
                "\" twice (ids ", vocab.contains(tokens[id]) ? vocab[tokens[id]].get<int64_t>() : 0, " and ", id, ")");
    vocab[tokens[id]] = id;
    const int type = id < types.size() ? static_cast<int>(types[id]) : kNormal;
    if (type == kControl || type == kUserDefined)
      added.push_back({{"id", id}, {"content", tokens[id]}, {"single_word", false}, {"lstrip", false},
                       {"rstrip", false}, {"normalized", false}, {"special", type == kControl}});
  }
  j["added_tokens"] = added;
  json merges = json::array();
  if (f.has("tokenizer.ggml.merges"))
    for (const std::string& m : f.get_strings("tokenizer.ggml.merges")) {
      const size_t sp = m.find(' ', 1);
      HYMBA_CHECK(sp != std::string::npos, src, ": key 'tokenizer.ggml.merges' has \"", excerpt(m, 40),
                  "\", not two tokens separated by a space");
      HYMBA_CHECK(tok::is_valid_utf8(m), src, ": key 'tokenizer.ggml.merges' has an entry that is not UTF-8 text");
      merges.push_back(m);
    }
  j["model"] = {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", nullptr}, {"continuing_subword_prefix", ""},
                {"end_of_word_suffix", ""}, {"fuse_unk", false}, {"byte_fallback", !p.byte_encode},
                {"ignore_merges", p.ignore_merges}, {"vocab", vocab}, {"merges", merges}};
  return j.dump();
}

// llama.cpp's "bert" (WPM) form as a WordPiece tokenizer.json: the form
// writes a word's first piece with a leading U+2581 and the pieces that
// continue a word bare, WordPiece's "x" and "##x". llama.cpp splits words
// as BERT does (whitespace; punctuation, ASCII symbols and CJK characters
// alone; control characters dropped; lowercase and accents stripped after
// NFD when tokenizer.ggml.normalizer.lowercase, default true) and covers each
// word greedily with the longest pieces, a word it cannot cover being the
// unknown token: no length limit on words.
std::string wpm_tokenizer_json(const File& f, const std::vector<std::string>& tokens,
                               const std::vector<double>& types) {
  const std::string& src = f.source();
  const std::string space = "\xE2\x96\x81";
  json vocab = json::object(), added = json::array();
  std::vector<std::string> text(tokens.size());
  for (size_t id = 0; id < tokens.size(); ++id) {
    const std::string& t = tokens[id];
    const int type = static_cast<int>(types[id]);
    text[id] = type != kNormal ? t : t.rfind(space, 0) == 0 ? t.substr(space.size()) : "##" + t;
    if (text[id].empty() || vocab.contains(text[id])) continue;  // llama.cpp could never match it either
    vocab[text[id]] = id;
    if (type == kControl || type == kUserDefined || type == kUnknown)
      added.push_back({{"id", id}, {"content", t}, {"single_word", false}, {"lstrip", false},
                       {"rstrip", false}, {"normalized", false}, {"special", type != kUserDefined}});
  }
  const auto id_of = [&](const char* key, uint64_t def) {
    const uint64_t id = f.has(key) ? f.get_uint(key) : def;
    HYMBA_CHECK(id < tokens.size(), src, ": key '", key, "' is ", id, ", past the ", tokens.size(), " tokens");
    return static_cast<int64_t>(id);
  };
  const int64_t unk = id_of("tokenizer.ggml.unknown_token_id", 100);
  const bool lower = f.get_bool_or("tokenizer.ggml.normalizer.lowercase", true);
  json j;
  j["version"] = "1.0";
  j["truncation"] = nullptr;
  j["padding"] = nullptr;
  j["added_tokens"] = added;
  j["normalizer"] = {{"type", "BertNormalizer"}, {"clean_text", true}, {"handle_chinese_chars", true},
                     {"strip_accents", lower}, {"lowercase", lower}};
  j["pre_tokenizer"] = {{"type", "BertPreTokenizer"}};
  j["post_processor"] = nullptr;
  if (f.has("tokenizer.ggml.cls_token_id") && f.has("tokenizer.ggml.seperator_token_id")) {
    const int64_t cls = id_of("tokenizer.ggml.cls_token_id", 101), sep = id_of("tokenizer.ggml.seperator_token_id", 102);
    j["post_processor"] = {{"type", "BertProcessing"},
                           {"sep", json::array({text[static_cast<size_t>(sep)], sep})},
                           {"cls", json::array({text[static_cast<size_t>(cls)], cls})}};
  }
  j["decoder"] = {{"type", "WordPiece"}, {"prefix", "##"}, {"cleanup", true}};
  j["model"] = {{"type", "WordPiece"}, {"unk_token", text[static_cast<size_t>(unk)]},
                {"continuing_subword_prefix", "##"}, {"max_input_chars_per_word", int64_t{1} << 40}, {"vocab", vocab}};
  return j.dump();
}

// Byte lengths of the UTF-8 characters of s (a stray byte counts as one).
std::vector<size_t> char_starts(const std::string& s) {
  std::vector<size_t> starts;
  for (size_t i = 0; i < s.size(); ++i)
    if ((static_cast<uint8_t>(s[i]) & 0xC0) != 0x80) starts.push_back(i);
  return starts;
}

// llama.cpp's "llama" (SPM) form as a tokenizer.json, as HF's LlamaConverter
// writes one: BPE with byte fallback whose merges are every split of a
// normal piece into two pieces, ranked by the piece's score (highest first;
// HF's SentencePieceExtractor order), Metaspace-style normalizer and decoder.
std::string spm_tokenizer_json(const File& f, const std::vector<std::string>& tokens,
                               const std::vector<double>& types) {
  const std::string& src = f.source();
  const std::vector<double>& scores = f.get_numbers("tokenizer.ggml.scores");
  HYMBA_CHECK(scores.size() == tokens.size(), src, ": key 'tokenizer.ggml.scores' has ", scores.size(),
              " entries for ", tokens.size(), " tokens");
  const bool space_prefix = f.get_bool_or("tokenizer.ggml.add_space_prefix", true);
  json vocab = json::object(), added = json::array();
  std::map<std::string, int64_t> ids;
  for (size_t id = 0; id < tokens.size(); ++id) {
    HYMBA_CHECK(ids.emplace(tokens[id], static_cast<int64_t>(id)).second, src, ": key 'tokenizer.ggml.tokens' lists \"",
                excerpt(tokens[id], 40), "\" twice");
    vocab[tokens[id]] = id;
    const int type = static_cast<int>(types[id]);
    if (type == kControl || type == kUserDefined || type == kUnknown)
      added.push_back({{"id", id}, {"content", tokens[id]}, {"single_word", false}, {"lstrip", false},
                       {"rstrip", false}, {"normalized", false}, {"special", type != kUserDefined}});
  }
  struct Merge {
    double score;
    size_t order;
    int64_t left, right;
    std::string text;
  };
  std::vector<Merge> merges;
  for (size_t id = 0; id < tokens.size(); ++id) {
    if (static_cast<int>(types[id]) != kNormal) continue;
    const std::string& piece = tokens[id];
    std::vector<Merge> local;
    for (size_t cut : char_starts(piece)) {
      if (cut == 0) continue;
      auto l = ids.find(piece.substr(0, cut)), r = ids.find(piece.substr(cut));
      if (l != ids.end() && r != ids.end())
        local.push_back({scores[id], 0, l->second, r->second, l->first + " " + r->first});
    }
    std::sort(local.begin(), local.end(),
              [](const Merge& a, const Merge& b) { return std::tie(a.left, a.right) < std::tie(b.left, b.right); });
    for (Merge& m : local) {
      m.order = merges.size();
      merges.push_back(std::move(m));
    }
  }
  std::stable_sort(merges.begin(), merges.end(), [](const Merge& a, const Merge& b) { return a.score > b.score; });
  json merge_list = json::array();
  for (const Merge& m : merges) merge_list.push_back(m.text);
  const std::string space = "\xE2\x96\x81";  // U+2581, sentencepiece's space
  json normalizers = json::array();
  if (space_prefix) normalizers.push_back({{"type", "Prepend"}, {"prepend", space}});
  normalizers.push_back({{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", space}});
  json decoders = json::array({{{"type", "Replace"}, {"pattern", {{"String", space}}}, {"content", " "}},
                               {{"type", "ByteFallback"}}, {{"type", "Fuse"}}});
  if (space_prefix) decoders.push_back({{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}});
  json j;
  j["version"] = "1.0";
  j["truncation"] = nullptr;
  j["padding"] = nullptr;
  j["added_tokens"] = added;
  j["normalizer"] = {{"type", "Sequence"}, {"normalizers", normalizers}};
  j["pre_tokenizer"] = nullptr;
  j["post_processor"] = nullptr;
  j["decoder"] = {{"type", "Sequence"}, {"decoders", decoders}};
  json unk = nullptr;
  if (f.has("tokenizer.ggml.unknown_token_id")) {
    const uint64_t u = f.get_uint("tokenizer.ggml.unknown_token_id");
    HYMBA_CHECK(u < tokens.size(), src, ": key 'tokenizer.ggml.unknown_token_id' is past the tokens");
    unk = tokens[static_cast<size_t>(u)];
  }
  j["model"] = {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", unk}, {"continuing_subword_prefix", nullptr},
                {"end_of_word_suffix", nullptr}, {"fuse_unk", true}, {"byte_fallback", true},
                {"vocab", vocab}, {"merges", merge_list}};
  return j.dump();
}

// llama.cpp's "t5" (UGM) form as a sentencepiece Unigram model: the same
// pieces, scores and types, the precompiled charsmap as the normalizer.
// Byte pieces are kept without byte fallback, as llama.cpp's UGM tokenizer
// has none. `src` names the file in errors.
std::string t5_sentencepiece_model(const T5Form& t, const std::string& src) {
  spm::UnigramModel m;
  spm::ModelSettings& s = m.settings;
  s.normalizer_name = "gguf_precompiled";
  spm::check_precompiled_charsmap(t.charsmap, src + ": key 'tokenizer.ggml.precompiled_charsmap'");
  s.precompiled_charsmap = t.charsmap;
  s.add_dummy_prefix = t.add_space_prefix;
  s.remove_extra_whitespaces = t.remove_extra_whitespaces;
  s.byte_fallback = false;
  const int64_t n = static_cast<int64_t>(t.tokens.size());
  HYMBA_CHECK(t.unk >= 0 && t.unk < n, src, ": key 'tokenizer.ggml.unknown_token_id' is missing and the default unknown id 2 is past the ",
              n, " tokens");
  HYMBA_CHECK(t.eos >= 0 && t.eos < n, src, ": key 'tokenizer.ggml.eos_token_id' is missing and the default id 1 is past the ",
              n, " tokens");
  std::map<std::string_view, size_t> seen;
  for (size_t id = 0; id < t.tokens.size(); ++id) {
    const std::string& token = t.tokens[id];
    HYMBA_CHECK(!token.empty(), src, ": key 'tokenizer.ggml.tokens' has an empty token (id ", id, ")");
    const auto [it, fresh] = seen.emplace(token, id);
    HYMBA_CHECK(fresh, src, ": key 'tokenizer.ggml.tokens' lists \"", excerpt(token, 40), "\" twice (ids ",
                it->second, " and ", id, ")");
    HYMBA_CHECK(std::isfinite(t.scores[id]), src, ": key 'tokenizer.ggml.scores' has a non-finite score (id ", id, ")");
    const double d = t.types[id];
    int type = d >= 1 && d <= 6 ? static_cast<int>(d) : spm::kControl;  // sentencepiece's types 1-6
    // sentencepiece wants exactly one unknown piece: the unknown id's.
    if (static_cast<int64_t>(id) == t.unk) type = spm::kUnknown;
    else if (type == spm::kUnknown) type = spm::kControl;
    // A byte piece must be <0xXX> and sentencepiece allows them only with
    // byte fallback; llama.cpp never matches them in text, like a control piece.
    if (type == spm::kByte) type = spm::kControl;
    m.pieces.push_back({token, static_cast<float>(t.scores[id]), type});
  }
  m.unk_piece = t.tokens[static_cast<size_t>(t.unk)];
  m.eos_piece = t.tokens[static_cast<size_t>(t.eos)];
  // The engine needs a bos; a t5 vocabulary may have none (then eos stands in).
  m.bos_piece = t.tokens[static_cast<size_t>(t.bos >= 0 && t.bos < n ? t.bos : t.eos)];
  if (t.pad >= 0 && t.pad < n) m.pad_piece = t.tokens[static_cast<size_t>(t.pad)];
  return spm::write_unigram_model(m);
}

// The t5 form's keys, with llama.cpp's defaults for absent ones (no space
// prefix, spaces kept; unk 2, eos 1, pad 0, no bos).
T5Form t5_form_of(const File& f, const std::vector<std::string>& tokens, const std::vector<double>& types) {
  const std::string& src = f.source();
  T5Form t;
  t.tokens = tokens;
  t.types = types;
  HYMBA_CHECK(f.has("tokenizer.ggml.scores"), src,
              ": key 'tokenizer.ggml.scores' is missing (the t5 form needs a score per token)");
  t.scores = f.get_numbers("tokenizer.ggml.scores");
  HYMBA_CHECK(t.scores.size() == tokens.size(), src, ": key 'tokenizer.ggml.scores' has ", t.scores.size(),
              " entries for ", tokens.size(), " tokens");
  if (f.has("tokenizer.ggml.precompiled_charsmap")) {
    const Value& v = f.get("tokenizer.ggml.precompiled_charsmap");
    HYMBA_CHECK(v.type == ValueType::kArray && (v.element_type == ValueType::kU8 || v.element_type == ValueType::kI8),
                src, ": key 'tokenizer.ggml.precompiled_charsmap' must be an array of u8 or i8");
    t.charsmap.resize(v.numbers.size());
    for (size_t i = 0; i < v.numbers.size(); ++i)
      t.charsmap[i] = static_cast<char>(static_cast<uint8_t>(static_cast<int>(v.numbers[i])));
  }
  t.add_space_prefix = f.get_bool_or("tokenizer.ggml.add_space_prefix", false);
  t.remove_extra_whitespaces = f.get_bool_or("tokenizer.ggml.remove_extra_whitespaces", false);
  const auto id_of = [&f, &src, &tokens](const char* key, int64_t def) -> int64_t {
    if (!f.has(key)) return def;
    const uint64_t id = f.get_uint(key);
    HYMBA_CHECK(id < tokens.size(), src, ": key '", key, "' is ", id, ", past the ", tokens.size(), " tokens");
    return static_cast<int64_t>(id);
  };
  t.unk = id_of("tokenizer.ggml.unknown_token_id", 2);
  t.eos = id_of("tokenizer.ggml.eos_token_id", 1);
  t.pad = id_of("tokenizer.ggml.padding_token_id", 0);
  t.bos = id_of("tokenizer.ggml.bos_token_id", -1);
  return t;
}

}  // namespace

CheckpointTokenizer tokenizer_from_gguf(const File& f) {
  const std::string& src = f.source();
  CheckpointTokenizer ct;
  ct.path = src;
  if (f.has(kFileKey)) {
    const Value& v = f.get(kFileKey);
    HYMBA_CHECK(v.type == ValueType::kArray && v.element_type == ValueType::kU8, src, ": key '", kFileKey,
                "' must be an array of u8");
    std::string bytes(v.numbers.size(), '\0');
    for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>(static_cast<uint8_t>(v.numbers[i]));
    const std::string name = f.get_string(kFileNameKey);
    const std::string config = f.has(kConfigKey) ? f.get_string(kConfigKey) : std::string();
    const json cfg = config.empty() ? json::object() : parse_json(config, src + ": key '" + kConfigKey + "'");
    const std::string origin = src + " (key " + kFileKey + ")";
    if (name == "tokenizer.json") {
      ct.tokenizer = make_hf_tokenizer_json(origin, bytes, config);
    } else if (is_byte_tokenizer_file(bytes)) {
      ct.tokenizer = load_byte_tokenizer(origin, bytes);
    } else {
      ct.tokenizer = load_sentencepiece_tokenizer(bytes, origin);
      ct.tokenizer->set_added_specials(flag(cfg, "add_bos_token"), flag(cfg, "add_eos_token"));
    }
    ct.add_bos = flag(cfg, "add_bos_token");
    return ct;
  }
  HYMBA_CHECK(!no_vocab(f), src, ": no tokenizer in the file (tokenizer.ggml.model is missing or no_vocab)");
  const std::string& model = f.get_string("tokenizer.ggml.model");
  HYMBA_CHECK(model == "gpt2" || model == "gemma4" || model == "llama" || model == "t5" || model == "bert", src,
              ": key 'tokenizer.ggml.model' is \"", excerpt(model, 40),
              "\"; the engine reads the gpt2, gemma4, llama, t5 and bert forms (or its own hymba.tokenizer.file)");
  // The BPE forms' pre-tokenizer first: an unknown one is refused before the vocabulary is read.
  std::optional<BpePreTokenizer> pre;
  if (model == "gpt2" || model == "gemma4") {
    const std::string name = model == "gemma4"                ? std::string("gemma4")
                             : f.has("tokenizer.ggml.pre") ? f.get_string("tokenizer.ggml.pre")
                                                            : std::string("default");
    pre = bpe_pre_tokenizer(name);
    HYMBA_CHECK(pre.has_value(), src, ": key 'tokenizer.ggml.pre' is \"", excerpt(name, 40),
                "\", a pre-tokenizer llama.cpp does not map (the engine maps all ", bpe_pre_tokenizer_names().size(),
                " values llama.cpp does, e.g. gpt-2, llama-bpe, qwen2, mpt; docs/gguf.md)");
  }
  const std::vector<std::string>& tokens = f.get_strings("tokenizer.ggml.tokens");
  // The forms become tokenizer.json text, which holds UTF-8 alone.
  for (size_t id = 0; id < tokens.size(); ++id)
    HYMBA_CHECK(tok::is_valid_utf8(tokens[id]), src, ": key 'tokenizer.ggml.tokens' entry ", id, " is not UTF-8 text");
  const std::vector<double> types =
      f.has("tokenizer.ggml.token_type") ? f.get_numbers("tokenizer.ggml.token_type") : std::vector<double>();
  HYMBA_CHECK(types.empty() || types.size() == tokens.size(), src,
              ": key 'tokenizer.ggml.token_type' has ", types.size(), " entries for ", tokens.size(), " tokens");
  const std::vector<double> token_types = types.empty() ? std::vector<double>(tokens.size(), kNormal) : types;
  json cfg = json::object();
  const auto special = [&](const char* key, const char* name) {
    if (!f.has(key)) return;
    const uint64_t id = f.get_uint(key);
    HYMBA_CHECK(id < tokens.size(), src, ": key '", key, "' is ", id, ", past the ", tokens.size(), " tokens");
    cfg[name] = tokens[static_cast<size_t>(id)];
  };
  special("tokenizer.ggml.bos_token_id", "bos_token");
  special("tokenizer.ggml.eos_token_id", "eos_token");
  special("tokenizer.ggml.unknown_token_id", "unk_token");
  special("tokenizer.ggml.padding_token_id", "pad_token");
  if (model == "t5") {
    // llama.cpp's UGM defaults: no bos, eos at the end.
    ct.add_bos = f.get_bool_or("tokenizer.ggml.add_bos_token", false);
    ct.tokenizer = load_sentencepiece_tokenizer(t5_sentencepiece_model(t5_form_of(f, tokens, token_types), src),
                                                src + " (tokenizer.ggml.*)");
    ct.tokenizer->set_added_specials(ct.add_bos, f.get_bool_or("tokenizer.ggml.add_eos_token", true));
    return ct;
  }
  ct.add_bos = f.get_bool_or("tokenizer.ggml.add_bos_token", pre && pre->add_bos);
  cfg["add_bos_token"] = ct.add_bos;
  cfg["add_eos_token"] = f.get_bool_or("tokenizer.ggml.add_eos_token", false);
  const std::string text = pre               ? gpt2_tokenizer_json(f, tokens, token_types, *pre)
                           : model == "bert" ? wpm_tokenizer_json(f, tokens, token_types)
                                             : spm_tokenizer_json(f, tokens, token_types);
  ct.tokenizer = make_hf_tokenizer_json(src + " (tokenizer.ggml.*)", text, cfg.dump());
  return ct;
}

}  // namespace hymba::gguf
