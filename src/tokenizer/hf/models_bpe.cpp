// BPE as HF `tokenizers` runs it (models/bpe/model.rs, word.rs): a pre-token's
// characters are looked up (with continuing_subword_prefix /
// end_of_word_suffix, byte_fallback to <0xAB> pieces, else unk_token, fused
// when fuse_unk), then merged lowest rank first, leftmost first on ties, with
// a priority queue over adjacent pairs: O(n log n) per pre-token.
#include <nlohmann/json.hpp>

#include <array>
#include <atomic>
#include <queue>
#include <unordered_map>

#include "core/error.h"
#include "core/excerpt.h"
#include "core/json_io.h"
#include "tokenizer/hf/json_fields.h"
#include "tokenizer/hf/models.h"
#include "tokenizer/hf/unicode_text.h"

namespace hymba::tok {

using nlohmann::json;

namespace {

struct MergeTarget {
  int32_t rank, id;
};

class BpeModel final : public Model {
 public:
  BpeModel(const json& j, const std::string& where) : vocab_(read_vocab_object(j, where)) {
    if (j.contains("dropout") && !j["dropout"].is_null()) {
      HYMBA_CHECK(j["dropout"].is_number() && j["dropout"].get<double>() == 0.0, sub(where, ".dropout"), " is ",
                  json_excerpt(j["dropout"]), "; BPE dropout (random merges) is not supported, only null or 0");
    }
    prefix_ = field_string_or(j, "continuing_subword_prefix", where, "");
    suffix_ = field_string_or(j, "end_of_word_suffix", where, "");
    byte_fallback_ = field_bool(j, "byte_fallback", where, false);
    fuse_unk_ = field_bool(j, "fuse_unk", where, false);
    ignore_merges_ = field_bool(j, "ignore_merges", where, false);
    const std::string unk = field_string_or(j, "unk_token", where, "");
    has_unk_ = !unk.empty() || (j.contains("unk_token") && j["unk_token"].is_string());
    unk_id_ = has_unk_ ? vocab_.find(unk) : -1;
    unk_name_ = unk;
    if (byte_fallback_)
      for (int b = 0; b < 256; ++b) byte_ids_[static_cast<size_t>(b)] = vocab_.find(byte_piece(static_cast<unsigned char>(b)));

    const json& merges = field_array(j, "merges", where);
    merges_.reserve(merges.size() * 2);
    for (size_t rank = 0; rank < merges.size(); ++rank) {
      const json& e = merges[rank];
      const std::string at = sub(where, ".merges[" + std::to_string(rank) + "]");
      std::string a, b;
      if (e.is_string()) {
        const std::string s = e.get<std::string>();
        const size_t sp = s.find(' ', 1);
        HYMBA_CHECK(sp != std::string::npos && sp + 1 < s.size() && s.find(' ', sp + 1) == std::string::npos, at,
                    " (\"", s, "\") is not two pieces separated by a space");
        a = s.substr(0, sp);
        b = s.substr(sp + 1);
      } else if (e.is_array() && e.size() == 2 && e[0].is_string() && e[1].is_string()) {
        a = e[0].get<std::string>();
        b = e[1].get<std::string>();
      } else {
        fail(at, " must be \"a b\" or [\"a\", \"b\"]");
      }
      const int32_t ia = vocab_.find(a), ib = vocab_.find(b);
      HYMBA_CHECK(ia >= 0 && ib >= 0, at, " merges \"", excerpt(ia < 0 ? a : b), "\", which is not in the vocabulary");
      // The merged piece drops b's continuing_subword_prefix, as HF does.
      const std::string merged = a + (b.compare(0, prefix_.size(), prefix_) == 0 ? b.substr(prefix_.size()) : b);
      const int32_t id = vocab_.find(merged);
      HYMBA_CHECK(id >= 0, at, " makes \"", merged, "\", which is not in the vocabulary");
      merges_[key(ia, ib)] = {static_cast<int32_t>(rank), id};  // a repeated pair keeps its last rank, as in HF
    }
  }

  const Vocab& vocab() const override { return vocab_; }

  void tokenize(std::string_view piece, std::vector<ModelToken>& out) const override {
    if (piece.empty()) return;
    if (ignore_merges_) {
      const int32_t id = vocab_.find(piece);
      if (id >= 0) {
        out.push_back({id, 0, piece.size()});
        return;
      }
    }
    // Words repeat: short ones are cached per thread, as HF does (its cache
    // holds 10,000 words of under 256 bytes).
    if (piece.size() >= kMaxCachedBytes) return merge_word(piece, out);
    thread_local std::unordered_map<uint64_t, WordCache> caches;
    if (caches.size() > 8 && caches.count(instance_) == 0) caches.clear();  // bounded when many models come and go
    WordCache& cache = caches[instance_];
    auto it = cache.find(piece);
    if (it != cache.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
    const size_t first = out.size();
    merge_word(piece, out);
    if (cache.size() < kCacheWords) cache.emplace(std::string(piece), std::vector<ModelToken>(out.begin() + static_cast<std::ptrdiff_t>(first), out.end()));
  }

 private:
  static constexpr size_t kMaxCachedBytes = 256, kCacheWords = 10000;
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  using WordCache = std::unordered_map<std::string, std::vector<ModelToken>, Hash, std::equal_to<>>;

  void merge_word(std::string_view piece, std::vector<ModelToken>& out) const {
    std::vector<Symbol> sym;
    initial_symbols(piece, sym);
    merge_all(sym);
    size_t at = 0;
    for (const Symbol& s : sym) {
      if (s.len == 0) continue;
      out.push_back({s.id, at, at + s.len});
      at += s.len;
    }
  }

  struct Symbol {
    int32_t id;
    int32_t prev, next;
    size_t len;  // bytes of the pre-token; 0 once merged into its left neighbour
  };
  struct Candidate {
    int32_t rank;
    int32_t pos;
    int32_t id;
    bool operator<(const Candidate& o) const {  // priority_queue pops the largest: lowest rank, then leftmost
      return rank != o.rank ? rank > o.rank : pos > o.pos;
    }
  };

  static uint64_t key(int32_t a, int32_t b) { return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b); }

  const MergeTarget* merge_of(int32_t a, int32_t b) const {
    auto it = merges_.find(key(a, b));
    return it == merges_.end() ? nullptr : &it->second;
  }

  void add(std::vector<Symbol>& sym, int32_t id, size_t len) const {
    const auto n = static_cast<int32_t>(sym.size());
    if (n > 0) sym.back().next = n;
    sym.push_back({id, n - 1, -1, len});
  }

  void initial_symbols(std::string_view w, std::vector<Symbol>& sym) const {
    sym.reserve(w.size());
    int32_t unk_len = -1;  // pending unknown run (bytes), -1 when none
    std::string buf;
    for (size_t i = 0; i < w.size();) {
      const size_t len = char_len(w, i);
      const bool first = i == 0, last = i + len == w.size();
      std::string_view s = w.substr(i, len);
      if ((!first && !prefix_.empty()) || (last && !suffix_.empty())) {
        buf.assign(first ? "" : prefix_);
        buf.append(s);
        if (last) buf.append(suffix_);
        s = buf;
      }
      const int32_t id = vocab_.find(s);
      if (id >= 0) {
        if (unk_len >= 0) add(sym, unk_id_, static_cast<size_t>(unk_len));
        unk_len = -1;
        add(sym, id, len);
      } else if (byte_fallback_ && all_bytes_known(s)) {
        // HF adds the byte pieces straight away, ahead of a pending unknown run.
        for (unsigned char b : s) add(sym, byte_ids_[b], 1);
      } else if (has_unk_) {
        HYMBA_CHECK(unk_id_ >= 0, "BPE unk_token \"", unk_name_, "\" is not in the vocabulary");
        if (unk_len >= 0 && fuse_unk_) {
          unk_len += static_cast<int32_t>(len);
        } else {
          if (unk_len >= 0) add(sym, unk_id_, static_cast<size_t>(unk_len));
          unk_len = static_cast<int32_t>(len);
        }
      }
      i += len;
    }
    if (unk_len >= 0) add(sym, unk_id_, static_cast<size_t>(unk_len));
  }

  bool all_bytes_known(std::string_view s) const {
    for (unsigned char b : s)
      if (byte_ids_[b] < 0) return false;
    return true;
  }

  void merge_all(std::vector<Symbol>& sym) const {
    std::vector<Candidate> heap;
    heap.reserve(sym.size());
    for (size_t k = 0; k + 1 < sym.size(); ++k)
      if (const MergeTarget* m = merge_of(sym[k].id, sym[k + 1].id))
        heap.push_back({m->rank, static_cast<int32_t>(k), m->id});
    std::priority_queue<Candidate> queue(std::less<Candidate>(), std::move(heap));
    while (!queue.empty()) {
      const Candidate top = queue.top();
      queue.pop();
      Symbol& cur = sym[static_cast<size_t>(top.pos)];
      if (cur.len == 0 || cur.next < 0) continue;
      Symbol& right = sym[static_cast<size_t>(cur.next)];
      const MergeTarget* m = merge_of(cur.id, right.id);
      if (m == nullptr || m->id != top.id) continue;  // stale: a neighbour changed since it was queued
      cur.id = top.id;
      cur.len += right.len;
      right.len = 0;
      cur.next = right.next;
      if (cur.next >= 0) sym[static_cast<size_t>(cur.next)].prev = top.pos;
      if (cur.prev >= 0)
        if (const MergeTarget* p = merge_of(sym[static_cast<size_t>(cur.prev)].id, cur.id))
          queue.push({p->rank, cur.prev, p->id});
      if (cur.next >= 0)
        if (const MergeTarget* n = merge_of(cur.id, sym[static_cast<size_t>(cur.next)].id))
          queue.push({n->rank, top.pos, n->id});
    }
  }

  // Tells this model's per-thread caches apart from those of models freed before.
  const uint64_t instance_ = next_instance_.fetch_add(1);
  static inline std::atomic<uint64_t> next_instance_{1};
  Vocab vocab_;
  std::unordered_map<uint64_t, MergeTarget> merges_;
  std::string prefix_, suffix_, unk_name_;
  bool byte_fallback_ = false, fuse_unk_ = false, ignore_merges_ = false, has_unk_ = false;
  int32_t unk_id_ = -1;
  std::array<int32_t, 256> byte_ids_{};
};

}  // namespace

std::unique_ptr<Model> make_bpe_model(const json& j, const std::string& where) {
  return std::make_unique<BpeModel>(j, where);
}

}  // namespace hymba::tok
