// Hugging Face's BpeTrainer (tokenizers/src/models/bpe/trainer.rs and
// word.rs), ported step for step so that the merges come out in the same
// order, ties included. Comments name the Rust function each part follows.
#include "tokenizer/train/bpe_trainer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <algorithm>
#include <cstdio>
#include <limits>
#include <map>
#include <memory>
#include <queue>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "tokenizer/hf_tokenizer.h"

namespace hymba {

namespace {

using json = nlohmann::ordered_json;
using Pair = std::pair<uint32_t, uint32_t>;

uint64_t pair_key(Pair p) { return (static_cast<uint64_t>(p.first) << 32) | p.second; }
Pair key_pair(uint64_t k) { return {static_cast<uint32_t>(k >> 32), static_cast<uint32_t>(k)}; }

// The code points of a UTF-8 string, each as its own UTF-8 string. Bytes that
// are not part of a valid sequence become one "character" each.
std::vector<std::string> utf8_chars(std::string_view s) {
  std::vector<std::string> out;
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t len = 1;
    if (c >= 0xF0 && c <= 0xF4) len = 4;
    else if (c >= 0xE0 && c <= 0xEF) len = 3;
    else if (c >= 0xC2 && c <= 0xDF) len = 2;
    if (i + len > s.size()) len = 1;
    for (size_t k = 1; k < len; ++k)
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) len = 1;
    out.emplace_back(s.substr(i, len));
    i += len;
  }
  return out;
}

uint32_t code_point(const std::string& ch) {
  const auto b = [&](size_t i) { return static_cast<uint32_t>(static_cast<unsigned char>(ch[i])); };
  switch (ch.size()) {
    case 1: return b(0);
    case 2: return ((b(0) & 0x1F) << 6) | (b(1) & 0x3F);
    case 3: return ((b(0) & 0x0F) << 12) | ((b(1) & 0x3F) << 6) | (b(2) & 0x3F);
    default: return ((b(0) & 0x07) << 18) | ((b(1) & 0x3F) << 12) | ((b(2) & 0x3F) << 6) | (b(3) & 0x3F);
  }
}

std::string encode_utf8(uint32_t c) {
  std::string s;
  if (c < 0x80) {
    s += static_cast<char>(c);
  } else if (c < 0x800) {
    s += static_cast<char>(0xC0 | (c >> 6));
    s += static_cast<char>(0x80 | (c & 0x3F));
  } else {
    s += static_cast<char>(0xE0 | (c >> 12));
    s += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (c & 0x3F));
  }
  return s;
}

// trainer.rs `Merge`: the heap pops the highest count, then the smallest pair.
struct Merge {
  uint64_t count;
  Pair pair;
  std::vector<uint32_t> pos;  // words that held the pair when this entry was made
};
struct MergeLess {
  bool operator()(const Merge& a, const Merge& b) const {
    if (a.count != b.count) return a.count < b.count;
    return a.pair > b.pair;
  }
};

// word.rs `Word::merge` (max_token_length unset): merges every occurrence of
// (c1, c2) from the left and reports the pair-count changes.
void merge_word(std::vector<uint32_t>& sym, uint32_t c1, uint32_t c2, uint32_t repl,
                std::vector<std::pair<Pair, int>>& changes) {
  for (size_t i = 0; i < sym.size(); ++i) {
    if (sym[i] == c1 && i + 1 < sym.size() && sym[i + 1] == c2) {
      if (i > 0) {
        changes.push_back({{sym[i - 1], c1}, -1});
        changes.push_back({{sym[i - 1], repl}, 1});
      }
      sym[i] = repl;
      sym.erase(sym.begin() + static_cast<std::ptrdiff_t>(i) + 1);
      if (i + 1 < sym.size()) {
        changes.push_back({{c2, sym[i + 1]}, -1});
        changes.push_back({{repl, sym[i + 1]}, 1});
      }
    }
  }
}

struct Regex {
  pcre2_code* code = nullptr;
  ~Regex() { pcre2_code_free(code); }
};

const pcre2_code* gpt2_regex() {
  static const std::unique_ptr<Regex> re = [] {
    auto r = std::make_unique<Regex>();
    const char* pattern = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
    int err = 0;
    PCRE2_SIZE off = 0;
    r->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern), PCRE2_ZERO_TERMINATED,
                            PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &err, &off, nullptr);
    HYMBA_CHECK(r->code != nullptr, "GPT-2 pre-tokenizer pattern does not compile in PCRE2 (error ", err, ")");
    pcre2_jit_compile(r->code, PCRE2_JIT_COMPLETE);  // falls back to the interpreter when JIT is unavailable
    return r;
  }();
  return re->code;
}

}  // namespace

const std::vector<std::string>& byte_level_chars() {
  // GPT-2's bytes_to_unicode: printable Latin-1 bytes stand for themselves,
  // the other bytes get 256, 257, ... in byte order.
  static const std::vector<std::string> table = [] {
    std::vector<std::string> t(256);
    uint32_t next = 256;
    for (uint32_t b = 0; b < 256; ++b) {
      const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174);
      t[b] = encode_utf8(printable ? b : next++);
    }
    return t;
  }();
  return table;
}

std::vector<std::string> byte_level_pretokenize(std::string_view input, bool add_prefix_space) {
  std::string text(input);
  if (add_prefix_space && !text.empty() && text.front() != ' ') text.insert(text.begin(), ' ');
  const auto& bl = byte_level_chars();
  auto mapped = [&](size_t a, size_t b) {
    std::string s;
    for (size_t i = a; i < b; ++i) s += bl[static_cast<unsigned char>(text[i])];
    return s;
  };
  std::vector<std::string> out;
  const pcre2_code* re = gpt2_regex();
  std::unique_ptr<pcre2_match_data, void (*)(pcre2_match_data*)> md(pcre2_match_data_create_from_pattern(re, nullptr),
                                                                     pcre2_match_data_free);
  size_t at = 0, gap = 0;
  while (at < text.size()) {
    const int rc = pcre2_match(re, reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(), at, 0, md.get(), nullptr);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    HYMBA_CHECK(rc > 0, "GPT-2 pre-tokenizer: PCRE2 match failed (error ", rc, ")");
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md.get());
    const size_t s = ov[0], e = ov[1];
    if (s > gap) out.push_back(mapped(gap, s));  // HF's Isolated split keeps what no match covers
    if (e > s) out.push_back(mapped(s, e));
    at = e > s ? e : e + 1;
    gap = e;
  }
  if (gap < text.size()) out.push_back(mapped(gap, text.size()));
  return out;
}

BpeTrainResult train_bpe(const std::vector<std::pair<std::string, uint64_t>>& word_counts_in,
                         const BpeTrainerOptions& opt) {
  HYMBA_CHECK(opt.vocab_size > 0, "vocab_size must be positive, got ", opt.vocab_size);
  // Sorted so that nothing below depends on the caller's order (HF iterates a
  // hash map; its result does not depend on that order either).
  std::vector<std::pair<std::string, uint64_t>> wc = word_counts_in;
  std::sort(wc.begin(), wc.end());

  std::unordered_map<std::string, uint32_t> w2id;
  std::vector<std::string> id2w;
  auto add_token = [&](const std::string& s) {
    if (w2id.count(s)) return;
    id2w.push_back(s);
    w2id.emplace(s, static_cast<uint32_t>(id2w.size() - 1));
  };

  // add_special_tokens
  for (const std::string& t : opt.special_tokens) add_token(t);

  // compute_alphabet (limit_alphabet unset: every character is kept), sorted
  // by code point.
  std::vector<std::vector<std::string>> word_chars(wc.size());
  std::map<uint32_t, std::string> alphabet;
  for (size_t i = 0; i < wc.size(); ++i) {
    word_chars[i] = utf8_chars(wc[i].first);
    for (const std::string& c : word_chars[i]) alphabet.emplace(code_point(c), c);
  }
  for (const std::string& c : opt.initial_alphabet) {
    const auto chars = utf8_chars(c);
    HYMBA_CHECK(chars.size() == 1, "initial_alphabet entry \"", c, "\" is not one character");
    alphabet.emplace(code_point(c), c);
  }
  for (const auto& [cp, c] : alphabet) add_token(c);

  // tokenize_words
  std::vector<std::vector<uint32_t>> words(wc.size());
  std::vector<int64_t> counts(wc.size());
  for (size_t i = 0; i < wc.size(); ++i) {
    counts[i] = static_cast<int64_t>(wc[i].second);
    for (const std::string& c : word_chars[i]) words[i].push_back(w2id.at(c));
  }
  word_chars.clear();

  // count_pairs
  std::unordered_map<uint64_t, int64_t> pair_counts;
  std::unordered_map<uint64_t, std::vector<uint32_t>> where_to_update;
  for (size_t i = 0; i < words.size(); ++i) {
    const auto& w = words[i];
    for (size_t k = 0; k + 1 < w.size(); ++k) {
      const uint64_t key = pair_key({w[k], w[k + 1]});
      pair_counts[key] += counts[i];
      auto& pos = where_to_update[key];
      if (pos.empty() || pos.back() != i) pos.push_back(static_cast<uint32_t>(i));
    }
  }

  std::priority_queue<Merge, std::vector<Merge>, MergeLess> queue;
  auto push_updates = [&] {
    for (auto& [key, pos] : where_to_update) {
      const int64_t c = pair_counts[key];
      if (c > 0) {
        std::sort(pos.begin(), pos.end());
        pos.erase(std::unique(pos.begin(), pos.end()), pos.end());
        queue.push(Merge{static_cast<uint64_t>(c), key_pair(key), std::move(pos)});
      }
    }
    where_to_update.clear();
  };
  push_updates();

  std::vector<std::pair<Pair, uint32_t>> merges;
  std::vector<std::pair<Pair, int>> changes;
  while (w2id.size() < static_cast<size_t>(opt.vocab_size) && !queue.empty()) {
    Merge top = queue.top();
    queue.pop();
    // Stale: put it back with its current count (cast as Rust's `as u64` does).
    const uint64_t current = static_cast<uint64_t>(pair_counts[pair_key(top.pair)]);
    if (top.count != current) {
      top.count = current;
      queue.push(std::move(top));
      continue;
    }
    if (top.count < 1 || opt.min_frequency > top.count) break;

    const std::string new_token = id2w[top.pair.first] + id2w[top.pair.second];
    add_token(new_token);
    const uint32_t new_id = w2id.at(new_token);
    merges.push_back({top.pair, new_id});

    for (uint32_t iw : top.pos) {
      changes.clear();
      merge_word(words[iw], top.pair.first, top.pair.second, new_id, changes);
      for (const auto& [p, change] : changes) {
        const uint64_t key = pair_key(p);
        pair_counts[key] += change * counts[iw];
        if (change > 0) where_to_update[key].push_back(iw);
      }
    }
    push_updates();
  }

  // HF keeps merges in a map from pair to (rank, id): a pair merged twice
  // (two merge paths can spell the same token) keeps its last rank.
  std::unordered_map<uint64_t, size_t> last_rank;
  for (size_t r = 0; r < merges.size(); ++r) last_rank[pair_key(merges[r].first)] = r;
  BpeTrainResult out;
  out.vocab = id2w;
  for (size_t r = 0; r < merges.size(); ++r) {
    if (last_rank[pair_key(merges[r].first)] != r) continue;
    out.merges.push_back({id2w[merges[r].first.first], id2w[merges[r].first.second]});
  }
  return out;
}

// Every merge rewrites each word holding the pair, so one 50 MB "word" (a line
// with no spaces) costs 50 MB per merge: minutes. Words longer than this many
// bytes are counted as pieces of it (cut at character boundaries); ordinary
// text has no such words, so its merges stay HF's.
namespace {

constexpr size_t kMaxTrainedWordBytes = 8192;

void count_word(std::string&& word, std::unordered_map<std::string, uint64_t>& counts) {
  if (word.size() <= kMaxTrainedWordBytes) {
    ++counts[std::move(word)];
    return;
  }
  for (size_t at = 0; at < word.size();) {
    size_t end = std::min(word.size(), at + kMaxTrainedWordBytes);
    while (end < word.size() && end > at + 1 && (static_cast<unsigned char>(word[end]) & 0xC0) == 0x80) --end;
    ++counts[word.substr(at, end - at)];
    at = end;
  }
}

}  // namespace

BpeTrainResult train_byte_level_bpe(const std::vector<std::string>& sequences, const ByteLevelBpeOptions& opt) {
  std::unordered_map<std::string, uint64_t> counts;
  for (const std::string& s : sequences)
    for (std::string& w : byte_level_pretokenize(s, false)) count_word(std::move(w), counts);
  BpeTrainerOptions t;
  t.vocab_size = opt.vocab_size;
  t.min_frequency = opt.min_frequency;
  t.special_tokens = opt.special_tokens;
  if (opt.full_byte_alphabet) t.initial_alphabet = byte_level_chars();
  return train_bpe({counts.begin(), counts.end()}, t);
}

std::string byte_level_bpe_tokenizer_json(const BpeTrainResult& r, const ByteLevelBpeOptions& opt) {
  // Written by hand in HF's field order: a json object of tens of thousands
  // of keys would be slow to build in insertion order.
  json added = json::array();
  for (const std::string& t : opt.special_tokens) {
    auto it = std::find(r.vocab.begin(), r.vocab.end(), t);
    if (it == r.vocab.end()) continue;
    added.push_back({{"id", it - r.vocab.begin()}, {"content", t}, {"single_word", false}, {"lstrip", false},
                     {"rstrip", false}, {"normalized", false}, {"special", true}});
  }
  const json byte_level = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true},
                           {"use_regex", true}};
  const json processor = {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", false},
                          {"use_regex", true}};
  const json decoder = {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", true},
                        {"use_regex", true}};
  const json unk = opt.special_tokens.empty() ? json(nullptr) : json(opt.special_tokens.front());
  std::string s = "{\n  \"version\": \"1.0\",\n  \"truncation\": null,\n  \"padding\": null,\n";
  s += "  \"added_tokens\": " + added.dump() + ",\n";
  s += "  \"normalizer\": null,\n";
  s += "  \"pre_tokenizer\": " + byte_level.dump() + ",\n";
  s += "  \"post_processor\": " + processor.dump() + ",\n";
  s += "  \"decoder\": " + decoder.dump() + ",\n";
  s += "  \"model\": {\n    \"type\": \"BPE\",\n    \"dropout\": null,\n    \"unk_token\": " + unk.dump() + ",\n";
  s += "    \"continuing_subword_prefix\": null,\n    \"end_of_word_suffix\": null,\n    \"fuse_unk\": false,\n";
  s += "    \"byte_fallback\": false,\n    \"ignore_merges\": false,\n    \"vocab\": {";
  for (size_t i = 0; i < r.vocab.size(); ++i)
    s += std::string(i ? "," : "") + "\n      " + json(r.vocab[i]).dump() + ": " + std::to_string(i);
  s += "\n    },\n    \"merges\": [";
  for (size_t i = 0; i < r.merges.size(); ++i)
    s += std::string(i ? "," : "") + "\n      [" + json(r.merges[i].first).dump() + ", " +
         json(r.merges[i].second).dump() + "]";
  s += "\n    ]\n  }\n}\n";
  return s;
}

std::unique_ptr<Tokenizer> train_byte_level_bpe_tokenizer(const std::vector<std::string>& sequences,
                                                          const ByteLevelBpeOptions& opt) {
  HYMBA_CHECK(opt.vocab_size > static_cast<int32_t>(opt.special_tokens.size()), "tokenizer vocab_size ",
              opt.vocab_size, " leaves no room beyond the ", opt.special_tokens.size(), " special tokens");
  const BpeTrainResult r = train_byte_level_bpe(sequences, opt);
  return make_hf_tokenizer_json("trained byte-level BPE tokenizer.json", byte_level_bpe_tokenizer_json(r, opt),
                                byte_level_bpe_tokenizer_config(opt));
}

std::string byte_level_bpe_tokenizer_config(const ByteLevelBpeOptions& opt) {
  json j = json::object();
  const char* keys[] = {"unk_token", "pad_token", "bos_token", "eos_token"};
  for (size_t i = 0; i < 4 && i < opt.special_tokens.size(); ++i) j[keys[i]] = opt.special_tokens[i];
  j["add_bos_token"] = false;
  j["tokenizer_class"] = "PreTrainedTokenizerFast";
  return j.dump(2) + "\n";
}

}  // namespace hymba
