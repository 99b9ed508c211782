#include "synth/tasks.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "core/error.h"
#include "core/rng.h"
#include "kernels/cpu/cross_entropy.h"
#include "synth/settings_json.h"

namespace hymba::synth {

using nlohmann::json;

namespace {

constexpr int32_t kIgnore = cpu::kIgnoreIndex;

struct TaskName {
  TaskKind kind;
  const char* name;
};
constexpr TaskName kTaskNames[] = {
    {TaskKind::kInContextRecall, "in-context-recall"}, {TaskKind::kNoisyRecall, "noisy-recall"},
    {TaskKind::kFuzzyRecall, "fuzzy-recall"},          {TaskKind::kSelectiveCopying, "selective-copying"},
    {TaskKind::kCompression, "compression"},           {TaskKind::kMemorization, "memorization"},
    {TaskKind::kMqar, "mqar"},                         {TaskKind::kInductionHeads, "induction-heads"},
};

int32_t draw(Rng& r, int64_t lo, int64_t count) {
  return static_cast<int32_t>(lo + static_cast<int64_t>(r.below(static_cast<uint64_t>(count))));
}

// k distinct values from [lo, lo + count), in draw order (partial Fisher-Yates).
std::vector<int32_t> draw_distinct(Rng& r, int64_t lo, int64_t count, int64_t k) {
  std::vector<int32_t> pool(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) pool[static_cast<size_t>(i)] = static_cast<int32_t>(lo + i);
  for (int64_t i = 0; i < k; ++i) std::swap(pool[static_cast<size_t>(i)], pool[static_cast<size_t>(draw(r, i, count - i))]);
  pool.resize(static_cast<size_t>(k));
  return pool;
}

// A sequence of L + 1 tokens becomes input seq[:-1] and target seq[1:];
// `scored` marks the sequence positions whose token is a scored target (the
// target of input position t is seq[t+1]).
void shift_into(Dataset& d, int64_t i, const std::vector<int32_t>& seq, const std::vector<bool>& scored) {
  int32_t* in = d.inputs.data() + i * d.seq;
  int32_t* tg = d.targets.data() + i * d.seq;
  for (int64_t t = 0; t < d.seq; ++t) {
    in[t] = seq[static_cast<size_t>(t)];
    tg[t] = scored[static_cast<size_t>(t + 1)] ? seq[static_cast<size_t>(t + 1)] : kIgnore;
  }
}

// MAD in-context recall, and its noisy variant when noise > 0. Multi-query
// (MAD's default): keys 0..K-1 and values K..2K-1 of the V (minus noise)
// tokens. Single query: the top token is the copy prefix, placed before the
// final probe, and at test only the probe's value is scored.
void recall_example(const TaskSpec& s, Rng& r, bool test, Dataset& d, int64_t i) {
  const bool noisy = s.kind == TaskKind::kNoisyRecall, multi = s.multi_query;
  const int64_t kv = s.vocab_size - (multi ? 0 : 1) - (noisy ? s.noise_vocab_size : 0), nkeys = kv / 2;
  const int64_t pairs = s.seq_len / 2;
  std::vector<int32_t> seq;
  std::vector<bool> answer;
  std::map<int32_t, int32_t> value_of;
  std::vector<int32_t> presented;  // keys in order of first appearance
  // The slot never replaced by noise. MAD draws it from all L/2 slots, the
  // final probe's included, and then fails when every other slot is noise;
  // here it is one of the L/2 - 1 replaceable slots, so a key always precedes the probe.
  const int64_t kept = noisy ? draw(r, 0, pairs - 1) : -1;
  for (int64_t p = 0; p + 1 < pairs; ++p) {
    if (noisy && p != kept && r.uniform_double() < s.frac_noise) {
      for (int k = 0; k < 2; ++k) seq.push_back(draw(r, kv, s.noise_vocab_size));
      answer.insert(answer.end(), 2, false);
      continue;
    }
    const int32_t key = draw(r, 0, nkeys);
    const bool repeated = value_of.count(key) != 0;
    if (!repeated) {
      value_of[key] = draw(r, nkeys, kv - nkeys);
      presented.push_back(key);
    }
    seq.push_back(key);
    seq.push_back(value_of[key]);
    answer.push_back(false);
    answer.push_back(repeated && multi);
  }
  if (!multi) {
    seq.push_back(static_cast<int32_t>(s.vocab_size - 1));  // copy prefix
    answer.push_back(false);
  }
  const int32_t probe = presented[r.below(presented.size())];
  seq.push_back(probe);
  seq.push_back(value_of[probe]);
  answer.push_back(false);
  answer.push_back(true);
  // Training (MAD) scores every next token, noise included: its targets are
  // the shifted inputs. Test: only the answers.
  if (!test && s.train_scores_all) answer.assign(answer.size(), true);
  shift_into(d, i, seq, answer);
}

// MAD fuzzy in-context recall: keys and values are tuples of tokens. Pad is
// V-1 (multi-query) or V-2 with the copy prefix V-1 (single query).
void fuzzy_example(const TaskSpec& s, Rng& r, bool test, Dataset& d, int64_t i) {
  const bool multi = s.multi_query;
  const int64_t special = multi ? 1 : 2;
  const int32_t pad = static_cast<int32_t>(s.vocab_size - special);
  const int64_t nkeys = (s.vocab_size - special) / 2, nvals = s.vocab_size - special - nkeys;
  using Tuple = std::vector<int32_t>;
  auto key_tuple = [&] {
    const int64_t len = test ? s.max_key_len : 1 + draw(r, 0, s.max_key_len);
    return draw_distinct(r, 0, nkeys, len);
  };
  auto value_tuple = [&] { return draw_distinct(r, nkeys, nvals, 1 + draw(r, 0, s.max_value_len)); };
  std::map<Tuple, Tuple> value_of;
  const Tuple probe_key = key_tuple();
  value_of[probe_key] = value_tuple();
  const int64_t probe_len = static_cast<int64_t>(probe_key.size() + value_of[probe_key].size());
  // The probe goes in once and again at the end (after the copy prefix when single-query).
  const int64_t budget = s.seq_len + 1 - 2 * probe_len - (multi ? 0 : 1);
  std::vector<Tuple> keys;
  int64_t used = 0;
  for (;;) {
    Tuple k = key_tuple();
    if (!value_of.count(k)) value_of[k] = value_tuple();
    const int64_t len = static_cast<int64_t>(k.size() + value_of[k].size());
    if (used + len > budget) break;
    used += len;
    keys.push_back(std::move(k));
  }
  keys.insert(keys.begin() + draw(r, 0, static_cast<int64_t>(keys.size()) + 1), probe_key);
  std::vector<int32_t> seq(static_cast<size_t>(budget - used), pad);  // left padding
  std::vector<bool> answer(seq.size(), false);
  std::set<Tuple> seen;
  auto append = [&](const Tuple& k, bool final_probe) {
    const bool repeated = !seen.insert(k).second;
    seq.insert(seq.end(), k.begin(), k.end());
    answer.insert(answer.end(), k.size(), false);
    const Tuple& v = value_of[k];
    seq.insert(seq.end(), v.begin(), v.end());
    answer.insert(answer.end(), v.size(), final_probe || (repeated && multi));
  };
  for (const Tuple& k : keys) append(k, false);
  if (!multi) {
    seq.push_back(static_cast<int32_t>(s.vocab_size - 1));
    answer.push_back(false);
  }
  append(probe_key, true);
  // Training (MAD): every next token, the left padding included.
  if (!test && s.train_scores_all) answer.assign(answer.size(), true);
  shift_into(d, i, seq, answer);
}

// MAD selective copying: the n data tokens come first and each of the
// L-2n-1 blanks is inserted before a data token drawn uniformly (np.insert at
// an index in 0..n-1), so the blanks before token j number as many as drew j
// and no blank follows the last data token; then the copy token, n blanks.
void selective_copy_example(const TaskSpec& s, Rng& r, Dataset& d, int64_t i) {
  const int64_t L = s.seq_len, n = s.num_tokens_to_copy, blanks = L - 2 * n - 1;
  const int32_t blank = static_cast<int32_t>(s.vocab_size - 2), copy = static_cast<int32_t>(s.vocab_size - 1);
  int32_t* in = d.inputs.data() + i * L;
  int32_t* tg = d.targets.data() + i * L;
  std::fill(in, in + L, blank);
  std::fill(tg, tg + L, kIgnore);
  std::vector<int64_t> before(static_cast<size_t>(n), 0);
  for (int64_t b = 0; b < blanks; ++b) ++before[static_cast<size_t>(draw(r, 0, n))];
  int64_t t = 0;
  for (int64_t j = 0; j < n; ++j) {
    t += before[static_cast<size_t>(j)];
    const int32_t tok = draw(r, 0, s.vocab_size - 2);
    in[t++] = tok;
    tg[L - n + j] = tok;
  }
  in[L - n - 1] = copy;
}

void compression_example(const TaskSpec& s, Rng& r, Dataset& d, int64_t i) {
  const int64_t L = s.seq_len;
  int32_t* in = d.inputs.data() + i * L;
  int32_t* tg = d.targets.data() + i * L;
  for (int64_t t = 0; t + 1 < L; ++t) in[t] = draw(r, 0, s.vocab_size - 1);
  in[L - 1] = static_cast<int32_t>(s.vocab_size - 1);
  std::copy(in, in + L, tg);  // reconstruct everything, the compression token included
}

// The fixed fact table, one-to-one as MAD's (shuffled keys zipped with
// shuffled values): keys [0, K) -> distinct values of [K, V-1), K = (V-1)/2;
// the insert token is V-1 (V=256: keys 0-126, values 127-254, insert 255).
std::vector<int32_t> memorization_table(const TaskSpec& s) {
  const int64_t K = (s.vocab_size - 1) / 2;
  Rng r(s.memorization_seed);
  return draw_distinct(r, K, s.vocab_size - 1 - K, K);
}

void memorization_example(const TaskSpec& s, const std::vector<int32_t>& table, Rng& r, Dataset& d, int64_t i) {
  const int64_t K = static_cast<int64_t>(table.size());
  int32_t* in = d.inputs.data() + i * s.seq_len;
  int32_t* tg = d.targets.data() + i * s.seq_len;
  for (int64_t t = 0; t < s.seq_len; t += 2) {
    const int32_t key = draw(r, 0, K);
    in[t] = key;
    in[t + 1] = static_cast<int32_t>(s.vocab_size - 1);
    tg[t] = kIgnore;
    tg[t + 1] = table[static_cast<size_t>(key)];
  }
}

// Zoology MQAR: (k1 v1 ... kN vN) num_passes times, then each key once at an
// even offset of the query region; the target at a query is the key's value.
// Every other slot is 0, or with random_non_queries a token drawn from the
// whole vocabulary, so keys also turn up unscored (distractors).
void mqar_example(const TaskSpec& s, Rng& r, Dataset& d, int64_t i) {
  const int64_t L = s.seq_len, N = s.num_kv_pairs, half = s.vocab_size / 2, ctx = 2 * N * s.num_passes;
  int32_t* in = d.inputs.data() + i * L;
  int32_t* tg = d.targets.data() + i * L;
  std::fill(in, in + L, 0);
  std::fill(tg, tg + L, kIgnore);
  const std::vector<int32_t> keys = draw_distinct(r, 1, half - 1, N);
  const std::vector<int32_t> values = draw_distinct(r, half, s.vocab_size - half, N);
  for (int64_t pass = 0; pass < s.num_passes; ++pass)
    for (int64_t p = 0; p < N; ++p) {
      in[pass * 2 * N + 2 * p] = keys[static_cast<size_t>(p)];
      in[pass * 2 * N + 2 * p + 1] = values[static_cast<size_t>(p)];
    }
  // Gaps without replacement, p(g) ~ (g+1)^(a-1): near queries are likelier.
  const int64_t slots = (L - ctx) / 2;
  std::vector<double> w(static_cast<size_t>(slots));
  for (int64_t g = 0; g < slots; ++g) w[static_cast<size_t>(g)] = std::pow(g + 1.0, s.mqar_power_a - 1.0);
  std::vector<bool> query(static_cast<size_t>(L), false);
  for (int64_t p = 0; p < N; ++p) {
    double total = 0;
    for (double x : w) total += x;
    double u = r.uniform_double() * total;
    int64_t g = -1;
    for (int64_t c = 0; c < slots; ++c) {
      const double wc = w[static_cast<size_t>(c)];
      if (wc == 0) continue;
      g = c;  // the last free slot also catches rounding at the end
      if (u < wc) break;
      u -= wc;
    }
    w[static_cast<size_t>(g)] = 0;
    const int64_t pos = ctx + 2 * g;
    in[pos] = keys[static_cast<size_t>(p)];
    tg[pos] = values[static_cast<size_t>(p)];
    query[static_cast<size_t>(pos)] = true;
  }
  if (s.random_non_queries)
    for (int64_t t = ctx; t < L; ++t)
      if (!query[static_cast<size_t>(t)]) in[t] = draw(r, 0, s.vocab_size);
}

// Mamba paper induction heads: a special token somewhere, the token after it,
// and the special token again at the end, where that token must be recalled.
void induction_example(const TaskSpec& s, Rng& r, Dataset& d, int64_t i) {
  const int64_t L = s.seq_len;
  const int32_t special = static_cast<int32_t>(s.vocab_size - 1);
  int32_t* in = d.inputs.data() + i * L;
  int32_t* tg = d.targets.data() + i * L;
  for (int64_t t = 0; t < L; ++t) in[t] = draw(r, 0, s.vocab_size - 1);
  std::fill(tg, tg + L, kIgnore);
  const int64_t p = draw(r, 0, L - 2);
  in[p] = special;
  in[L - 1] = special;
  tg[L - 1] = in[p + 1];
}

std::string str(int64_t v) { return std::to_string(v); }

}  // namespace

const char* to_string(TaskKind k) {
  for (const TaskName& t : kTaskNames)
    if (t.kind == k) return t.name;
  return "?";
}

const std::vector<std::string>& task_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (const TaskName& t : kTaskNames) v.emplace_back(t.name);
    return v;
  }();
  return names;
}

TaskKind parse_task(const std::string& name) {
  for (const TaskName& t : kTaskNames)
    if (name == t.name) return t.kind;
  std::string all;
  for (const std::string& n : task_names()) all += (all.empty() ? "" : ", ") + n;
  fail("--task: unknown task '", name, "' (one of ", all, ")");
}

int64_t input_length(const TaskSpec& s) {
  // Multi-query recall shifts L tokens; single-query recall adds the copy prefix, so L + 1 tokens shift to L.
  const bool recall = s.kind == TaskKind::kInContextRecall || s.kind == TaskKind::kNoisyRecall;
  return recall && s.multi_query ? s.seq_len - 1 : s.seq_len;
}

void TaskSpec::validate() const {
  const int64_t V = vocab_size, L = seq_len;
  need(L >= 2 && L <= (1 << 20), "--seq-len", "must be in 2..1048576 (got " + str(L) + ")");
  need(V >= 2 && V <= (1 << 24), "--vocab-size", "must be in 2..16777216 (got " + str(V) + ")");
  switch (kind) {
    case TaskKind::kInContextRecall:
    case TaskKind::kNoisyRecall: {
      const bool noisy = kind == TaskKind::kNoisyRecall;
      if (noisy) {
        need(noise_vocab_size >= 1, "--noise-vocab-size", "must be >= 1 (got " + str(noise_vocab_size) + ")");
        need(frac_noise >= 0 && frac_noise <= 1, "--frac-noise", "must be in [0, 1]");
      }
      const int64_t kv = V - (multi_query ? 0 : 1) - (noisy ? noise_vocab_size : 0);
      need(kv >= 2, "--vocab-size", "leaves " + str(kv) + " key/value tokens" +
                                        (noisy ? " after the noise tokens" : std::string()) +
                                        (multi_query ? "" : " and the copy prefix") + "; needs >= 2");
      need(L >= 4 && L % 2 == 0, "--seq-len", "must be even and >= 4 for key-value pairs (got " + str(L) + ")");
      break;
    }
    case TaskKind::kFuzzyRecall: {
      need(max_key_len >= 1, "--max-key-len", "must be >= 1");
      need(max_value_len >= 1, "--max-value-len", "must be >= 1");
      const int64_t special = multi_query ? 1 : 2;  // pad (and the single-query copy prefix)
      const int64_t nkeys = (V - special) / 2, nvals = V - special - nkeys;
      need(nkeys >= max_key_len, "--vocab-size",
           str(V) + " gives " + str(nkeys) + " key tokens, fewer than --max-key-len " + str(max_key_len));
      need(nvals >= max_value_len, "--vocab-size",
           str(V) + " gives " + str(nvals) + " value tokens, fewer than --max-value-len " + str(max_value_len));
      const int64_t least = 3 * (max_key_len + max_value_len) - 1 + (special - 1);
      need(L >= least, "--seq-len", "must be >= 3 x (max key + value length) - 1" +
                                        std::string(multi_query ? "" : " + 1 (copy prefix)") + " = " + str(least));
      break;
    }
    case TaskKind::kSelectiveCopying:
      need(num_tokens_to_copy >= 1, "--num-tokens-to-copy", "must be >= 1 (got " + str(num_tokens_to_copy) + ")");
      // MAD: L > 2n+1, so at least one blank goes between the data tokens.
      need(2 * num_tokens_to_copy + 1 < L, "--num-tokens-to-copy",
           str(num_tokens_to_copy) + " tokens need --seq-len > 2 x tokens + 1 = " + str(2 * num_tokens_to_copy + 1) +
               " (got " + str(L) + ")");
      need(V >= 3, "--vocab-size", "must be >= 3 (data tokens, blank, copy token; got " + str(V) + ")");
      break;
    case TaskKind::kCompression:
      break;
    case TaskKind::kMemorization:
      need(V >= 3, "--vocab-size", "must be >= 3 (keys, values, insert token; got " + str(V) + ")");
      need(L % 2 == 0, "--seq-len", "must be even ([key, insert] pairs; got " + str(L) + ")");
      break;
    case TaskKind::kMqar:
      need(num_kv_pairs >= 1, "--num-kv-pairs", "must be >= 1 (got " + str(num_kv_pairs) + ")");
      need(V / 2 - 1 >= num_kv_pairs, "--vocab-size",
           str(V) + " has " + str(std::max<int64_t>(V / 2 - 1, 0)) + " keys, fewer than --num-kv-pairs " +
               str(num_kv_pairs));
      need(num_passes >= 1 && num_passes <= 64, "--num-passes", "must be in 1..64 (got " + str(num_passes) + ")");
      // Zoology's asserts: L even, V > L, and room for the context and one query slot per key.
      need(L % 2 == 0, "--seq-len", "must be even (got " + str(L) + ")");
      need(V > L, "--vocab-size", "must be > --seq-len " + str(L) + " (Zoology's rule; got " + str(V) + ")");
      need(L >= 2 * num_kv_pairs * (num_passes + 1), "--seq-len",
           "must be >= 2 x --num-kv-pairs x (--num-passes + 1) = " + str(2 * num_kv_pairs * (num_passes + 1)) +
               " (got " + str(L) + ")");
      need(mqar_power_a > 0 && mqar_power_a <= 1, "--mqar-power-a", "must be in (0, 1]");
      break;
    case TaskKind::kInductionHeads:
      need(L >= 3, "--seq-len", "must be >= 3 (got " + str(L) + ")");
      need(V >= 2, "--vocab-size", "must be >= 2");
      break;
  }
}

json TaskSpec::to_json() const {
  return {{"task", to_string(kind)},
          {"vocab_size", vocab_size},
          {"seq_len", seq_len},
          {"num_tokens_to_copy", num_tokens_to_copy},
          {"noise_vocab_size", noise_vocab_size},
          {"frac_noise", frac_noise},
          {"max_key_len", max_key_len},
          {"max_value_len", max_value_len},
          {"num_kv_pairs", num_kv_pairs},
          {"mqar_power_a", mqar_power_a},
          {"num_passes", num_passes},
          {"random_non_queries", random_non_queries},
          {"memorization_seed", memorization_seed},
          {"multi_query", multi_query},
          {"train_scores_all", train_scores_all}};
}

std::string TaskSpec::summary() const {
  std::string s = std::string(to_string(kind)) + " V=" + str(vocab_size) + " L=" + str(seq_len);
  switch (kind) {
    case TaskKind::kInContextRecall: break;
    case TaskKind::kNoisyRecall:
      s += ", " + str(noise_vocab_size) + " noise tokens at p=" + std::to_string(frac_noise).substr(0, 4);
      break;
    case TaskKind::kFuzzyRecall: s += ", keys <= " + str(max_key_len) + ", values <= " + str(max_value_len); break;
    case TaskKind::kSelectiveCopying: s += ", " + str(num_tokens_to_copy) + " to copy"; break;
    case TaskKind::kCompression: break;
    case TaskKind::kMemorization: s += ", table seed " + std::to_string(memorization_seed); break;
    case TaskKind::kMqar:
      s += ", " + str(num_kv_pairs) + " pairs";
      if (num_passes > 1) s += " x " + str(num_passes) + " passes";
      s += random_non_queries ? ", random non-queries" : ", non-queries 0";
      break;
    case TaskKind::kInductionHeads: break;
  }
  if (kind == TaskKind::kInContextRecall || kind == TaskKind::kNoisyRecall || kind == TaskKind::kFuzzyRecall) {
    if (!multi_query) s += ", single query";
    if (!train_scores_all) s += ", training scores answers only";
  }
  return s;
}

TaskSpec TaskSpec::from_json(const json& j, const TaskSpec& base, const std::string& source) {
  TaskSpec s = base;
  JsonFields f(j, source);
  std::string task = to_string(s.kind);
  f.get("task", task);
  s.kind = parse_task(task);
  f.get("vocab_size", s.vocab_size);
  f.get("seq_len", s.seq_len);
  f.get("num_tokens_to_copy", s.num_tokens_to_copy);
  f.get("noise_vocab_size", s.noise_vocab_size);
  f.get("frac_noise", s.frac_noise);
  f.get("max_key_len", s.max_key_len);
  f.get("max_value_len", s.max_value_len);
  f.get("num_kv_pairs", s.num_kv_pairs);
  f.get("mqar_power_a", s.mqar_power_a);
  f.get("num_passes", s.num_passes);
  f.get("random_non_queries", s.random_non_queries);
  f.get("memorization_seed", s.memorization_seed);
  f.get("multi_query", s.multi_query);
  f.get("train_scores_all", s.train_scores_all);
  f.reject_unknown();
  return s;
}

int64_t Dataset::scored() const {
  return static_cast<int64_t>(std::count_if(targets.begin(), targets.end(), [](int32_t t) { return t != kIgnore; }));
}

Dataset generate(const TaskSpec& s, int64_t n, uint64_t seed, bool test) {
  s.validate();
  HYMBA_CHECK(n >= 1, "synth: a data set needs at least one example (got ", n, ")");
  Dataset d;
  d.n = n;
  d.seq = input_length(s);
  d.inputs.assign(static_cast<size_t>(n * d.seq), 0);
  d.targets.assign(static_cast<size_t>(n * d.seq), kIgnore);
  const std::vector<int32_t> table = s.kind == TaskKind::kMemorization ? memorization_table(s) : std::vector<int32_t>{};
  const Rng base(seed);
  for (int64_t i = 0; i < n; ++i) {
    Rng r = base.split(static_cast<uint64_t>(i));  // one stream per example: order-free and reproducible
    switch (s.kind) {
      case TaskKind::kInContextRecall:
      case TaskKind::kNoisyRecall: recall_example(s, r, test, d, i); break;
      case TaskKind::kFuzzyRecall: fuzzy_example(s, r, test, d, i); break;
      case TaskKind::kSelectiveCopying: selective_copy_example(s, r, d, i); break;
      case TaskKind::kCompression: compression_example(s, r, d, i); break;
      case TaskKind::kMemorization: memorization_example(s, table, r, d, i); break;
      case TaskKind::kMqar: mqar_example(s, r, d, i); break;
      case TaskKind::kInductionHeads: induction_example(s, r, d, i); break;
    }
  }
  return d;
}

const std::vector<TaskPreset>& task_presets() {
  static const std::vector<TaskPreset> presets = [] {
    auto spec = [](TaskKind k, int64_t V, int64_t L) {
      TaskSpec s;
      s.kind = k;
      s.vocab_size = V;
      s.seq_len = L;
      return s;
    };
    // MAD's train.py / MADConfig: batch 128, 200 epochs, AdamW lr 5e-4 with
    // cosine annealing per epoch to 1e-6, weight decay 0, no gradient
    // clipping, early stop once the (macro-averaged) test accuracy reaches 0.999.
    auto mad = [](int64_t num_train) {
      return json{{"num_train", num_train}, {"num_test", 1280},   {"epochs", 200},        {"batch_size", 128},
                  {"lr", 5e-4},             {"weight_decay", 0.0}, {"schedule", "cosine"}, {"grad_clip", 0.0},
                  {"stop_at_acc", 0.999},   {"stop_metric", "macro"}};
    };
    std::vector<TaskPreset> p;
    p.push_back({"mad-in-context-recall", "MAD baseline: V=16, L=128", spec(TaskKind::kInContextRecall, 16, 128),
                 mad(12800)});
    TaskSpec noisy = spec(TaskKind::kNoisyRecall, 32, 128);
    p.push_back({"mad-noisy-recall", "MAD baseline: V=32 (16 noise), L=128, noise 0.2", noisy, mad(12800)});
    p.push_back({"mad-fuzzy-recall", "MAD baseline: V=16, L=128, keys/values of 1-3 tokens",
                 spec(TaskKind::kFuzzyRecall, 16, 128), mad(12800)});
    TaskSpec copy = spec(TaskKind::kSelectiveCopying, 16, 256);
    copy.num_tokens_to_copy = 16;
    p.push_back({"mad-selective-copying", "MAD baseline: V=16, L=256, 16 tokens to copy", copy, mad(12800)});
    p.push_back({"mad-compression", "MAD baseline: V=16, L=32", spec(TaskKind::kCompression, 16, 32), mad(12800)});
    p.push_back({"mad-memorization", "MAD baseline: V=256, L=32, 256 training examples",
                 spec(TaskKind::kMemorization, 256, 32), mad(256)});
    // Zoology's first MQAR setting (train L 64 with 4 pairs); its test sets
    // hold more pairs than training, here one of them: 8 pairs at L 64.
    TaskSpec mqar = spec(TaskKind::kMqar, 8192, 64);
    mqar.num_kv_pairs = 4;
    p.push_back({"mqar", "Zoology MQAR: V=8192, L=64, 4 pairs (test: 8 pairs), random non-queries", mqar,
                 json{{"num_train", 100000}, {"num_test", 1000}, {"test_num_kv_pairs", 8}}});
    p.push_back({"induction-heads", "Mamba paper: V=16, L=256", spec(TaskKind::kInductionHeads, 16, 256),
                 json{{"num_train", 12800}, {"num_test", 1280}}});
    // Seed 004's command lines: 50 epochs of batch 8 (copying), 20 of batch 32 (recall), lr 5e-4.
    TaskSpec seed_copy = spec(TaskKind::kSelectiveCopying, 16, 20);
    seed_copy.num_tokens_to_copy = 5;
    p.push_back({"seed004-selective-copying", "seed 004: V=16, L=20, 5 tokens to copy", seed_copy,
                 json{{"num_train", 4000}, {"num_test", 200}, {"epochs", 50}, {"batch_size", 8}, {"lr", 5e-4}}});
    p.push_back({"seed004-in-context-recall", "seed 004: V=16, L=64", spec(TaskKind::kInContextRecall, 16, 64),
                 json{{"num_train", 4096}, {"num_test", 256}, {"epochs", 20}, {"batch_size", 32}, {"lr", 5e-4}}});
    return p;
  }();
  return presets;
}

const TaskPreset& find_task_preset(const std::string& name) {
  for (const TaskPreset& p : task_presets())
    if (p.name == name) return p;
  std::string all;
  for (const TaskPreset& p : task_presets()) all += (all.empty() ? "" : ", ") + p.name;
  fail("--preset: unknown task preset '", name, "' (one of ", all, ")");
}

}  // namespace hymba::synth
