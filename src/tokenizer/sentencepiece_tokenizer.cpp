// sentencepiece tokenizers: training, encoding and the model file.
//
// sentencepiece models are trained in memory (sentence iterator in, serialized
// ModelProto out) with settings chosen so that decode(encode(x)) == x for any
// bytes x: identity normalisation, no dummy prefix, no whitespace collapsing,
// byte fallback for characters the vocabulary lacks, and our own handling of
// the two things sentencepiece cannot carry (invalid UTF-8 and its space
// marker U+2581), which are encoded byte by byte. Models from elsewhere (with
// a dummy prefix or a normalizer, Llama's and Hymba-1.5B's) encode the whole
// text exactly as sentencepiece does.
#include "tokenizer/sentencepiece_tokenizer.h"

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <utility>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/rng.h"
#include "tokenizer/sentencepiece_model.h"
#include "tokenizer/hf/unicode_text.h"

namespace hymba {

namespace {

// sentencepiece layout: the special pieces first, then the 256 byte pieces.
constexpr int kSpPad = 0, kSpUnk = 1, kSpBos = 2, kSpEos = 3;
constexpr int kSpRequiredPieces = 4 + 256;
constexpr int kSpDefaultThreads = 16;
// sentencepiece skips longer sentences, so long lines are cut to this size.
constexpr size_t kMaxSentenceBytes = 4096;
// Sampling takes blocks of about 1/64 of the sample size (within these
// bounds), so that one huge document can be sampled too.
constexpr size_t kMinSampleBlockBytes = size_t{4} << 10;
constexpr size_t kMaxSampleBlockBytes = size_t{1} << 20;
constexpr std::string_view kSpaceMarker = "\xE2\x96\x81";  // U+2581

// Length of the well-formed UTF-8 sequence starting at s[i] (no overlongs,
// surrogates or code points past U+10FFFF), or 0 when none starts there.
size_t utf8_len(std::string_view s, size_t i) {
  const tok::CodePoint c = tok::next_code_point(s, i);
  return c.cp >= tok::kInvalidCp ? 0 : c.len;
}

// Calls on_text(run) for each maximal run of `s` that sentencepiece can take
// as it is, and on_raw(byte) for each byte it cannot: bytes of invalid UTF-8
// (it would replace them) and of U+2581 (it would decode it as a space).
template <typename OnText, typename OnRaw>
void split_for_sentencepiece(std::string_view s, OnText&& on_text, OnRaw&& on_raw) {
  size_t run = 0, i = 0;
  while (i < s.size()) {
    const size_t len = utf8_len(s, i);
    const bool raw = len == 0 || s.substr(i, len) == kSpaceMarker;
    if (!raw) {
      i += len;
      continue;
    }
    if (i > run) on_text(s.substr(run, i - run));
    const size_t n = len == 0 ? 1 : len;
    for (size_t k = 0; k < n; ++k) on_raw(static_cast<unsigned char>(s[i + k]));
    i += n;
    run = i;
  }
  if (i > run) on_text(s.substr(run, i - run));
}


// sentencepiece's public API does not say whether a model is BPE or Unigram,
// and its protobuf headers are not installed: the fields are read with
// spm::proto_field (tokenizer/sentencepiece_model.h).

// ModelProto.trainer_spec (field 2) .model_type (field 3): 1 Unigram (the
// default when absent), 2 BPE, 3 word, 4 char.
uint64_t sentencepiece_model_type(std::string_view model) {
  const auto spec = spm::proto_field(model, 2);
  if (!spec) return 1;
  const auto type = spm::proto_field(spec->bytes, 3);
  return type ? type->varint : 1;
}

const char* sentencepiece_type_name(uint64_t type) {
  switch (type) {
    case 1:
      return "unigram";
    case 2:
      return "bpe";
    case 3:
      return "word";
    case 4:
      return "char";
    default:
      return "unknown";
  }
}

// sentencepiece's message without its "file(line) [condition]" prefix.
std::string sentencepiece_message(const sentencepiece::util::Status& status) {
  std::string msg = status.error_message();
  const size_t where = msg.find(") ["), bracket = msg.find("] ");
  if (where != std::string::npos && bracket != std::string::npos && where < bracket) msg.erase(0, bracket + 2);
  std::replace(msg.begin(), msg.end(), '\n', ' ');
  while (!msg.empty() && msg.back() == ' ') msg.pop_back();
  return msg.empty() ? "invalid model data" : msg;
}

// ---------------------------------------------------------------------------
// sentencepiece tokenizer

class SentencePieceTokenizer final : public Tokenizer {
 public:
  // `model` is a serialized ModelProto; `origin` names it in errors.
  SentencePieceTokenizer(std::string model, const std::string& origin) : model_(std::move(model)) {
    const auto status = sp_.LoadFromSerializedProto(model_);
    HYMBA_CHECK(status.ok(), origin,
                ": not a tokenizer file (neither a hymba byte tokenizer nor a sentencepiece model: ",
                sentencepiece_message(status), ")");
    const uint64_t type = sentencepiece_model_type(model_);
    HYMBA_CHECK(type == 1 || type == 2, origin, ": sentencepiece model type ", sentencepiece_type_name(type),
                " is not supported (bpe or unigram)");
    kind_ = type == 2 ? TokenizerKind::kBpe : TokenizerKind::kUnigram;
    vocab_ = sp_.GetPieceSize();
    HYMBA_CHECK(vocab_ > 0, origin, ": sentencepiece model has no pieces");
    bos_ = sp_.bos_id();
    eos_ = sp_.eos_id();
    unk_ = sp_.unk_id();
    HYMBA_CHECK(bos_ >= 0 && eos_ >= 0, origin, ": sentencepiece model has no bos or eos piece (hymba needs both)");
    // Models from elsewhere may lack a pad piece; padding with eos is harmless.
    pad_ = sp_.pad_id() >= 0 ? sp_.pad_id() : eos_;

    // NormalizerSpec (ModelProto field 3): name 1, add_dummy_prefix 3 and
    // remove_extra_whitespaces 4, both true when absent.
    const auto spec = spm::proto_field(model_, 3);
    const auto name = spec ? spm::proto_field(spec->bytes, 1) : std::nullopt;
    const auto dummy = spec ? spm::proto_field(spec->bytes, 3) : std::nullopt;
    const auto extra = spec ? spm::proto_field(spec->bytes, 4) : std::nullopt;
    const bool add_dummy_prefix = !dummy || dummy->varint != 0;
    const bool remove_extra_whitespaces = !extra || extra->varint != 0;
    strip_first_space_ = add_dummy_prefix || remove_extra_whitespaces;
    lossless_ = !strip_first_space_ && name && name->bytes == "identity";

    surface_.resize(vocab_);
    starts_with_marker_.resize(vocab_, false);
    byte_ids_.fill(unk_);
    // Unknown pieces decode to " \u2047 " as in sentencepiece (hymba's own models never produce them).
    if (unk_ >= 0 && !lossless_) surface_[static_cast<size_t>(unk_)] = " \xE2\x81\x87 ";
    for (int id = 0; id < vocab_; ++id) {
      if (sp_.IsControl(id) || sp_.IsUnknown(id) || sp_.IsUnused(id)) continue;
      const std::string& piece = sp_.IdToPiece(id);
      if (sp_.IsByte(id)) {  // "<0xAB>"
        const auto b = static_cast<unsigned char>(std::stoi(piece.substr(3, 2), nullptr, 16));
        surface_[id] = std::string(1, static_cast<char>(b));
        byte_ids_[b] = id;
        continue;
      }
      std::string& s = surface_[id];
      starts_with_marker_[static_cast<size_t>(id)] = piece.compare(0, kSpaceMarker.size(), kSpaceMarker) == 0;
      for (size_t i = 0; i < piece.size();) {
        if (piece.compare(i, kSpaceMarker.size(), kSpaceMarker) == 0) {
          s.push_back(' ');
          i += kSpaceMarker.size();
        } else {
          s.push_back(piece[i++]);
        }
      }
    }
  }

  TokenizerKind kind() const override { return kind_; }
  int32_t vocab_size() const override { return vocab_; }

  // The whole text at once, as sentencepiece encodes it. Models trained by
  // hymba (no dummy prefix, identity normalisation) additionally carry
  // invalid UTF-8 and U+2581 byte by byte, so that decode(encode(x)) == x.
  std::vector<int32_t> encode(std::string_view text) const override {
    std::vector<int32_t> out;
    out.reserve(text.size() / 3 + 1);
    std::vector<int> ids;
    const auto encode_run = [&](std::string_view run) {
      const auto status = sp_.Encode(run, &ids);
      HYMBA_CHECK(status.ok(), "sentencepiece could not encode text: ", sentencepiece_message(status));
      out.insert(out.end(), ids.begin(), ids.end());
    };
    if (!lossless_) {
      if (!text.empty()) encode_run(text);
      return out;
    }
    split_for_sentencepiece(text, encode_run, [&](unsigned char b) { out.push_back(byte_ids_[b]); });
    return out;
  }

  Encoding encode_full(std::string_view text, bool add_special_tokens) const override {
    Encoding e;
    if (add_special_tokens && add_bos_) {
      e.ids.push_back(bos_);
      e.offsets.push_back({});
    }
    size_t base = 0;
    const auto encode_run = [&](std::string_view run) {
      const auto spt = sp_.EncodeAsImmutableProto(run);
      for (const auto& p : spt.pieces()) {
        e.ids.push_back(static_cast<int32_t>(p.id()));
        e.offsets.push_back({base + p.begin(), base + p.end()});
      }
    };
    if (!lossless_) {
      if (!text.empty()) encode_run(text);
    } else {
      // The runs are views of `text`: their position gives the base offset.
      size_t cursor = 0;
      split_for_sentencepiece(
          text,
          [&](std::string_view run) {
            base = static_cast<size_t>(run.data() - text.data());
            encode_run(run);
            cursor = base + run.size();
          },
          [&](unsigned char b) {
            e.ids.push_back(byte_ids_[b]);
            e.offsets.push_back({cursor, cursor + 1});
            ++cursor;
          });
    }
    if (add_special_tokens && add_eos_) {
      e.ids.push_back(eos_);
      e.offsets.push_back({});
    }
    return e;
  }

  // Piece by piece rather than sentencepiece's Decode, which would turn
  // byte pieces that are not valid UTF-8 into U+FFFD. As sentencepiece does,
  // the dummy prefix's space leaves the first piece of the text.
  std::string decode(const std::vector<int32_t>& ids) const override { return decode_full(ids, true); }

  std::string decode_full(const std::vector<int32_t>& ids, bool skip_special_tokens) const override {
    std::string out;
    out.reserve(ids.size() * 4);
    for (int32_t id : ids) {
      if (id < 0 || id >= vocab_) fail_id_out_of_range(id, kind_, vocab_);
      if (!skip_special_tokens && sp_.IsControl(id)) {
        out += sp_.IdToPiece(id);
        continue;
      }
      const std::string& s = surface_[static_cast<size_t>(id)];
      if (out.empty() && strip_first_space_ && starts_with_marker_[static_cast<size_t>(id)]) out.append(s, 1);
      else out += s;
    }
    return out;
  }

  int32_t bos_id() const override { return bos_; }
  int32_t eos_id() const override { return eos_; }
  int32_t pad_id() const override { return pad_; }
  int32_t unk_id() const override { return unk_; }
  std::string fingerprint() const override { return tokenizer_fingerprint(kind_, model_); }
  void save(const std::string& path) const override { write_text_atomic(path, model_); }

 private:
  std::string model_;  // the serialized ModelProto, saved as is
  sentencepiece::SentencePieceProcessor sp_;
  TokenizerKind kind_ = TokenizerKind::kBpe;
  int32_t vocab_ = 0, bos_ = -1, eos_ = -1, pad_ = -1, unk_ = -1;
  std::array<int32_t, 256> byte_ids_{};
  std::vector<std::string> surface_;  // what each id decodes to ("" for specials)
  std::vector<bool> starts_with_marker_;  // the piece starts with U+2581
  bool lossless_ = true;                  // hymba's settings: raw bytes carried past sentencepiece
  bool strip_first_space_ = false;        // add_dummy_prefix or remove_extra_whitespaces
};

// ---------------------------------------------------------------------------
// Training

// A piece of one document: the whole of it, or a block of a large one.
struct TextBlock {
  size_t doc, begin, end;
};

// Blocks of at most `block` bytes, cut after a newline where there is one in
// the second half (else at a character boundary).
void append_blocks(const std::string& doc, size_t index, size_t block, std::vector<TextBlock>& blocks) {
  size_t begin = 0;
  while (doc.size() - begin > block) {
    size_t cut = doc.rfind('\n', begin + block - 1);
    if (cut == std::string::npos || cut < begin + block / 2) {
      cut = begin + block;
      while (cut > begin + 1 && (static_cast<unsigned char>(doc[cut]) & 0xC0) == 0x80) --cut;
    } else {
      ++cut;
    }
    blocks.push_back({index, begin, cut});
    begin = cut;
  }
  if (begin < doc.size()) blocks.push_back({index, begin, doc.size()});
}

// All of the text when it fits in max_bytes, else a seeded random choice of
// blocks that does, in corpus order.
std::vector<TextBlock> choose_training_text(const std::vector<std::string>& docs, int64_t max_bytes, uint64_t seed) {
  std::vector<TextBlock> blocks;
  int64_t total = 0;
  for (const std::string& d : docs) total += static_cast<int64_t>(d.size());
  if (total <= max_bytes) {
    for (size_t d = 0; d < docs.size(); ++d) blocks.push_back({d, 0, docs[d].size()});
    return blocks;
  }
  const size_t block = std::clamp(static_cast<size_t>(max_bytes / 64), kMinSampleBlockBytes, kMaxSampleBlockBytes);
  for (size_t d = 0; d < docs.size(); ++d) append_blocks(docs[d], d, block, blocks);
  Rng rng(seed);
  for (size_t i = blocks.size(); i > 1; --i) std::swap(blocks[i - 1], blocks[rng.below(i)]);
  int64_t kept = 0;
  size_t n = 0;
  for (; n < blocks.size() && kept < max_bytes; ++n) kept += static_cast<int64_t>(blocks[n].end - blocks[n].begin);
  blocks.resize(n);
  std::sort(blocks.begin(), blocks.end(),
            [](const TextBlock& a, const TextBlock& b) { return a.doc != b.doc ? a.doc < b.doc : a.begin < b.begin; });
  return blocks;
}

// Adds the lines of `run` (no newlines; cut to kMaxSentenceBytes before a
// space or at a character boundary) to `out`.
void append_sentences(std::string_view run, std::vector<std::string_view>& out) {
  size_t pos = 0;
  while (pos < run.size()) {
    size_t eol = run.find('\n', pos);
    if (eol == std::string_view::npos) eol = run.size();
    std::string_view line = run.substr(pos, eol - pos);
    pos = eol + 1;
    while (line.size() > kMaxSentenceBytes) {
      size_t cut = line.rfind(' ', kMaxSentenceBytes - 1);
      if (cut == std::string_view::npos || cut == 0) {
        cut = kMaxSentenceBytes;
        while (cut > 1 && (static_cast<unsigned char>(line[cut]) & 0xC0) == 0x80) --cut;
      }
      out.push_back(line.substr(0, cut));
      line.remove_prefix(cut);
    }
    if (!line.empty()) out.push_back(line);
  }
}

// Distinct characters in the sentences: sentencepiece needs a piece for each
// (character_coverage 1.0) on top of the special and byte pieces.
int64_t count_distinct_chars(const std::vector<std::string_view>& sentences) {
  std::vector<bool> seen(0x110000, false);
  int64_t n = 0;
  for (std::string_view s : sentences) {
    for (size_t i = 0; i < s.size();) {
      const size_t len = std::max<size_t>(utf8_len(s, i), 1);  // runs are valid UTF-8
      const auto lead = static_cast<unsigned char>(s[i]);
      uint32_t cp = len == 1 ? lead : lead & (0x7F >> len);
      for (size_t k = 1; k < len; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
      if (!seen[cp]) {
        seen[cp] = true;
        ++n;
      }
      i += len;
    }
  }
  return n;
}

class SentenceFeed final : public sentencepiece::SentenceIterator {
 public:
  explicit SentenceFeed(const std::vector<std::string_view>& sentences) : sentences_(sentences) { load(); }
  bool done() const override { return next_ > sentences_.size(); }
  void Next() override { load(); }
  const std::string& value() const override { return current_; }
  sentencepiece::util::Status status() const override { return {}; }

 private:
  void load() {
    if (next_ < sentences_.size()) current_.assign(sentences_[next_]);
    ++next_;
  }
  const std::vector<std::string_view>& sentences_;
  size_t next_ = 0;
  std::string current_;
};

}  // namespace

std::unique_ptr<Tokenizer> load_sentencepiece_tokenizer(std::string model, const std::string& origin) {
  return std::make_unique<SentencePieceTokenizer>(std::move(model), origin);
}

std::unique_ptr<Tokenizer> train_sentencepiece_tokenizer(const std::vector<std::string>& documents,
                                                         const SentencePieceTrainOptions& opt) {
  HYMBA_CHECK(opt.kind == TokenizerKind::kBpe || opt.kind == TokenizerKind::kUnigram,
              "sentencepiece trains bpe or unigram tokenizers, not ", to_string(opt.kind));
  const char* kind = to_string(opt.kind);
  HYMBA_CHECK(opt.vocab_size > kSpRequiredPieces, "--vocab-size ", opt.vocab_size, " is too small: a ", kind,
              " tokenizer needs more than ", kSpRequiredPieces,
              " pieces (4 special, 256 byte pieces, then one per distinct character of the corpus)");
  HYMBA_CHECK(opt.max_train_bytes > 0, "tokenizer training sample size must be positive");
  HYMBA_CHECK(opt.threads >= 0, "tokenizer training threads must be >= 0");

  std::vector<std::string_view> sentences;
  for (const TextBlock& b : choose_training_text(documents, opt.max_train_bytes, opt.seed)) {
    const std::string_view text = std::string_view(documents[b.doc]).substr(b.begin, b.end - b.begin);
    split_for_sentencepiece(
        text, [&](std::string_view run) { append_sentences(run, sentences); }, [](unsigned char) {});
  }
  HYMBA_CHECK(!sentences.empty(), "cannot train a ", kind, " tokenizer: the documents contain no text");
  const int64_t chars = count_distinct_chars(sentences);
  HYMBA_CHECK(opt.vocab_size >= kSpRequiredPieces + chars, "--vocab-size ", opt.vocab_size,
              " is too small for this corpus: a ", kind, " tokenizer needs at least ", kSpRequiredPieces + chars,
              " pieces (4 special, 256 byte pieces and ", chars, " distinct characters)");

  const std::unordered_map<std::string, std::string> args = {
      {"model_type", kind},
      {"vocab_size", std::to_string(opt.vocab_size)},
      {"pad_id", std::to_string(kSpPad)},
      {"unk_id", std::to_string(kSpUnk)},
      {"bos_id", std::to_string(kSpBos)},
      {"eos_id", std::to_string(kSpEos)},
      {"byte_fallback", "true"},
      {"character_coverage", "1.0"},
      {"normalization_rule_name", "identity"},
      {"add_dummy_prefix", "false"},
      {"remove_extra_whitespaces", "false"},
      {"allow_whitespace_only_pieces", "true"},
      {"split_digits", "true"},
      {"max_sentence_length", std::to_string(kMaxSentenceBytes)},
      {"input_sentence_size", "0"},  // we sample ourselves, by seed
      {"shuffle_input_sentence", "false"},
      {"num_threads", std::to_string(opt.threads > 0 ? opt.threads : kSpDefaultThreads)},
      {"minloglevel", "2"},  // errors come back as a status; silence progress logs
  };
  std::string model;
  {
    // The log level and random seed are process-wide in sentencepiece. These
    // settings draw no random numbers (we sample ourselves); the seed is set
    // anyway so that training never depends on std::random_device.
    static std::mutex mutex;
    std::lock_guard<std::mutex> lock(mutex);
    sentencepiece::SetRandomGeneratorSeed(static_cast<unsigned>(opt.seed % 0xFFFFFFFFull));
    SentenceFeed feed(sentences);
    const auto status = sentencepiece::SentencePieceTrainer::Train(args, &feed, &model);
    if (!status.ok()) {
      const std::string msg = sentencepiece_message(status);
      HYMBA_CHECK(msg.find("Vocabulary size too high") == std::string::npos, "--vocab-size ", opt.vocab_size,
                  " is too large for this corpus (sentencepiece: ", msg, ")");
      fail("sentencepiece could not train the ", kind, " tokenizer (--vocab-size ", opt.vocab_size, "): ", msg);
    }
  }
  auto tok = std::make_unique<SentencePieceTokenizer>(std::move(model), std::string("trained ") + kind + " tokenizer");
  HYMBA_CHECK(tok->vocab_size() == opt.vocab_size, "--vocab-size ", opt.vocab_size,
              " is too large for this corpus: sentencepiece built only ", tok->vocab_size(), " pieces");
  return tok;
}

}  // namespace hymba
