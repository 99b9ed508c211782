// Hugging Face's UnigramTrainer (tokenizers/src/models/unigram/trainer.rs,
// lattice.rs, model.rs) and the suffix-array enumeration it takes from the
// esaxx crate, ported step by step so that pieces and scores come out as HF's.
// Comments name the Rust function each part follows.
#include "tokenizer/train/unigram_trainer.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <numeric>
#include <set>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "tokenizer/hf_tokenizer.h"
#include "tokenizer/hf/normalizers.h"
#include "tokenizer/hf/pre_tokenizers.h"
#include "tokenizer/hf/unicode_text.h"

namespace hymba {

namespace {

using json = nlohmann::ordered_json;
using Piece = std::pair<std::string, double>;
using Words = std::vector<std::pair<std::string, uint64_t>>;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

std::vector<uint32_t> code_points(std::string_view s) {
  std::vector<uint32_t> out;
  for (size_t i = 0; i < s.size();) {
    const tok::CodePoint c = tok::next_code_point(s, i);
    out.push_back(c.cp);
    i += c.len;
  }
  return out;
}

std::string utf8_of(const uint32_t* cps, size_t n) {
  std::string s;
  for (size_t i = 0; i < n; ++i) tok::append_utf8(s, cps[i]);
  return s;
}

// Suffix array by prefix doubling with counting sorts: O(n log n), a few
// seconds for tens of MB of distinct words.
std::vector<int32_t> suffix_array(const std::vector<uint32_t>& t) {
  const size_t n = t.size();
  std::vector<int32_t> sa(n), rank(n), tmp(n), cnt;
  if (n == 0) return sa;
  {
    std::vector<uint32_t> alpha(t);
    std::sort(alpha.begin(), alpha.end());
    alpha.erase(std::unique(alpha.begin(), alpha.end()), alpha.end());
    for (size_t i = 0; i < n; ++i)
      rank[i] = static_cast<int32_t>(std::lower_bound(alpha.begin(), alpha.end(), t[i]) - alpha.begin());
  }
  std::iota(sa.begin(), sa.end(), 0);
  std::stable_sort(sa.begin(), sa.end(), [&](int32_t a, int32_t b) { return rank[a] < rank[b]; });
  for (size_t k = 1;; k <<= 1) {
    // Order by the second key (rank of i + k, absent first), then a stable
    // counting sort by the first.
    size_t p = 0;
    for (size_t i = n - k < n ? n - k : 0; i < n; ++i) tmp[p++] = static_cast<int32_t>(i);
    for (size_t j = 0; j < n; ++j)
      if (static_cast<size_t>(sa[j]) >= k) tmp[p++] = static_cast<int32_t>(sa[j] - static_cast<int32_t>(k));
    const int32_t classes = *std::max_element(rank.begin(), rank.end()) + 1;
    cnt.assign(static_cast<size_t>(classes) + 1, 0);
    for (size_t i = 0; i < n; ++i) ++cnt[static_cast<size_t>(rank[i]) + 1];
    for (int32_t c = 0; c < classes; ++c) cnt[c + 1] += cnt[c];
    for (size_t j = 0; j < n; ++j) sa[cnt[rank[tmp[j]]]++] = tmp[j];
    auto second = [&](int32_t i) { return static_cast<size_t>(i) + k < n ? rank[i + k] : -1; };
    tmp[sa[0]] = 0;
    for (size_t j = 1; j < n; ++j)
      tmp[sa[j]] = tmp[sa[j - 1]] +
                   ((rank[sa[j]] != rank[sa[j - 1]] || second(sa[j]) != second(sa[j - 1])) ? 1 : 0);
    rank.swap(tmp);
    if (rank[sa[n - 1]] == static_cast<int32_t>(n) - 1 || k >= n) break;
  }
  return sa;
}

// model.rs `Unigram::from` and `populate_nodes`: the vocabulary as a lookup
// (a later duplicate wins, as in HF's token_to_ids), its minimum score
// (NaN skipped) and unknown characters as unk_id with min_score - 10.
struct Model {
  const std::vector<Piece>* pieces = nullptr;
  std::unordered_map<std::string_view, int32_t> ids;
  double min_score = std::numeric_limits<double>::infinity();
  size_t max_bytes = 0;
  int32_t unk_id = 0;

  explicit Model(const std::vector<Piece>& p) : pieces(&p) {
    ids.reserve(p.size());
    for (size_t i = 0; i < p.size(); ++i) {
      ids[p[i].first] = static_cast<int32_t>(i);
      if (p[i].second < min_score) min_score = p[i].second;
      max_bytes = std::max(max_bytes, p[i].first.size());
    }
  }
  int32_t bos_id() const { return static_cast<int32_t>(pieces->size()) + 1; }
  int32_t eos_id() const { return static_cast<int32_t>(pieces->size()) + 2; }
};

// lattice.rs `Lattice`. Nodes 0 and 1 are BOS and EOS.
class Lattice {
 public:
  struct Node {
    int32_t id;
    uint32_t pos, len;
    double score;
    int32_t prev = -1;
    double backtrace = 0.0;
  };

  Lattice(std::string_view s, int32_t bos_id, int32_t eos_id) : s_(s), begin_(s.size() + 1), end_(s.size() + 1) {
    nodes_.push_back({bos_id, 0, 0, 0.0});
    nodes_.push_back({eos_id, static_cast<uint32_t>(s.size()), 0, 0.0});
    begin_[s.size()].push_back(1);
    end_[0].push_back(0);
  }

  void insert(size_t pos, size_t len, double score, int32_t id) {
    const auto n = static_cast<int32_t>(nodes_.size());
    nodes_.push_back({id, static_cast<uint32_t>(pos), static_cast<uint32_t>(len), score});
    begin_[pos].push_back(n);
    end_[pos + len].push_back(n);
  }

  // model.rs populate_nodes: every piece starting at each character,
  // shortest first (the trie's order), and unk where no single character is.
  void populate(const Model& m) {
    const double unk_score = m.min_score - 10.0;
    for (size_t at = 0; at < s_.size();) {
      const size_t mblen = tok::char_len(s_, at);
      bool has_single = false;
      for (size_t end = at + mblen; end <= s_.size() && end - at <= m.max_bytes; end += tok::char_len(s_, end)) {
        const auto it = m.ids.find(s_.substr(at, end - at));
        if (it != m.ids.end()) {
          insert(at, end - at, (*m.pieces)[static_cast<size_t>(it->second)].second, it->second);
          if (end - at == mblen) has_single = true;
        }
        if (end == s_.size()) break;
      }
      if (!has_single) insert(at, mblen, unk_score, m.unk_id);
      at += mblen;
    }
  }

  const Node& node(int32_t i) const { return nodes_[static_cast<size_t>(i)]; }

  // lattice.rs viterbi: ties keep the first node ending there.
  std::vector<int32_t> viterbi() {
    const size_t len = s_.size();
    for (size_t pos = 0; pos <= len;) {
      if (begin_[pos].empty()) return {};
      for (int32_t r : begin_[pos]) {
        Node& rn = nodes_[static_cast<size_t>(r)];
        rn.prev = -1;
        double best = 0.0;
        int32_t best_node = -1;
        for (int32_t l : end_[pos]) {
          const double score = node(l).backtrace + rn.score;
          if (best_node < 0 || score > best) {
            best_node = l;
            best = score;
          }
        }
        if (best_node < 0) return {};
        rn.prev = best_node;
        rn.backtrace = best;
      }
      if (pos == len) break;
      pos += tok::char_len(s_, pos);
    }
    std::vector<int32_t> out;
    int32_t n = node(begin_[len][0]).prev;
    if (n < 0) return {};
    while (node(n).prev >= 0) {
      out.push_back(n);
      n = node(n).prev;
    }
    std::reverse(out.begin(), out.end());
    return out;
  }

  // lattice.rs nbest: A* from EOS back to BOS over a 4-ary max-heap on fx,
  // replaying dary_heap's QuaternaryHeap (its Ord says Greater on ties, so
  // equal scores pop in the order that heap gives them).
  std::vector<std::vector<int32_t>> nbest(size_t n) {
    struct Hyp {
      int32_t node, next;
      double fx, gx;
    };
    std::vector<Hyp> hyps;
    std::vector<int32_t> heap;
    auto le = [&](int32_t a, int32_t b) { return hyps[static_cast<size_t>(a)].fx < hyps[static_cast<size_t>(b)].fx; };
    auto sift_up = [&](size_t pos) {
      const int32_t e = heap[pos];
      while (pos > 0) {
        const size_t parent = (pos - 1) / 4;
        if (le(e, heap[parent])) break;
        heap[pos] = heap[parent];
        pos = parent;
      }
      heap[pos] = e;
    };
    auto push = [&](Hyp h) {
      hyps.push_back(h);
      heap.push_back(static_cast<int32_t>(hyps.size() - 1));
      sift_up(heap.size() - 1);
    };
    auto max2 = [&](size_t s) { return s + (le(heap[s], heap[s + 1]) ? 1 : 0); };
    auto pop = [&] {
      int32_t top = heap.back();
      heap.pop_back();
      if (heap.empty()) return top;
      std::swap(top, heap[0]);
      // sift_down_to_bottom(0), then sift_up.
      const size_t end = heap.size();
      const int32_t e = heap[0];
      size_t pos = 0, child = 1;
      while (end >= 4 && child <= end - 4) {
        const size_t a = max2(child), b = max2(child + 2);
        child = le(heap[a], heap[b]) ? b : a;
        heap[pos] = heap[child];
        pos = child;
        child = 4 * pos + 1;
      }
      for (size_t o = child + 1; o < end; ++o)
        if (le(heap[child], heap[o])) child = o;
      if (child < end) {
        heap[pos] = heap[child];
        pos = child;
      }
      heap[pos] = e;
      sift_up(pos);
      return top;
    };

    std::vector<std::vector<int32_t>> out;
    if (n == 0) return out;
    if (n == 1) return {viterbi()};
    const int32_t bos = end_[0][0];
    push({begin_[s_.size()][0], -1, node(begin_[s_.size()][0]).score, node(begin_[s_.size()][0]).score});
    viterbi();  // backtrace scores
    while (!heap.empty()) {
      const int32_t top = pop();
      const Hyp h = hyps[static_cast<size_t>(top)];
      if (node(h.node).id == node(bos).id) {
        std::vector<int32_t> path;
        for (int32_t nx = h.next; hyps[static_cast<size_t>(nx)].next >= 0; nx = hyps[static_cast<size_t>(nx)].next)
          path.push_back(hyps[static_cast<size_t>(nx)].node);
        out.push_back(std::move(path));
        if (out.size() == n) return out;
        continue;
      }
      for (int32_t l : end_[node(h.node).pos])
        push({l, top, node(l).backtrace + h.gx, node(l).score + h.gx});
      // A huge agenda is cut to its best min(512, 10 n) entries.
      if (heap.size() > 100000) {
        std::vector<int32_t> kept;
        for (size_t i = 0; i < std::min<size_t>(512, n * 10); ++i) kept.push_back(pop());
        heap.clear();
        for (int32_t k : kept) {
          heap.push_back(k);
          sift_up(heap.size() - 1);
        }
      }
    }
    return out;
  }

  // lattice.rs populate_marginal: forward-backward in log space; adds
  // freq * P(node) to expected[id] and returns freq * log Z.
  double populate_marginal(double freq, std::vector<double>& expected) const {
    const size_t len = s_.size();
    std::vector<double> alpha(nodes_.size(), 0.0), beta(nodes_.size(), 0.0);
    for (size_t pos = 0; pos <= len; ++pos)
      for (int32_t r : begin_[pos])
        for (int32_t l : end_[pos])
          alpha[r] = log_sum_exp(alpha[r], node(l).score + alpha[l], node(l).id == node(end_[pos][0]).id);
    for (size_t pos = len + 1; pos-- > 0;)
      for (int32_t l : end_[pos])
        for (int32_t r : begin_[pos])
          beta[l] = log_sum_exp(beta[l], node(r).score + beta[r], node(r).id == node(begin_[pos][0]).id);
    const double z = alpha[begin_[len][0]];
    for (size_t pos = 0; pos < len; ++pos)
      for (int32_t i : begin_[pos]) {
        const Node& nd = node(i);
        expected[static_cast<size_t>(nd.id)] += freq * std::exp(alpha[i] + nd.score + beta[i] - z);
      }
    return freq * z;
  }

 private:
  static double log_sum_exp(double x, double y, bool init) {
    if (init) return y;
    const double vmin = x > y ? y : x, vmax = x > y ? x : y;
    if (vmax > vmin + 50.0) return vmax;
    return vmax + std::log(std::exp(vmin - vmax) + 1.0);
  }

  std::string_view s_;
  std::vector<Node> nodes_;
  std::vector<std::vector<int32_t>> begin_, end_;
};

// trainer.rs run_e_step (summed in word order, on one thread).
std::vector<double> e_step(const Model& m, const Words& words) {
  std::vector<double> expected(m.pieces->size(), 0.0);
  for (const auto& [w, count] : words) {
    Lattice lat(w, m.bos_id(), m.eos_id());
    lat.populate(m);
    const double z = lat.populate_marginal(static_cast<double>(count), expected);
    HYMBA_CHECK(!std::isnan(z), "Unigram training: likelihood is NaN on the word \"", w, "\"");
  }
  return expected;
}

// trainer.rs run_m_step: the Bayesian (digamma) update; pieces expected less
// than 0.5 times are dropped; piece 0 (<UNK>) stays with a NaN score.
std::vector<Piece> m_step(const std::vector<Piece>& pieces, const std::vector<double>& expected) {
  std::vector<Piece> out;
  double sum = 0.0;
  for (size_t i = 0; i < pieces.size(); ++i) {
    if (i == 0) {
      out.push_back({pieces[i].first, kNaN});
      continue;
    }
    if (expected[i] < 0.5) continue;
    out.push_back({pieces[i].first, expected[i]});
    sum += expected[i];
  }
  const double logsum = unigram_detail::digamma(sum);
  for (Piece& p : out) p.second = unigram_detail::digamma(p.second) - logsum;
  return out;
}

// trainer.rs prune_sentence_pieces.
std::vector<Piece> prune(const Model& m, const std::vector<Piece>& pieces, const Words& words,
                         const UnigramTrainerOptions& opt) {
  const size_t np = pieces.size();
  std::vector<bool> always_keep(np, true);
  std::vector<std::vector<int32_t>> alternatives(np);
  const auto bos_id = static_cast<int32_t>(np + 1), eos_id = static_cast<int32_t>(np + 2);
  // How each piece would be segmented without it: its second-best path.
  for (size_t id = 0; id < np; ++id) {
    if (id == 0) {
      always_keep[id] = false;
      continue;
    }
    Lattice lat(pieces[id].first, bos_id, eos_id);
    lat.populate(m);
    const auto nbests = lat.nbest(2);
    if (nbests.size() == 1) {
      always_keep[id] = true;
    } else if (nbests[0].size() >= 2) {
      always_keep[id] = false;
    } else if (nbests[0].size() == 1) {
      always_keep[id] = true;
      for (int32_t nd : nbests[1]) alternatives[id].push_back(lat.node(nd).id);
    }
  }
  // Viterbi counts over the words, and where each piece is used.
  double vsum = 0.0;
  std::vector<double> freq(np, 0.0);
  std::vector<std::vector<uint32_t>> inverted(np);
  for (size_t i = 0; i < words.size(); ++i) {
    Lattice lat(words[i].first, bos_id, eos_id);
    lat.populate(m);
    const auto count = static_cast<double>(words[i].second);
    vsum += count;
    for (int32_t nd : lat.viterbi()) {
      const auto id = static_cast<size_t>(lat.node(nd).id);
      freq[id] += count;
      inverted[id].push_back(static_cast<uint32_t>(i));
    }
  }
  double sum = 0.0;
  for (double f : freq) sum += f;
  const double logsum = std::log(sum);
  std::vector<std::pair<size_t, double>> candidates;
  std::vector<Piece> out;
  out.push_back(pieces[0]);
  // The loss of removing a piece, as if its uses all went to its alternatives.
  for (size_t id = 1; id < np; ++id) {
    if (freq[id] == 0.0 && !always_keep[id]) continue;  // never on a Viterbi path
    if (alternatives[id].empty()) {
      out.push_back(pieces[id]);
      continue;
    }
    double f = 0.0;
    for (uint32_t w : inverted[id]) f += static_cast<double>(words[w].second);
    if (f == 0.0 || std::isnan(f)) continue;
    f /= vsum;
    const double logprob_sp = std::log(freq[id]) - logsum;
    // HF multiplies by the number of pieces minus one here (`alternatives.len()`
    // of the outer vector), not the alternatives' count; kept as it is.
    const double logsum_alt = std::log(sum + freq[id] * static_cast<double>(np - 1));
    double logprob_alt = 0.0;
    for (int32_t a : alternatives[id]) logprob_alt += std::log(freq[static_cast<size_t>(a)] + freq[id]) - logsum_alt;
    const double loss = f * (logprob_sp - logprob_alt);
    HYMBA_CHECK(!std::isnan(loss), "Unigram training: pruning loss is NaN for piece \"", pieces[id].first, "\"");
    candidates.push_back({id, loss});
  }
  const size_t desired = static_cast<size_t>(opt.vocab_size) * 11 / 10;
  const size_t pruned_size =
      std::max(desired, static_cast<size_t>(static_cast<double>(np) * opt.shrinking_factor));
  std::stable_sort(candidates.begin(), candidates.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  for (const auto& c : candidates) {
    if (out.size() == pruned_size) break;  // HF's test: with more kept pieces than that, all stay
    out.push_back(pieces[c.first]);
  }
  return out;
}

// trainer.rs finalize: required characters first (missing ones at the
// minimum score plus 0.0001 steps), then the model's pieces up to the
// size, sorted by score (stable), special tokens in front.
UnigramTrainResult finalize(const std::vector<Piece>& model_pieces, double min_score,
                            const std::vector<std::string>& required, const UnigramTrainerOptions& opt) {
  double penalty = 0.0;
  std::vector<Piece> pieces;
  std::unordered_set<std::string> inserted = {"<UNK>"};
  std::unordered_map<std::string, double> existing;
  for (const Piece& p : model_pieces) existing[p.first] = p.second;
  for (const std::string& c : required) {
    const auto it = existing.find(c);
    if (it != existing.end()) {
      pieces.push_back({c, it->second});
    } else {
      pieces.push_back({c, min_score + penalty});
      penalty += 0.0001;
    }
    inserted.insert(c);
  }
  UnigramTrainResult r;
  bool need_add_unk = false;
  if (opt.unk_token) {
    const auto it = std::find(opt.special_tokens.begin(), opt.special_tokens.end(), *opt.unk_token);
    need_add_unk = it == opt.special_tokens.end();
    r.unk_id = need_add_unk ? 0 : static_cast<int32_t>(it - opt.special_tokens.begin());
  }
  const size_t target = static_cast<size_t>(opt.vocab_size) - opt.special_tokens.size() - (need_add_unk ? 1 : 0);
  for (const Piece& p : model_pieces) {
    if (!inserted.insert(p.first).second) continue;
    pieces.push_back({p.first, std::isnan(p.second) ? 0.0 : p.second});
    if (pieces.size() == target) break;
  }
  std::stable_sort(pieces.begin(), pieces.end(), [](const Piece& a, const Piece& b) { return a.second > b.second; });
  if (need_add_unk) r.vocab.push_back({*opt.unk_token, 0.0});
  for (const std::string& t : opt.special_tokens) r.vocab.push_back({t, 0.0});
  r.vocab.insert(r.vocab.end(), pieces.begin(), pieces.end());
  return r;
}

}  // namespace

namespace unigram_detail {

double digamma(double x) {
  double result = 0.0;
  while (x < 7.0) {
    result -= 1.0 / x;
    x += 1.0;
  }
  x -= 0.5;
  const double xx = 1.0 / x, xx2 = xx * xx, xx4 = xx2 * xx2;
  result += std::log(x) + (1.0 / 24.0) * xx2 - 7.0 / 960.0 * xx4 + (31.0 / 8064.0) * xx4 * xx2 -
            (127.0 / 30720.0) * xx4 * xx4;
  return result;
}

std::vector<Substring> repeated_substrings(const std::vector<uint32_t>& t, size_t max_len) {
  // esaxx's suffixtree(): the LCP array (Kasai), then a stack walk that
  // reports each lcp-interval [lb, i) of width >= 2 with its depth.
  const auto n = static_cast<int64_t>(t.size());
  std::vector<Substring> out;
  if (n == 0) return out;
  const std::vector<int32_t> sa = suffix_array(t);
  std::vector<int32_t> rank(static_cast<size_t>(n)), lcp(static_cast<size_t>(n), 0);
  for (int64_t i = 0; i < n; ++i) rank[sa[i]] = static_cast<int32_t>(i);
  for (int64_t i = 0, h = 0; i < n; ++i) {
    if (rank[i] == 0) {
      h = 0;
      continue;
    }
    const int64_t j = sa[rank[i] - 1];
    while (i + h < n && j + h < n && t[i + h] == t[j + h]) ++h;
    lcp[rank[i]] = static_cast<int32_t>(h);
    if (h > 0) --h;
  }
  lcp[0] = -1;
  std::vector<std::pair<int64_t, int64_t>> stack = {{-1, -1}};
  for (int64_t i = 0;; ++i) {
    std::pair<int64_t, int64_t> cur(i, i == n ? -1 : lcp[i]);
    std::pair<int64_t, int64_t> cand = stack.back();
    while (cand.second > cur.second) {
      if (i - cand.first > 1 && static_cast<size_t>(cand.second) <= max_len) {
        const int32_t start = sa[cand.first];
        out.push_back({std::vector<uint32_t>(t.begin() + start, t.begin() + start + cand.second),
                       static_cast<uint64_t>(i - cand.first)});
      }
      cur.first = cand.first;
      stack.pop_back();
      cand = stack.back();
    }
    if (cand.second < cur.second) stack.push_back(cur);
    if (i == n) break;
    stack.push_back({i, n - sa[i] + 1});
  }
  return out;
}

std::vector<std::pair<std::string, double>> seed_pieces(const Words& words, const UnigramTrainerOptions& opt) {
  // All words in one text, each followed by U+0000.
  std::vector<uint32_t> flat;
  std::unordered_map<uint32_t, uint64_t> all_chars;
  for (const auto& [w, count] : words) {
    if (w.empty()) continue;
    for (uint32_t c : code_points(w)) {
      flat.push_back(c);
      if (c != 0) all_chars[c] += count;
    }
    flat.push_back(0);
  }
  std::vector<std::pair<uint64_t, uint32_t>> chars;
  for (const auto& [c, count] : all_chars) chars.push_back({count, c});
  std::sort(chars.begin(), chars.end(), std::greater<>());

  std::vector<std::pair<uint64_t, std::vector<uint32_t>>> subs;
  for (Substring& s : repeated_substrings(flat, static_cast<size_t>(opt.max_piece_length))) {
    if (s.chars.size() <= 1 || static_cast<int64_t>(s.chars.size()) > opt.max_piece_length) continue;
    if (std::find(s.chars.begin(), s.chars.end(), 0u) != s.chars.end()) continue;
    subs.push_back({s.freq * s.chars.size(), std::move(s.chars)});
  }
  std::sort(subs.begin(), subs.end(), std::greater<>());

  std::vector<std::pair<std::string, double>> seeds;
  for (const auto& [count, c] : chars) seeds.push_back({utf8_of(&c, 1), static_cast<double>(count)});
  for (const auto& [score, cs] : subs) {
    // HF checks the size after adding, so the characters alone may exceed it.
    seeds.push_back({utf8_of(cs.data(), cs.size()), static_cast<double>(score)});
    if (static_cast<int64_t>(seeds.size()) >= opt.seed_size) break;
  }
  // to_log_prob
  double sum = 0.0;
  for (const auto& s : seeds) sum += s.second;
  const double logsum = std::log(sum);
  for (auto& s : seeds) s.second = std::log(s.second) - logsum;
  return seeds;
}

}  // namespace unigram_detail

UnigramTrainResult train_unigram(const Words& word_counts, const UnigramTrainerOptions& opt) {
  HYMBA_CHECK(opt.vocab_size > 0, "vocab_size must be positive, got ", opt.vocab_size);
  HYMBA_CHECK(static_cast<size_t>(opt.vocab_size) >= opt.special_tokens.size() + (opt.unk_token ? 1 : 0),
              "vocab_size ", opt.vocab_size, " is smaller than the ", opt.special_tokens.size(), " special tokens");
  HYMBA_CHECK(opt.n_sub_iterations > 0 && opt.shrinking_factor > 0 && opt.shrinking_factor < 1 &&
                  opt.max_piece_length > 0 && opt.seed_size > 0,
              "Unigram trainer options out of range (n_sub_iterations, shrinking_factor, max_piece_length, seed_size)");
  // Sorted, so nothing depends on the caller's order; invalid UTF-8 is made valid.
  Words words;
  for (const auto& [w, c] : word_counts)
    if (c > 0) words.push_back({tok::is_valid_utf8(w) ? w : tok::utf8_lossy(w), c});
  std::sort(words.begin(), words.end());
  HYMBA_CHECK(!words.empty(), "Unigram training: the corpus has no words");

  std::vector<Piece> pieces = {{"<UNK>", kNaN}};
  for (auto& p : unigram_detail::seed_pieces(words, opt)) pieces.push_back(std::move(p));

  // required_chars (HF's set has no order; ours is by code point).
  std::set<uint32_t> req;
  for (const auto& wc : words)
    for (uint32_t c : code_points(wc.first)) req.insert(c);
  std::vector<std::string> required;
  for (uint32_t c : req) required.push_back(utf8_of(&c, 1));
  HYMBA_CHECK(required.size() <= static_cast<size_t>(opt.vocab_size), "vocab_size ", opt.vocab_size,
              " is too small: the corpus has ", required.size(), " distinct characters and each needs a piece");

  const size_t desired = static_cast<size_t>(opt.vocab_size) * 11 / 10;
  std::vector<Piece> model_pieces = pieces;
  auto model = std::make_unique<Model>(model_pieces);
  auto rebuild = [&] {
    model_pieces = pieces;
    model = std::make_unique<Model>(model_pieces);
  };
  for (size_t last_size = 0;;) {
    for (int32_t it = 0; it < opt.n_sub_iterations; ++it) {
      pieces = m_step(pieces, e_step(*model, words));
      rebuild();
    }
    if (pieces.size() <= desired) break;
    // HF would loop forever when a round shrinks nothing; stop there instead.
    if (pieces.size() == last_size) break;
    last_size = pieces.size();
    pieces = prune(*model, pieces, words, opt);
    rebuild();
  }
  return finalize(model_pieces, model->min_score, required, opt);
}

// A word's lattice holds up to 16 nodes per character, so one 50 MB "word" (a
// line with no spaces) would need gigabytes. Words longer than this many
// bytes are counted as pieces of it (cut at character boundaries), as the
// byte-level BPE trainer does; ordinary text has no such words.
constexpr size_t kMaxTrainedWordBytes = 8192;

std::vector<std::pair<std::string, uint64_t>> hf_unigram_word_counts(const std::vector<std::string>& sequences) {
  const auto normalizer = tok::make_normalizer(
      nlohmann::json::parse(R"({"type":"Sequence","normalizers":[{"type":"NFKC"},{"type":"Lowercase"}]})"),
      "hf-unigram normalizer");
  const auto pre = tok::make_pre_tokenizer(nlohmann::json::parse(R"({"type":"Whitespace"})"), "hf-unigram pre_tokenizer");
  std::unordered_map<std::string, uint64_t> counts;
  for (const std::string& seq : sequences) {
    const std::string valid = tok::is_valid_utf8(seq) ? std::string() : tok::utf8_lossy(seq);
    tok::NormalizedString ns(valid.empty() ? std::string_view(seq) : std::string_view(valid));
    normalizer->normalize(ns);
    tok::PreTokenized pieces;
    pieces.push_back({std::move(ns), -1});
    pre->pre_tokenize(pieces);
    for (const tok::PreToken& p : pieces) {
      const std::string& w = p.text.text();
      for (size_t at = 0; at < w.size();) {
        size_t end = std::min(w.size(), at + kMaxTrainedWordBytes);
        while (end < w.size() && end > at + 1 && (static_cast<unsigned char>(w[end]) & 0xC0) == 0x80) --end;
        ++counts[w.substr(at, end - at)];
        at = end;
      }
    }
  }
  return {counts.begin(), counts.end()};
}

std::vector<std::string> hf_unigram_sequences(const std::vector<std::string>& documents) {
  constexpr size_t kChunkChars = 1000000;
  std::vector<std::string> out;
  for (const std::string& d : documents) {
    size_t start = 0, chars = 0;
    for (size_t i = 0; i < d.size(); i += tok::char_len(d, i)) {
      if (chars == kChunkChars) {
        out.push_back(d.substr(start, i - start));
        start = i;
        chars = 0;
      }
      ++chars;
    }
    if (start < d.size()) out.push_back(d.substr(start));
  }
  return out;
}

UnigramTrainResult train_hf_unigram(const std::vector<std::string>& sequences, const HfUnigramOptions& opt) {
  UnigramTrainerOptions t;
  t.vocab_size = opt.vocab_size;
  t.special_tokens = opt.special_tokens;
  UnigramTrainResult r = train_unigram(hf_unigram_word_counts(sequences), t);
  if (r.vocab.size() < static_cast<size_t>(opt.vocab_size))
    std::fprintf(stderr, "hf-unigram: the corpus gives %zu tokens, fewer than vocab_size %d (Hugging Face's trainer returns fewer too)\n",
                 r.vocab.size(), opt.vocab_size);
  return r;
}

std::string hf_unigram_tokenizer_json(const UnigramTrainResult& r, const HfUnigramOptions& opt) {
  json added = json::array();
  for (size_t i = 0; i < opt.special_tokens.size() && i < r.vocab.size(); ++i)
    added.push_back({{"id", i}, {"content", opt.special_tokens[i]}, {"single_word", false}, {"lstrip", false},
                     {"rstrip", false}, {"normalized", false}, {"special", true}});
  const json normalizer = {{"type", "Sequence"}, {"normalizers", {{{"type", "NFKC"}}, {{"type", "Lowercase"}}}}};
  const json pre = {{"type", "Whitespace"}};
  // The seed's TemplateProcessing: "<bos> $A <eos>", pair "<bos> $A <eos> $B:1 <eos>:1".
  json post = nullptr;
  if (opt.special_tokens.size() >= 3 && r.vocab.size() >= 3) {
    const std::string& bos = opt.special_tokens[1];
    const std::string& eos = opt.special_tokens[2];
    auto special = [](const std::string& t, int type) { return json{{"SpecialToken", {{"id", t}, {"type_id", type}}}}; };
    auto seq = [](const char* id, int type) { return json{{"Sequence", {{"id", id}, {"type_id", type}}}}; };
    post = {{"type", "TemplateProcessing"},
            {"single", {special(bos, 0), seq("A", 0), special(eos, 0)}},
            {"pair", {special(bos, 0), seq("A", 0), special(eos, 0), seq("B", 1), special(eos, 1)}},
            {"special_tokens",
             {{bos, {{"id", bos}, {"ids", {1}}, {"tokens", {bos}}}}, {eos, {{"id", eos}, {"ids", {2}}, {"tokens", {eos}}}}}}};
  }
  // Written by hand in HF's field order: a json array of tens of thousands of
  // pairs is slow to build.
  std::string s = "{\n  \"version\": \"1.0\",\n  \"truncation\": null,\n  \"padding\": null,\n";
  s += "  \"added_tokens\": " + added.dump() + ",\n";
  s += "  \"normalizer\": " + normalizer.dump() + ",\n";
  s += "  \"pre_tokenizer\": " + pre.dump() + ",\n";
  s += "  \"post_processor\": " + post.dump() + ",\n  \"decoder\": null,\n";
  s += "  \"model\": {\n    \"type\": \"Unigram\",\n    \"unk_id\": ";
  s += r.unk_id ? std::to_string(*r.unk_id) : std::string("null");
  s += ",\n    \"vocab\": [";
  for (size_t i = 0; i < r.vocab.size(); ++i)
    s += std::string(i ? "," : "") + "\n      [" + json(r.vocab[i].first).dump() + ", " + json(r.vocab[i].second).dump() +
         "]";
  s += "\n    ],\n    \"byte_fallback\": false\n  }\n}\n";
  return s;
}

std::string hf_unigram_tokenizer_config(const HfUnigramOptions& opt) {
  json j = json::object();
  const char* keys[] = {"pad_token", "bos_token", "eos_token"};
  for (size_t i = 0; i < 3 && i < opt.special_tokens.size(); ++i) j[keys[i]] = opt.special_tokens[i];
  j["add_bos_token"] = false;
  j["tokenizer_class"] = "PreTrainedTokenizerFast";
  return j.dump(2) + "\n";
}

std::unique_ptr<Tokenizer> train_hf_unigram_tokenizer(const std::vector<std::string>& documents,
                                                       const HfUnigramOptions& opt) {
  const UnigramTrainResult r = train_hf_unigram(hf_unigram_sequences(documents), opt);
  return make_hf_tokenizer_json("trained hf-unigram tokenizer.json", hf_unigram_tokenizer_json(r, opt),
                                hf_unigram_tokenizer_config(opt));
}

}  // namespace hymba
