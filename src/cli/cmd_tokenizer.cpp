// `hymba tokenizer train|encode|decode|bench`: train a byte, BPE or Unigram
// tokenizer (sentencepiece), a Hugging Face byte-level BPE or a Hugging Face
// Unigram (seed 002's) on a corpus and write its file; encode text (an argument or stdin) to ids, with offsets as
// JSON, and back; time encoding.
#include <algorithm>
#include <chrono>
#include <new>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "core/atomic_file.h"
#include "core/error.h"
#include "tokenizer/train/bpe_trainer.h"
#include "data/corpus.h"
#include "tokenizer/sentencepiece_tokenizer.h"
#include "tokenizer/train/train_tokenizer.h"
#include "tokenizer/tokenizer_files.h"
#include "tokenizer/train/unigram_trainer.h"
#include "formats/checkpoint.h"

namespace hymba::cli {

namespace {

constexpr size_t kSampleChars = 60;

struct TrainCmdOptions {
  std::string type = "bpe";
  int32_t vocab_size = 4096;
  std::string data;
  std::string out;
  uint64_t seed = 0;
  uint64_t min_frequency = 2;       // byte-level-bpe only
  bool corpus_alphabet = false;  // byte-level-bpe only
  std::string special_tokens;    // hf-unigram only; "" = seed 002's
};

struct EncodeCmdOptions {
  std::string tokenizer;
  std::string text;
  bool json = false;
  bool jsonl = false;
  bool add_special_tokens = false;
};

struct DecodeCmdOptions {
  std::string tokenizer;
  std::string ids;
  bool keep_special_tokens = false;
  bool skip_special_tokens = false;  // the default; accepted for HF's name
};

struct BenchCmdOptions {
  std::string tokenizer;
  std::string data;
  int repeat = 3;
};

double mib(int64_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0); }

// Bytes of a UTF-8 sequence whose lead byte is `c` (1 for anything else).
size_t utf8_seq_len(unsigned char c) {
  if (c >= 0xF0 && c <= 0xF4) return 4;
  if (c >= 0xE0) return c <= 0xEF ? 3 : 1;
  if (c >= 0xC2) return 2;
  return 1;
}

// The first `chars` characters of `s` (UTF-8 aware, so no character is cut).
std::string_view first_chars(std::string_view s, size_t chars) {
  size_t i = 0;
  for (size_t n = 0; n < chars && i < s.size(); ++n) i += utf8_seq_len(static_cast<unsigned char>(s[i]));
  return s.substr(0, std::min(i, s.size()));
}

// A terminal-safe, quoted rendering: control characters and bytes that are
// not part of a complete UTF-8 character are escaped.
std::string printable(std::string_view s) {
  std::string out = "\"";
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c >= 0x20 && c < 0x7F) {
      out += static_cast<char>(c);
    } else {
      size_t len = c >= 0x80 ? utf8_seq_len(c) : 0;
      bool whole = len > 1 && i + len <= s.size();
      for (size_t k = 1; whole && k < len; ++k) whole = (static_cast<unsigned char>(s[i + k]) & 0xC0) == 0x80;
      if (whole) {
        out.append(s.substr(i, len));
        i += len;
        continue;
      }
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02X", c);
      out += hex;
    }
    ++i;
  }
  return out + "\"";
}

std::string join_ids(const std::vector<int32_t>& ids) {
  std::string out;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i > 0) out += ',';
    out += std::to_string(ids[i]);
  }
  return out;
}

// "1,2,3", "1 2 3" or a mix; errors name --ids.
std::vector<int32_t> parse_ids(const std::string& text) {
  std::vector<int32_t> ids;
  size_t i = 0;
  while (i < text.size()) {
    if (std::string_view(", \t\r\n[]").find(text[i]) != std::string_view::npos) {
      ++i;
      continue;
    }
    size_t end = text.find_first_of(", \t\r\n[]", i);
    if (end == std::string::npos) end = text.size();
    const std::string item = text.substr(i, end - i);
    size_t used = 0;
    long long v = 0;
    try {
      v = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    HYMBA_CHECK(used == item.size() && v >= INT32_MIN && v <= INT32_MAX, "--ids: '", item, "' is not a token id");
    ids.push_back(static_cast<int32_t>(v));
    i = end;
  }
  return ids;
}

std::string read_stdin() {
  std::string all;
  char buf[1 << 16];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, stdin)) > 0) all.append(buf, n);
  return all;
}

// {"ids": [...], "offsets": [[begin, end], ...]}: byte offsets in the text.
std::string encoding_json(const Encoding& e) {
  std::string out = "{\"ids\": [" + join_ids(e.ids) + "], \"offsets\": [";
  for (size_t i = 0; i < e.offsets.size(); ++i) {
    if (i > 0) out += ", ";
    out += "[" + std::to_string(e.offsets[i].begin) + ", " + std::to_string(e.offsets[i].end) + "]";
  }
  return out + "]}";
}

// --jsonl: each stdin line is a JSON string, or an object with a "text"
// string; each gets one line of encoding_json. One process for many texts
// (the parity tool's full-file runs, batch jobs). Blank lines are skipped.
void encode_jsonl(const Tokenizer& tok, bool add_special_tokens) {
  const std::string all = read_stdin();
  size_t line_no = 0;
  for (size_t at = 0; at < all.size();) {
    size_t end = all.find('\n', at);
    if (end == std::string::npos) end = all.size();
    const std::string_view line(all.data() + at, end - at);
    at = end + 1;
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    nlohmann::json v = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (v.is_object() && v.contains("text")) v = v["text"];
    HYMBA_CHECK(v.is_string(), "stdin line ", line_no,
                ": expected a JSON string or an object with a \"text\" string (--jsonl)");
    const Encoding en = tok.encode_full(v.get<std::string>(), add_special_tokens);
    std::printf("%s\n", encoding_json(en).c_str());
  }
}

// Encode throughput on one thread: the corpus's documents, `repeat` times.
void run_bench(const BenchCmdOptions& o) {
  const auto tok = load_tokenizer_anywhere(o.tokenizer);
  const std::vector<std::string> docs = read_documents(o.data);
  int64_t bytes = 0, tokens = 0;
  for (const std::string& d : docs) bytes += static_cast<int64_t>(d.size());
  HYMBA_CHECK(bytes > 0, o.data, ": no text to encode");
  double best = 1e300;
  for (int r = 0; r < o.repeat; ++r) {
    tokens = 0;
    const auto start = std::chrono::steady_clock::now();
    for (const std::string& d : docs) tokens += static_cast<int64_t>(tok->encode(d).size());
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::printf("%s: %zu documents, %.2f MiB -> %lld tokens; best of %d: %.3f s, %.2f MiB/s, %.0f tokens/s (1 thread)\n",
              o.tokenizer.c_str(), docs.size(), mib(bytes), static_cast<long long>(tokens), o.repeat, best,
              mib(bytes) / best, static_cast<double>(tokens) / best);
}

// The first document's opening, its ids and pieces, and the compression on
// the whole first document.
void print_sample(const Tokenizer& tok, const std::string& doc) {
  const std::string_view head = first_chars(doc, kSampleChars);
  const std::vector<int32_t> ids = tok.encode(head);
  std::printf("sample: %s\n", printable(head).c_str());
  std::printf("  %zu tokens: %s\n", ids.size(), join_ids(ids).c_str());
  std::string pieces;
  for (int32_t id : ids) pieces += (pieces.empty() ? "" : " ") + printable(tok.decode({id}));
  std::printf("  pieces: %s\n", pieces.c_str());
  const size_t n = tok.encode(doc).size();
  if (n > 0) {
    std::printf("  first document: %zu bytes -> %zu tokens (%.2f bytes/token)\n", doc.size(), n,
                static_cast<double>(doc.size()) / static_cast<double>(n));
  }
}

// Hugging Face's ByteLevel BPE as seed 001 trains it (tokenizer/train/bpe_trainer.h):
// every document of the corpus is one sequence, as train_from_iterator takes
// it. Writes tokenizer.json and, beside it, tokenizer_config.json.
void run_train_byte_level_bpe(const TrainCmdOptions& o) {
  HYMBA_CHECK(!o.data.empty(), "--data is required for --type byte-level-bpe");
  ByteLevelBpeOptions b;
  b.vocab_size = o.vocab_size;
  b.min_frequency = o.min_frequency;
  b.full_byte_alphabet = !o.corpus_alphabet;
  HYMBA_CHECK(o.vocab_size > static_cast<int32_t>(b.special_tokens.size()), "--vocab-size ", o.vocab_size,
              " leaves no room beyond the ", b.special_tokens.size(), " special tokens");
  std::printf("reading %s ...\n", o.data.c_str());
  const std::vector<std::string> docs = read_documents(o.data);
  int64_t bytes = 0;
  for (const std::string& d : docs) bytes += static_cast<int64_t>(d.size());
  std::printf("  %zu documents, %lld bytes (%.2f MiB)\n", docs.size(), static_cast<long long>(bytes), mib(bytes));
  std::printf("training a byte-level BPE (Hugging Face's algorithm), vocab %d, min frequency %llu ...\n",
              o.vocab_size, static_cast<unsigned long long>(o.min_frequency));
  std::fflush(stdout);
  const auto start = std::chrono::steady_clock::now();
  const BpeTrainResult r = train_byte_level_bpe(docs, b);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("  done in %.2f s: vocab %zu, %zu merges\n", secs, r.vocab.size(), r.merges.size());
  const std::filesystem::path parent = std::filesystem::path(o.out).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent);
  write_text_atomic(o.out, byte_level_bpe_tokenizer_json(r, b));
  const std::string cfg = (parent / "tokenizer_config.json").string();
  write_text_atomic(cfg, byte_level_bpe_tokenizer_config(b));
  std::printf("wrote %s and %s\n", o.out.c_str(), cfg.c_str());
  size_t bytes_in_vocab = 0;
  for (const std::string& c : byte_level_chars())
    bytes_in_vocab += std::find(r.vocab.begin(), r.vocab.end(), c) != r.vocab.end() ? 1 : 0;
  if (bytes_in_vocab < 256)
    std::printf("note: the vocabulary has %zu of the 256 byte tokens (--corpus-alphabet): other bytes encode to "
                "<unk>, as in Hugging Face\n",
                bytes_in_vocab);
  const auto tok = load_tokenizer(o.out);
  if (!docs.empty()) print_sample(*tok, docs.front());
}

// Hugging Face's Unigram as seed 002 trains it (tokenizer/train/unigram_trainer.h):
// NFKC + Lowercase, Whitespace, each document in 1,000,000-character
// sequences. Writes tokenizer.json and, beside it, tokenizer_config.json.
void run_train_hf_unigram(const TrainCmdOptions& o) {
  HYMBA_CHECK(!o.data.empty(), "--data is required for --type hf-unigram");
  HfUnigramOptions u;
  u.vocab_size = o.vocab_size;
  if (o.special_tokens == "none") {
    u.special_tokens.clear();
  } else if (!o.special_tokens.empty()) {
    u.special_tokens.clear();
    for (size_t at = 0; at <= o.special_tokens.size();) {
      size_t comma = o.special_tokens.find(',', at);
      if (comma == std::string::npos) comma = o.special_tokens.size();
      HYMBA_CHECK(comma > at, "--special-tokens \"", o.special_tokens, "\" has an empty token");
      u.special_tokens.push_back(o.special_tokens.substr(at, comma - at));
      at = comma + 1;
    }
  }
  HYMBA_CHECK(o.vocab_size > static_cast<int32_t>(u.special_tokens.size()), "--vocab-size ", o.vocab_size,
              " leaves no room beyond the ", u.special_tokens.size(), " special tokens");
  std::printf("reading %s ...\n", o.data.c_str());
  const std::vector<std::string> docs = read_documents(o.data);
  int64_t bytes = 0;
  for (const std::string& d : docs) bytes += static_cast<int64_t>(d.size());
  std::printf("  %zu documents, %lld bytes (%.2f MiB)\n", docs.size(), static_cast<long long>(bytes), mib(bytes));
  std::printf("training a Unigram (Hugging Face's algorithm, NFKC + lowercase, Whitespace), vocab %d ...\n",
              o.vocab_size);
  std::fflush(stdout);
  const auto start = std::chrono::steady_clock::now();
  UnigramTrainResult r;
  try {
    r = train_hf_unigram(hf_unigram_sequences(docs), u);
  } catch (const Error& e) {
    std::string msg = e.what();
    if (msg.rfind("vocab_size", 0) == 0) msg = "--vocab-size" + msg.substr(10);
    fail(msg);
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("  done in %.2f s: vocab %zu\n", secs, r.vocab.size());
  const std::filesystem::path parent = std::filesystem::path(o.out).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent);
  write_text_atomic(o.out, hf_unigram_tokenizer_json(r, u));
  const std::string cfg = (parent / "tokenizer_config.json").string();
  write_text_atomic(cfg, hf_unigram_tokenizer_config(u));
  std::printf("wrote %s and %s\n", o.out.c_str(), cfg.c_str());
  const auto tok = load_tokenizer(o.out);
  if (!docs.empty()) print_sample(*tok, docs.front());
}

void run_train(const TrainCmdOptions& o) {
  if (o.type == "byte-level-bpe") return run_train_byte_level_bpe(o);
  if (o.type == "hf-unigram") return run_train_hf_unigram(o);
  TokenizerTrainOptions t;
  t.kind = parse_tokenizer_kind(o.type);
  t.vocab_size = o.vocab_size;
  t.seed = o.seed;
  HYMBA_CHECK(t.kind == TokenizerKind::kByte || !o.data.empty(), "--data is required for --type ", o.type);

  std::vector<std::string> docs;
  if (!o.data.empty()) {
    std::printf("reading %s ...\n", o.data.c_str());
    std::fflush(stdout);
    docs = read_documents(o.data);
    int64_t bytes = 0;
    for (const std::string& d : docs) bytes += static_cast<int64_t>(d.size());
    std::printf("  %zu documents, %lld bytes (%.2f MiB)\n", docs.size(), static_cast<long long>(bytes), mib(bytes));
    if (t.kind != TokenizerKind::kByte && bytes > t.max_train_bytes) {
      std::printf("  training on a sample of about %.0f MiB (seed %llu)\n", mib(t.max_train_bytes),
                  static_cast<unsigned long long>(t.seed));
    }
  }

  std::unique_ptr<Tokenizer> tok;
  if (t.kind == TokenizerKind::kByte) {
    std::printf("byte tokenizer: needs no training, vocab is always 259 (--vocab-size is not used)\n");
    tok = make_byte_tokenizer();
  } else {
    std::printf("training a %s tokenizer, vocab %d ...\n", to_string(t.kind), t.vocab_size);
    std::fflush(stdout);
    const auto start = std::chrono::steady_clock::now();
    tok = train_tokenizer(docs, t);
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf("  done in %.2f s\n", secs);
  }
  std::printf("vocab %d (pad %d, unk %d, bos %d, eos %d), fingerprint %s\n", tok->vocab_size(), tok->pad_id(),
              tok->unk_id(), tok->bos_id(), tok->eos_id(), tok->fingerprint().c_str());
  tok->save(o.out);
  std::printf("wrote %s\n", o.out.c_str());
  if (!docs.empty()) print_sample(*tok, docs.front());
}

}  // namespace

void register_tokenizer(CLI::App& app, const GlobalOptions& global) {
  CLI::App* cmd = app.add_subcommand("tokenizer", "Train a tokenizer, or encode and decode text with one");
  cmd->require_subcommand(1);

  auto train = std::make_shared<TrainCmdOptions>();
  CLI::App* t = cmd->add_subcommand(
      "train",
      "Train a tokenizer on a corpus and write its file (sentencepiece BPE or Unigram, or the byte tokenizer)");
  t->add_option("--type", train->type,
                 "Tokenizer type: bpe, unigram (sentencepiece), byte, byte-level-bpe (Hugging Face's "
                 "ByteLevel BPE trainer, as seed 001) or hf-unigram (Hugging Face's Unigram trainer with NFKC, "
                 "lowercase and Whitespace, as seed 002); the last two write a tokenizer.json")
      ->check(CLI::IsMember({"bpe", "unigram", "byte", "byte-level-bpe", "hf-unigram"}))
      ->capture_default_str();
  t->add_option("--vocab-size", train->vocab_size,
                "Vocabulary size, including 4 special and 256 byte-fallback pieces (bpe, unigram)")
      ->check(range(int32_t{1}, int32_t{1} << 24))
      ->capture_default_str();
  t->add_option("--data", train->data,
                "Corpus: a .txt file, a directory of .txt files, a .jsonl file with a \"text\" field, or 'default'");
  t->add_option("--out", train->out, "Tokenizer file to write (e.g. tokenizer.model)")->required();
  t->add_option("--min-frequency", train->min_frequency,
                 "byte-level-bpe: a pair is merged only when seen at least this often (seed 001: 2)")
      ->capture_default_str();
  t->add_flag("--corpus-alphabet", train->corpus_alphabet,
              "byte-level-bpe: only the byte characters the corpus uses get a token, as seed 001 "
              "(default: all 256, as HF's ByteLevelBPETokenizer, so any text encodes)");
  t->add_option("--special-tokens", train->special_tokens,
                "hf-unigram: comma-separated special tokens, ids 0.. in this order; the first three are named pad, "
                "bos, eos in tokenizer_config.json; 'none' for none, as HF's default trainer (default: seed 002's "
                "<|pad|>,<|bos|>,<|eos|>)");
  t->add_option("--seed", train->seed, "Seed for sampling documents from corpora too large to train on whole")
      ->capture_default_str();
  t->callback([train, &global] {
    apply_global_options(global);
    try {
      run_train(*train);
    } catch (const std::bad_alloc&) {
      // The corpus and the trainers' counts of its words or pieces: the
      // generic out-of-memory line would name --batch and --seq-len.
      fail("tokenizer train: out of memory reading ", train->data, " and counting its pieces; train on a smaller ",
           "--data (a sample of the corpus) or a smaller --vocab-size");
    }
  });

  const char* tokenizer_help =
      "Tokenizer: a tokenizer.model (hymba or sentencepiece), a tokenizer.json, or a checkpoint directory";
  auto enc = std::make_shared<EncodeCmdOptions>();
  CLI::App* e = cmd->add_subcommand("encode", "Print the token ids of a text (--text, else stdin)");
  e->add_option("--tokenizer", enc->tokenizer, tokenizer_help)->required();
  e->add_option("--text", enc->text, "Text to encode (default: read stdin)");
  e->add_flag("--json", enc->json, "Print {\"ids\": [...], \"offsets\": [[begin, end], ...]} (byte offsets)");
  e->add_flag("--jsonl", enc->jsonl,
              "Read stdin as JSON lines (a string, or an object with \"text\") and print one --json line each")
      ->excludes("--text");
  e->add_flag("--add-special-tokens", enc->add_special_tokens,
              "Add the special tokens the tokenizer puts around a text (tokenizer.json's post-processor; bos/eos "
              "per tokenizer_config.json)");
  e->callback([enc, e, &global] {
    apply_global_options(global);
    const auto tok = load_tokenizer_anywhere(enc->tokenizer);
    if (enc->jsonl) return encode_jsonl(*tok, enc->add_special_tokens);
    const std::string text = e->count("--text") > 0 ? enc->text : read_stdin();
    const Encoding en = tok->encode_full(text, enc->add_special_tokens);
    std::printf("%s\n", enc->json ? encoding_json(en).c_str() : join_ids(en.ids).c_str());
  });

  auto dec = std::make_shared<DecodeCmdOptions>();
  CLI::App* d = cmd->add_subcommand("decode", "Print the text of token ids (--ids, else stdin)");
  d->add_option("--tokenizer", dec->tokenizer, tokenizer_help)->required();
  d->add_option("--ids", dec->ids, "Token ids, separated by commas or spaces, e.g. \"72,105\" (default: read stdin)");
  auto* keep = d->add_flag("--keep-special-tokens", dec->keep_special_tokens, "Print special tokens as their text");
  d->add_flag("--skip-special-tokens", dec->skip_special_tokens, "Special tokens decode to nothing (the default)")
      ->excludes(keep);
  d->callback([dec, d, &global] {
    apply_global_options(global);
    const auto tok = load_tokenizer_anywhere(dec->tokenizer);
    const std::string ids = d->count("--ids") > 0 ? dec->ids : read_stdin();
    const std::string text = tok->decode_full(parse_ids(ids), !dec->keep_special_tokens);
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::printf("\n");
  });

  auto bench = std::make_shared<BenchCmdOptions>();
  CLI::App* b = cmd->add_subcommand("bench", "Time encoding a corpus on one thread (tokens/s)");
  b->add_option("--tokenizer", bench->tokenizer, tokenizer_help)->required();
  b->add_option("--data", bench->data, "Corpus: a .txt file, a directory of .txt files or a .jsonl file")->required();
  b->add_option("--repeat", bench->repeat, "Runs; the fastest is reported")->check(range(1, 100))->capture_default_str();
  b->callback([bench, &global] {
    apply_global_options(global);
    run_bench(*bench);
  });
}

}  // namespace hymba::cli
