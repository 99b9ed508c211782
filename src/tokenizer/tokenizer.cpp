// The byte-level tokenizer, tokenizer kinds and what every tokenizer shares
// (fingerprints, encode_full / decode_full defaults).
#include "tokenizer/tokenizer.h"

#include <cstdio>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/excerpt.h"

namespace hymba {

namespace {

// Byte tokenizer: its file is this one line.
constexpr std::string_view kByteMagic = "hymba-byte-tokenizer";
constexpr int kByteFormatVersion = 1;
constexpr int32_t kBytePad = 256, kByteBos = 257, kByteEos = 258, kByteVocab = 259;

uint64_t fnv1a64(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

// ---------------------------------------------------------------------------
// Byte tokenizer

class ByteTokenizer final : public Tokenizer {
 public:
  TokenizerKind kind() const override { return TokenizerKind::kByte; }
  int32_t vocab_size() const override { return kByteVocab; }
  std::vector<int32_t> encode(std::string_view text) const override {
    std::vector<int32_t> ids(text.size());
    for (size_t i = 0; i < text.size(); ++i) ids[i] = static_cast<unsigned char>(text[i]);
    return ids;
  }
  std::string decode(const std::vector<int32_t>& ids) const override {
    std::string out;
    out.reserve(ids.size());
    for (int32_t id : ids) {
      if (id < 0 || id >= kByteVocab) fail_id_out_of_range(id, kind(), kByteVocab);
      if (id < 256) out.push_back(static_cast<char>(id));
    }
    return out;
  }
  int32_t bos_id() const override { return kByteBos; }
  int32_t eos_id() const override { return kByteEos; }
  int32_t pad_id() const override { return kBytePad; }
  int32_t unk_id() const override { return -1; }
  std::string fingerprint() const override { return tokenizer_fingerprint(kind(), file_contents()); }
  void save(const std::string& path) const override { write_text_atomic(path, file_contents()); }

  static std::string file_contents() {
    return std::string(kByteMagic) + " " + std::to_string(kByteFormatVersion) + "\n";
  }
};

// The first line of a byte tokenizer file: "hymba-byte-tokenizer <version>".
}  // namespace

bool is_byte_tokenizer_file(std::string_view contents) { return contents.substr(0, kByteMagic.size()) == kByteMagic; }

std::unique_ptr<Tokenizer> load_byte_tokenizer(const std::string& path, std::string_view contents) {
  std::string_view line = contents.substr(0, contents.find('\n'));
  line.remove_prefix(kByteMagic.size());
  while (!line.empty() && (line.back() == ' ' || line.back() == '\r')) line.remove_suffix(1);
  const std::string expected = " " + std::to_string(kByteFormatVersion);
  HYMBA_CHECK(line == expected, path, ": unsupported byte tokenizer format '", std::string(kByteMagic),
              excerpt(line), "' (expected '", std::string(kByteMagic), expected, "')");
  return make_byte_tokenizer();
}


std::string tokenizer_fingerprint(TokenizerKind kind, std::string_view contents) {
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(fnv1a64(contents)));
  return std::string(to_string(kind)) + ":" + hex;
}

void fail_id_out_of_range(int32_t id, TokenizerKind kind, int32_t vocab) {
  fail("token id ", id, " is out of range for the ", to_string(kind), " tokenizer (ids 0..", vocab - 1, ")");
}

const char* to_string(TokenizerKind k) {
  switch (k) {
    case TokenizerKind::kByte:
      return "byte";
    case TokenizerKind::kBpe:
      return "bpe";
    case TokenizerKind::kUnigram:
      return "unigram";
    case TokenizerKind::kWordPiece:
      return "wordpiece";
    case TokenizerKind::kWordLevel:
      return "wordlevel";
    case TokenizerKind::kByteLevelBpe:
      return "byte-level-bpe";
    case TokenizerKind::kHfUnigram:
      return "hf-unigram";
  }
  return "unknown";
}

TokenizerKind parse_tokenizer_kind(const std::string& s, const std::string& what) {
  if (s == "byte") return TokenizerKind::kByte;
  if (s == "bpe") return TokenizerKind::kBpe;
  if (s == "unigram") return TokenizerKind::kUnigram;
  if (s == "byte-level-bpe") return TokenizerKind::kByteLevelBpe;
  if (s == "hf-unigram") return TokenizerKind::kHfUnigram;
  fail(what, " '", s, "' is not a tokenizer type (byte, bpe, unigram, byte-level-bpe or hf-unigram)");
}

std::unique_ptr<Tokenizer> make_byte_tokenizer() { return std::make_unique<ByteTokenizer>(); }

Encoding Tokenizer::encode_full(std::string_view text, bool add_special_tokens) const {
  Encoding e;
  const std::vector<int32_t> ids = encode(text);
  if (add_special_tokens && add_bos_) {
    e.ids.push_back(bos_id());
    e.offsets.push_back({});
  }
  // Spans from the decoded length of each token (exact for byte tokens).
  size_t at = 0;
  for (int32_t id : ids) {
    const size_t len = decode({id}).size();
    e.ids.push_back(id);
    e.offsets.push_back({std::min(at, text.size()), std::min(at + len, text.size())});
    at += len;
  }
  if (add_special_tokens && add_eos_) {
    e.ids.push_back(eos_id());
    e.offsets.push_back({});
  }
  return e;
}

std::string Tokenizer::decode_full(const std::vector<int32_t>& ids, bool skip_special_tokens) const {
  if (skip_special_tokens) return decode(ids);
  std::string out;
  std::vector<int32_t> run;
  for (int32_t id : ids) {
    const bool special = id == bos_id() || id == eos_id() || id == pad_id();
    if (!special) {
      run.push_back(id);
      continue;
    }
    out += decode(run);
    run.clear();
    out += id == bos_id() ? "<s>" : id == eos_id() ? "</s>" : "<pad>";
  }
  return out + decode(run);
}

}  // namespace hymba
