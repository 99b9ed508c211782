#include "ablate/repeats.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>

#include "report/report_kit.h"
#include "core/atomic_file.h"
#include "core/error.h"

namespace hymba::ablate {

uint64_t repeat_seed(uint64_t base, int64_t repeat) { return base + static_cast<uint64_t>(repeat); }

std::string repeat_run_name(const std::string& id, int64_t repeat) {
  return repeat == 0 ? id : id + ".rep" + std::to_string(repeat);
}

std::string run_key(const std::string& id, int64_t repeat) { return id + "#" + std::to_string(repeat); }

namespace {

struct MetricDef {
  const char* name;
  bool lower_is_better;
  std::optional<double> (*get)(const RowResult&);
};

const std::vector<MetricDef>& metric_defs() {
  static const std::vector<MetricDef> defs = {
      {"best_val_loss", true, [](const RowResult& r) -> std::optional<double> { return r.best_val_loss; }},
      {"best_val_ppl", true, [](const RowResult& r) -> std::optional<double> { return r.best_val_ppl; }},
      {"final_val_loss", true, [](const RowResult& r) -> std::optional<double> { return r.final_val_loss; }},
      {"final_val_ppl", true, [](const RowResult& r) -> std::optional<double> { return r.final_val_ppl; }},
      {"val_accuracy", false, [](const RowResult& r) -> std::optional<double> { return r.final_val_accuracy; }},
      {"train_tok_s", false, [](const RowResult& r) -> std::optional<double> { return r.train_tokens_per_s; }},
      {"decode_tok_s", false, [](const RowResult& r) -> std::optional<double> { return r.decode_tokens_per_s; }},
      {"decode_tok_s", false, [](const RowResult& r) -> std::optional<double> { return r.decode_tokens_per_s; }},
      // Lower = more of the mixing on the SSM side.
      {"attention_mixing", true, [](const RowResult& r) { return r.mean_attention_mixing(); }},
      {"activation_peak_mb", true, [](const RowResult& r) -> std::optional<double> { return r.activation_peak_mb; }},
      {"peak_rss_mb", true, [](const RowResult& r) -> std::optional<double> { return r.peak_rss_mb; }},
  };
  return defs;
}

const MetricDef& metric_def(const std::string& metric) {
  for (const MetricDef& d : metric_defs())
    if (metric == d.name) return d;
  std::string names;
  for (const MetricDef& d : metric_defs()) names += (names.empty() ? "" : ", ") + std::string(d.name);
  fail("unknown metric '", metric, "' (known: ", names, ")");
}

Spread spread_by(const std::vector<RowResult>& runs, const std::string& metric) {
  std::vector<double> xs;
  for (const RowResult& r : runs)
    if (const auto v = run_metric(r, metric)) xs.push_back(*v);
  return spread_of(xs);
}

// A value of every curve point (nullopt: the point has none), over the runs
// at each step.
template <typename ValueOf>
std::vector<CurveBand> curve_band(const std::vector<RowResult>& runs, ValueOf value_of) {
  std::map<int64_t, std::vector<double>> by_step;
  for (const RowResult& r : runs)
    for (const CurvePoint& p : r.curve)
      if (const std::optional<double> v = value_of(p)) by_step[p.step].push_back(*v);
  std::vector<CurveBand> band;
  for (const auto& [step, xs] : by_step) {
    const Spread s = spread_of(xs);
    band.push_back({step, s.n, s.mean, s.min, s.max, s.sd});
  }
  return band;
}

std::vector<CurveBand> curve_band(const std::vector<RowResult>& runs) {
  return curve_band(runs, [](const CurvePoint& p) -> std::optional<double> { return p.val_loss; });
}

std::vector<CurveBand> mixing_band(const std::vector<RowResult>& runs) {
  return curve_band(runs, [](const CurvePoint& p) { return layer_mean(p.attention_mixing); });
}

double mean_of(const std::vector<RowResult>& runs, double RowResult::*field) {
  double sum = 0.0;
  for (const RowResult& r : runs) sum += r.*field;
  return sum / static_cast<double>(runs.size());
}

}  // namespace

std::optional<double> run_metric(const RowResult& r, const std::string& metric) { return metric_def(metric).get(r); }

bool metric_lower_is_better(const std::string& metric) { return metric_def(metric).lower_is_better; }

std::vector<RowResult> runs_of(const std::vector<RowResult>& all_runs, const std::string& id) {
  std::vector<RowResult> out;
  for (const RowResult& r : all_runs)
    if (r.id == id) out.push_back(r);
  std::stable_sort(out.begin(), out.end(), [](const RowResult& a, const RowResult& b) { return a.repeat < b.repeat; });
  return out;
}

RowResult mean_row(std::vector<RowResult> runs) {
  HYMBA_CHECK(!runs.empty(), "mean_row: no runs");
  std::stable_sort(runs.begin(), runs.end(),
                   [](const RowResult& a, const RowResult& b) { return a.repeat < b.repeat; });
  RowResult m = runs.front();
  if (runs.size() == 1) return m;
  for (double RowResult::*f :
       {&RowResult::best_val_loss, &RowResult::best_val_ppl, &RowResult::final_val_loss, &RowResult::final_val_ppl,
        &RowResult::final_val_accuracy, &RowResult::train_tokens_per_s, &RowResult::train_seconds,
        &RowResult::decode_tokens_per_s, &RowResult::peak_rss_mb, &RowResult::activation_peak_mb})
    m.*f = mean_of(runs, f);
  // Mixing per layer: averaged where every run has the same layers.
  for (size_t l = 0; l < m.attention_mixing.size(); ++l) {
    double sum = 0.0;
    for (const RowResult& r : runs) sum += l < r.attention_mixing.size() ? r.attention_mixing[l] : NAN;
    m.attention_mixing[l] = sum / static_cast<double>(runs.size());
  }
  m.curve.clear();
  for (const CurveBand& b : curve_band(runs)) m.curve.push_back({b.step, b.mean, std::exp(b.mean), 0.0, {}});
  // The mixing per layer at each step, averaged over the runs that logged it.
  for (CurvePoint& point : m.curve) {
    int64_t n = 0;
    for (const RowResult& r : runs)
      for (const CurvePoint& p : r.curve) {
        if (p.step != point.step || p.attention_mixing.empty()) continue;
        if (point.attention_mixing.empty()) point.attention_mixing.assign(p.attention_mixing.size(), 0.0);
        if (p.attention_mixing.size() != point.attention_mixing.size()) continue;
        for (size_t l = 0; l < p.attention_mixing.size(); ++l) point.attention_mixing[l] += p.attention_mixing[l];
        ++n;
      }
    for (double& v : point.attention_mixing) v /= static_cast<double>(std::max<int64_t>(n, 1));
  }
  // The training loss per logged step, averaged over the runs that logged it.
  std::map<int64_t, std::pair<double, int64_t>> train;
  for (const RowResult& r : runs)
    for (const TrainPoint& p : r.train_curve) {
      train[p.step].first += p.loss;
      ++train[p.step].second;
    }
  m.train_curve.clear();
  for (const auto& [step, sum_n] : train)
    m.train_curve.push_back({step, sum_n.first / static_cast<double>(sum_n.second)});
  return m;
}

RowSpread row_spread(const std::vector<RowResult>& runs) {
  RowSpread s;
  if (runs.empty()) return s;
  s.id = runs.front().id;
  s.name = runs.front().name;
  for (const RowResult& r : runs_of(runs, s.id)) {
    s.repeats.push_back(r.repeat);
    s.seeds.push_back(r.seed);
  }
  s.best_val_loss = spread_by(runs, "best_val_loss");
  s.best_val_ppl = spread_by(runs, "best_val_ppl");
  s.final_val_loss = spread_by(runs, "final_val_loss");
  s.final_val_ppl = spread_by(runs, "final_val_ppl");
  s.accuracy = spread_by(runs, "val_accuracy");
  s.train_tokens_per_s = spread_by(runs, "train_tok_s");
  s.decode_tokens_per_s = spread_by(runs, "decode_tok_s");
  s.mixing = spread_by(runs, "attention_mixing");
  s.val_loss_band = curve_band(runs);
  s.mixing_band = mixing_band(runs);
  return s;
}

std::vector<Answer> answer_questions(const std::vector<Question>& questions, const std::vector<RowResult>& runs) {
  std::vector<Answer> out;
  for (const Question& q : questions) {
    auto values = [&](const std::string& id) {
      RepeatValues v;
      for (const RowResult& r : runs)
        if (r.id == id)
          if (const auto x = run_metric(r, q.metric)) v[r.repeat] = *x;
      return v;
    };
    out.push_back(answer_question(q, metric_lower_is_better(q.metric), values(q.row_a), values(q.row_b)));
  }
  return out;
}

namespace {

nlohmann::json spread_json(const Spread& s) {
  nlohmann::json j = {{"n", s.n}, {"mean", s.mean}, {"sd", s.sd}, {"min", s.min}, {"max", s.max}};
  if (s.has_interval()) j["ci95"] = {s.low(), s.high()};
  return j;
}

nlohmann::json band_json(const std::vector<CurveBand>& band) {
  nlohmann::json j = nlohmann::json::array();
  for (const CurveBand& b : band)
    j.push_back({{"step", b.step}, {"n", b.n}, {"mean", b.mean}, {"sd", b.sd}, {"min", b.min}, {"max", b.max}});
  return j;
}

}  // namespace

nlohmann::json spread_to_json(const RowSpread& s) {
  nlohmann::json j = {{"id", s.id},
          {"name", s.name},
          {"repeats", s.repeats},
          {"seeds", s.seeds},
          {"best_val_loss", spread_json(s.best_val_loss)},
          {"best_val_ppl", spread_json(s.best_val_ppl)},
          {"final_val_loss", spread_json(s.final_val_loss)},
          {"final_val_ppl", spread_json(s.final_val_ppl)},
          {"val_accuracy", spread_json(s.accuracy)},
          {"train_tok_s", spread_json(s.train_tokens_per_s)},
          {"decode_tok_s", spread_json(s.decode_tokens_per_s)},
          {"attention_mixing", spread_json(s.mixing)},
          {"val_loss_band", band_json(s.val_loss_band)}};
  if (!s.mixing_band.empty()) j["mixing_band"] = band_json(s.mixing_band);
  return j;
}

void write_intervals_json(const std::string& path, const std::vector<RowSpread>& rows,
                          const std::vector<Answer>& answers) {
  nlohmann::json j = {{"format", "hymba-intervals/1"},
                      {"level", 0.95},
                      {"rows", nlohmann::json::array()},
                      {"questions", nlohmann::json::array()}};
  for (const RowSpread& r : rows) j["rows"].push_back(spread_to_json(r));
  for (const Answer& a : answers) j["questions"].push_back(a.to_json());
  write_text_atomic(path, j.dump(2) + "\n");
}

std::string spread_markdown(const std::vector<RowSpread>& rows) {
  TextTable t;
  t.headers = {"Model",    "Repeats",        "Seeds",       "Best val loss",
               "Best PPL", "Final val loss", "Train tok/s", "Attention mixing"};
  for (const RowSpread& r : rows) {
    std::string seeds;
    for (uint64_t s : r.seeds) seeds += (seeds.empty() ? "" : ", ") + std::to_string(s);
    t.cells.push_back({r.name, std::to_string(r.repeats.size()), seeds, spread_text(r.best_val_loss, "%.4f"),
                       spread_text(r.best_val_ppl, "%.2f"), spread_text(r.final_val_loss, "%.4f"),
                       spread_text(r.train_tokens_per_s, "%.0f"), spread_text(r.mixing, "%.3f")});
  }
  return markdown_table(t) +
         "\nEach figure: mean ± standard deviation over the repeats [95 % Student t interval of the mean]; "
         "one repeat gives the value alone.\n";
}

}  // namespace hymba::ablate
