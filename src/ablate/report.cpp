#include "ablate/report.h"

#include "ablate/long_report.h"
#include "report/report_kit.h"
#include "ablate/seed_metrics.h"
#include "ablate/seed_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <optional>
#include <sstream>

#include "core/atomic_file.h"
#include "core/error.h"
#include "train/progress.h"

namespace hymba::ablate {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// seed-003-long reports as seed 003's round 3.
constexpr const char* kLongSeed = "003-long";

// One table column: header, text of a row, and (for figures) which end is best.
struct Column {
  std::string header;
  std::function<std::string(const RowResult&)> text;
  std::function<std::optional<double>(const RowResult&)> value = {};
  bool lower_is_better = true;
};

std::vector<Column> columns(int64_t context, bool implementation) {
  const std::string ctx = std::to_string(context);
  using R = const RowResult&;
  std::vector<Column> cols = {
      {"Model", [](R r) { return r.name; }},
      {"Params (M)", [](R r) { return fmt("%.2f", r.params / 1e6); }},
      {"Attn:Mamba (params)", [](R r) { return r.attn_mamba_ratio; }},
      {"Attn share (params)", [](R r) { return fmt("%.1f%%", 100.0 * r.attention_share); }},
      {"Attn:Mamba (dims)", [](R r) { return r.dims_ratio; }},
      {"Attn share (dims)", [](R r) { return fmt("%.1f%%", 100.0 * r.dims_attention_share); }},
      {"Best val loss", [](R r) { return fmt("%.4f", r.best_val_loss); }, [](R r) { return r.best_val_loss; }},
      {"Best PPL", [](R r) { return fmt("%.2f", r.best_val_ppl); }, [](R r) { return r.best_val_ppl; }},
      {"Final val loss", [](R r) { return fmt("%.4f", r.final_val_loss); }, [](R r) { return r.final_val_loss; }},
      {"Final PPL", [](R r) { return fmt("%.2f", r.final_val_ppl); }, [](R r) { return r.final_val_ppl; }},
      {"Accuracy", [](R r) { return fmt("%.3f", r.final_val_accuracy); }, [](R r) { return r.final_val_accuracy; },
       false},
      {"Train tok/s", [](R r) { return fmt("%.0f", r.train_tokens_per_s); },
       [](R r) { return r.train_tokens_per_s; }, false},
      {"Train time", [](R r) { return format_duration(r.train_seconds); }},
      // A row that cannot decode (a seed's leak) has no rate: a dash, never "best".
      {"Decode tok/s", [](R r) { return r.decode_tokens_per_s > 0 ? fmt("%.1f", r.decode_tokens_per_s) : "—"; },
       [](R r) { return r.decode_tokens_per_s > 0 ? std::optional<double>(r.decode_tokens_per_s) : std::nullopt; },
       false},
      {"s / 100 tok",
       [](R r) {
         return r.decode_tokens_per_s > 0 ? fmt("%.3f", seconds_per_100_tokens(r.decode_tokens_per_s)) : "—";
       },
       [](R r) {
         return r.decode_tokens_per_s > 0 ? std::optional<double>(seconds_per_100_tokens(r.decode_tokens_per_s))
                                          : std::nullopt;
       }},
      {"KV MB @" + ctx, [](R r) { return fmt("%.2f", r.kv_cache_mb); }, [](R r) { return r.kv_cache_mb; }},
      {"Mamba MB", [](R r) { return fmt("%.2f", r.mamba_state_mb); }},
      {"Cache MB @512 (seed 002)", [](R r) { return fmt("%.2f", r.seed002_cache_mb); }},
      {"KV reduction @" + ctx + " (cache)",
       [](R r) { return r.kv_reduction ? fmt("%.2fx", *r.kv_reduction) : std::string("n/a"); },
       [](R r) { return r.kv_reduction; }, false},
      {"KV reduction (layers/owners)", [](R r) { return fmt("%.2fx", r.kv_reduction_seed000); }},
      {"T", [](R r) { return std::to_string(r.seq_len); }},
      {"Peak RSS MB", [](R r) { return fmt("%.1f", r.peak_rss_mb); }},
      {"Activation peak MB", [](R r) { return fmt("%.2f", r.activation_peak_mb); }},
  };
  if (implementation) cols.insert(cols.begin() + 1, Column{"Implementation", [](R r) { return r.implementation; }});
  return cols;
}

bool any_implementation(const std::vector<RowResult>& rows) {
  return std::any_of(rows.begin(), rows.end(), [](const RowResult& r) { return !r.implementation.empty(); });
}

// best[c] = the best value of column c over the rows (when it is a figure).
std::vector<std::optional<double>> best_values(const std::vector<Column>& cols, const std::vector<RowResult>& rows) {
  std::vector<std::optional<double>> best(cols.size());
  if (rows.size() < 2) return best;  // nothing to compare
  for (size_t c = 0; c < cols.size(); ++c) {
    if (!cols[c].value) continue;
    for (const RowResult& r : rows) {
      const auto v = cols[c].value(r);
      if (!v) continue;
      if (!best[c] || (cols[c].lower_is_better ? *v < *best[c] : *v > *best[c])) best[c] = v;
    }
  }
  return best;
}

bool is_best(const Column& col, const std::optional<double>& best, const RowResult& r) {
  if (!best || !col.value) return false;
  const auto v = col.value(r);
  return v && *v == *best;
}

const RowSpread* find_spread(const std::vector<RowSpread>& spreads, const std::string& id) {
  for (const RowSpread& s : spreads)
    if (s.id == id) return &s;
  return nullptr;
}

// " (N repeats: mean, min-max band / 95 % interval)" for chart titles; "" with one run per row.
std::string repeats_label(const std::vector<RowSpread>& spreads) {
  size_t most = 0, least = SIZE_MAX;
  for (const RowSpread& s : spreads) {
    most = std::max(most, s.repeats.size());
    least = std::min(least, s.repeats.size());
  }
  if (most < 2) return "";
  const std::string n = least == most ? std::to_string(most) : std::to_string(least) + "-" + std::to_string(most);
  return " (" + n + " repeats)";
}

// Labels of a scatter whose data file has x, y, name, slot: slot k is printed
// above (even k) or below (odd k) its point, one line further per pair.
std::string slotted_labels(const std::vector<int>& slots) {
  const int most = slots.empty() ? 0 : *std::max_element(slots.begin(), slots.end());
  std::string out;
  for (int k = 0; k <= most; ++k) {
    const int lines = k % 2 == 0 ? 1 + k / 2 : -(1 + k / 2);
    out += ", '' using 1:($4==" + std::to_string(k) + "?$2:NaN):3 with labels offset 0," + std::to_string(lines) +
           " font ',9' notitle";
  }
  return out + "\n";
}

// Writes the charts' data and script into plots/ and runs gnuplot once.
bool write_plots(const ReportInfo& info, const std::vector<RowResult>& rows, std::string& why) {
  const auto gnuplot = find_gnuplot(info.gnuplot, why);
  if (!gnuplot) return false;
  const fs::path dir = fs::path(info.dir) / "plots";
  fs::create_directories(dir);

  std::ostringstream curves, train, bars, params, speed;
  std::vector<double> sizes, ppls, caches, speeds;
  for (const RowResult& r : rows) {
    sizes.push_back(r.params / 1e6);
    ppls.push_back(r.best_val_ppl);
    caches.push_back(r.kv_cache_mb + r.mamba_state_mb);
    speeds.push_back(r.decode_tokens_per_s);
  }
  const std::vector<int> params_slots = label_slots(sizes, ppls), speed_slots = label_slots(caches, speeds);
  for (size_t i = 0; i < rows.size(); ++i) {
    const RowResult& r = rows[i];
    // step, mean, min, max over the repeats (one run: the value three times)
    const RowSpread* spread = find_spread(info.spreads, r.id);
    curves << "# " << r.id << "\n";
    if (spread && !spread->val_loss_band.empty()) {
      for (const CurveBand& b : spread->val_loss_band)
        curves << b.step << " " << b.mean << " " << b.min << " " << b.max << "\n";
    } else {
      for (const CurvePoint& p : r.curve) curves << p.step << " " << p.val_loss << " " << p.val_loss << " " << p.val_loss << "\n";
    }
    if (r.curve.empty() && (!spread || spread->val_loss_band.empty())) curves << "0 NaN NaN NaN\n";
    curves << "\n\n";
    // step, training loss (the mean over the log interval, and over repeats)
    train << "# " << r.id << "\n";
    for (const TrainPoint& p : r.train_curve) train << p.step << " " << p.loss << "\n";
    if (r.train_curve.empty()) train << "0 NaN\n";
    train << "\n\n";
    // index, name, mean best PPL, 95 % interval (the mean alone without repeats)
    const Spread ppl = spread ? spread->best_val_ppl : Spread{};
    const double low = ppl.has_interval() ? ppl.low() : r.best_val_ppl, high = ppl.has_interval() ? ppl.high() : r.best_val_ppl;
    bars << i << " " << gp_data_str(r.name) << " " << r.best_val_ppl << " " << low << " " << high << "\n";
    params << sizes[i] << " " << ppls[i] << " " << gp_data_str(r.name) << " " << params_slots[i] << "\n";
    speed << caches[i] << " " << speeds[i] << " " << gp_data_str(r.name) << " " << speed_slots[i] << "\n";
  }
  write_text_atomic((dir / "curves.dat").string(), curves.str());
  write_text_atomic((dir / "train_curves.dat").string(), train.str());
  write_text_atomic((dir / "ppl_bars.dat").string(), bars.str());
  write_text_atomic((dir / "params_vs_ppl.dat").string(), params.str());
  write_text_atomic((dir / "throughput_vs_cache.dat").string(), speed.str());

  const std::string ctx = std::to_string(rows.empty() ? 0 : rows.front().cache_context);
  std::vector<std::string> charts;  // one per entry of plot_names(), in order
  const std::string repeats = repeats_label(info.spreads);
  {
    // Mean validation curves from step 0, each in its min-max band over the
    // repeats, and beside each its training loss, dashed, in the same colour.
    std::ostringstream c;
    c << "set title " << gp_str("Validation (solid) and training (dashed) loss — " + info.title + repeats)
      << "\nset xlabel 'step'\nset ylabel 'loss'\nset xrange [0:*]\n"
      << "set key outside right\nset grid\nset style fill transparent solid 0.2 noborder\nplot ";
    for (size_t i = 0; i < rows.size(); ++i) {
      const std::string lc = " lc " + std::to_string(i + 1);
      c << (i ? ", " : "") << "'curves.dat' index " << i << " using 1:3:4 with filledcurves" << lc << " notitle, "
        << "'curves.dat' index " << i << " using 1:2 with linespoints lw 2 pt 7 ps 0.6" << lc << " title "
        << gp_str(rows[i].name) << ", 'train_curves.dat' index " << i << " using 1:2 with lines dt 2 lw 1" << lc
        << " notitle";
    }
    charts.push_back(c.str() + "\n");
  }
  charts.push_back(
      "set title " + gp_str("Best validation perplexity (lower is better)" + repeats) +
      "\nset ylabel 'best val PPL'\nset xlabel ''\n"
      "set style fill solid 0.7 border -1\nset boxwidth 0.7\nset xtics rotate by -30 left\nset key off\nset grid ytics\n"
      "set yrange [0:*]\nset offsets 0, 0, graph 0.08, 0\nplot 'ppl_bars.dat' using 1:3:xtic(2) with boxes lc rgb '#4e79a7', "
      "'' using 1:3:4:5 with yerrorbars lc rgb 'black' pt 0 lw 1.5, "
      "'' using 1:5:(sprintf('%.1f', $3)) with labels offset 0,0.8 notitle\n");
  charts.push_back(
      "set title 'Parameters vs best validation perplexity'\nset xlabel 'parameters (M)'\nset ylabel 'best val PPL'\n"
      "set key off\nset grid\nset offsets 0, graph 0.1, graph 0.15, graph 0.15\nset xrange [0:*]\n"
      "plot 'params_vs_ppl.dat' using 1:2 with points pt 7 ps 1.5 lc rgb '#e15759'" + slotted_labels(params_slots));
  charts.push_back("set title " + gp_str("Decode throughput (batch 1) vs cache per sequence at " + ctx + " tokens") +
                   "\nset xlabel 'KV cache + Mamba state (MB, fp16)'\nset ylabel 'decode tok/s'\nset key off\nset grid\n"
                   "set offsets 0, graph 0.1, graph 0.15, 0\n"
                   // Neither a cache nor a speed is negative: no left or bottom padding
                   // (gnuplot pads even a fixed minimum), and both axes start at 0.
                   "set xrange [0:*]\nset yrange [0:*]\n"
                   "plot 'throughput_vs_cache.dat' using 1:2 with points pt 7 ps 1.5 lc rgb '#59a14f'" +
                   slotted_labels(speed_slots));
  std::vector<std::pair<std::string, std::string>> named;
  for (size_t i = 0; i < charts.size(); ++i) named.emplace_back(plot_names()[i], charts[i]);
  for (auto& extra : seed_charts(info.seed, rows, info.spreads, dir.string())) named.push_back(std::move(extra));
  if (info.seed == kLongSeed)
    for (auto& extra : long_seq_charts(rows, dir.string())) named.push_back(std::move(extra));
  return render_charts(*gnuplot, dir.string(), named, why);
}

// Every chart of this report: the common ones, then the seed's own.
std::vector<std::string> report_plot_names(const ReportInfo& info, const std::vector<RowResult>& rows) {
  std::vector<std::string> names = plot_names();
  for (const std::string& n : seed_chart_names(info.seed, rows)) names.push_back(n);
  if (info.seed == kLongSeed)
    for (const std::string& n : long_seq_chart_names(rows)) names.push_back(n);
  return names;
}

std::string seed_markdown(const ReportInfo& info, const std::vector<RowResult>& rows) {
  if (info.seed == kLongSeed) return long_seq_section(rows, info.skipped, info.settings, info.scale);
  return seed_section(info.seed, rows, info.settings, info.scale);
}

// The rows over their repeats and the suite's questions ("" when neither applies).
std::string repeats_markdown(const ReportInfo& info) {
  std::ostringstream md;
  const bool repeated = !repeats_label(info.spreads).empty();
  if (repeated)
    md << "## Repeats and intervals\n\nThe table above gives each row's mean over its repeats (seeds: the suite's "
       << "seed + 0, 1, ...; every run is in results.json / results.csv). Plots: mean curves in their min-max band, "
       << "bars with the 95 % interval of the mean.\n\n" << spread_markdown(info.spreads) << "\n";
  if (!info.answers.empty())
    md << "## Questions\n\nThe seed's conclusions as paired comparisons over the repeats (intervals.json holds "
       << "every difference).\n\n" << answers_markdown(info.answers) << "\n";
  return md.str();
}

std::string sampling_line(const ReportInfo& info) {
  const json s = info.settings.value("sampling", json::object());
  const int64_t tokens = s.value("tokens", int64_t{0});
  std::ostringstream o;
  o << "Samples: " << (tokens > 0 ? tokens : info.settings.value("sample_tokens", int64_t{0}))
    << " tokens per prompt at temperature " << s.value("temperature", 0.0) << ", top-k " << s.value("top_k", 0)
    << ", " << (s.value("top_p", 1.0) >= 1.0 ? std::string("no top-p") : "top-p " + fmt("%g", s.value("top_p", 1.0)))
    << ", from the best checkpoint" << (s.value("untrained", false) ? " and from the untrained model (fresh init, the run's seed)" : "")
    << "; decode tok/s timed over " << info.settings.value("sample_tokens", int64_t{0}) << " tokens per prompt";
  return o.str();
}

std::string settings_line(const ReportInfo& info) {
  const json& t = info.settings.value("train", json::object());
  std::ostringstream s;
  s << "suite `" << info.suite << "`, scale `" << info.scale << "`, data `" << info.settings.value("data", "") << "`, ";
  if (t.contains("steps")) s << t["steps"].dump() << " steps";
  else s << t.value("epochs", 0.0) << " epochs";
  if (t.contains("stop_epochs"))
    s << " of lr schedule, training stopped after " << t["stop_epochs"].dump() << " epoch(s)";
  if (info.settings.contains("seq_axis"))
    s << " of batch x T tokens per row (the T table below)";
  else
    s << " of " << t.value("batch", 0) << " x " << t.value("seq_len", 0) << " tokens";
  s << ", lr " << t.value("lr", 0.0)
    << ", warmup " << t.value("warmup", 0) << ", tokenizer " << t.value("tokenizer", std::string("?"));
  if (t.contains("tokenizer_vocab")) s << " " << t["tokenizer_vocab"].dump();
  s << ", seed " << t.value("seed", 0) << "; every row trains on the same data, tokenizer, budget and seed";
  return s.str();
}

}  // namespace

const std::vector<std::string>& plot_names() {
  static const std::vector<std::string> names = {"val_curves", "ppl_bars", "params_vs_ppl", "throughput_vs_cache"};
  return names;
}

static TextTable result_table(const std::vector<RowResult>& rows) {
  const auto cols = columns(rows.empty() ? 0 : rows.front().cache_context, any_implementation(rows));
  const auto best = best_values(cols, rows);
  TextTable t;
  for (const Column& c : cols) t.headers.push_back(c.header);
  for (const RowResult& r : rows) {
    t.cells.emplace_back();
    t.highlight.emplace_back();
    for (size_t c = 0; c < cols.size(); ++c) {
      t.cells.back().push_back(cols[c].text(r));
      t.highlight.back().push_back(is_best(cols[c], best[c], r));
    }
  }
  return t;
}

std::string markdown_table(const std::vector<RowResult>& rows) { return markdown_table(result_table(rows)); }

ReportFiles write_report(const ReportInfo& info, const std::vector<RowResult>& rows) {
  ReportFiles files;
  files.plots_written = write_plots(info, rows, files.plots_note);
  if (!files.plots_written) std::fprintf(stderr, "%s\n", files.plots_note.c_str());
  const int64_t context = rows.empty() ? 0 : rows.front().cache_context;
  const std::string order = info.sorted_by_ppl ? "sorted by best validation perplexity" : "in the suite's order";

  std::ostringstream md;
  md << "# " << info.title << "\n\n" << settings_line(info) << ".\n\n"
     << "Rows " << order << "; **bold** = best in its column. PPL = exp(validation loss). Accuracy = next-token "
     << "accuracy at the end of training. Decode tok/s: batch 1 from the best checkpoint. KV cache and Mamba state "
     << "per sequence at " << context << " tokens in fp16; KV reduction = the same model without KV sharing or "
     << "SWA over this one; KV reduction (layers/owners) = attention layers / layers that own a K/V cache (seed "
     << "000's definition: no context, window or meta tokens). Cache MB @512 (seed 002) = seed 002's estimate: "
     << "every layer caches all 512 tokens, KV sharing pairs all layers. Attn:Mamba and share (params) count "
     << "parameters; (dims) use the configured branch widths (seed 002's ParamRatio). s / 100 tok = 100 / decode "
     << "tok/s (seed 000's time per 100 tokens). " << sampling_line(info) << "." << decode_noise_note(info.spreads)
     << "\n\n"
     << markdown_table(rows) << "\n" << repeats_markdown(info) << seed_markdown(info, rows);
  const std::vector<std::string> names = report_plot_names(info, rows);
  if (files.plots_written) {
    md << "## Plots\n\n";
    for (const std::string& n : names) md << "![" << n << "](plots/" << n << ".png)\n\n";
  } else {
    md << "_" << files.plots_note << "._\n\n";
  }
  md << "## Samples\n\n";
  for (const RowResult& r : rows) {
    md << "### " << r.name << "\n\n";
    if (!r.untrained_samples.empty()) {
      md << "Untrained:\n\n";
      for (const Sample& s : r.untrained_samples) md << "```text\n" << s.prompt << s.text << "\n```\n\n";
      md << "Trained:\n\n";
    }
    for (const Sample& s : r.samples) md << "```text\n" << s.prompt << s.text << "\n```\n\n";
  }
  files.markdown = (fs::path(info.dir) / "report.md").string();
  write_text_atomic(files.markdown, md.str());

  std::ostringstream h;
  h << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>" << html_escape(info.title)
    << "</title>\n" << html_style() << "</head><body>\n"
    << "<h1>" << html_escape(info.title) << "</h1>\n<p>" << html_inline(settings_line(info)) << ".</p>\n<p>Rows "
    << order << "; highlighted = best in its column. Cache figures per sequence at " << context
    << " tokens in fp16. " << html_inline(sampling_line(info)) << "." << html_inline(decode_noise_note(info.spreads)) << "</p>\n" << html_table(result_table(rows));
  if (const std::string rm = repeats_markdown(info); !rm.empty()) h << markdown_to_html(rm);
  // The seed's own section (its table, conclusions, differences), rendered from the markdown report's.
  if (!info.seed.empty()) h << markdown_to_html(seed_markdown(info, rows));
  if (files.plots_written) {
    h << "<h2>Plots</h2>\n";
    for (const std::string& n : names) h << "<img src=\"plots/" << n << ".svg\" alt=\"" << n << "\">\n";
  } else {
    h << "<p><em>" << html_escape(files.plots_note) << ".</em></p>\n";
  }
  h << "<h2>Samples</h2>\n";
  for (const RowResult& r : rows) {
    h << "<h3>" << html_escape(r.name) << "</h3>\n";
    for (const Sample& s : r.untrained_samples)
      h << "<pre>(untrained) <b>" << html_escape(s.prompt) << "</b>" << html_escape(s.text) << "</pre>\n";
    for (const Sample& s : r.samples) h << "<pre><b>" << html_escape(s.prompt) << "</b>" << html_escape(s.text) << "</pre>\n";
  }
  h << "</body></html>\n";
  files.html = (fs::path(info.dir) / "report.html").string();
  write_text_atomic(files.html, h.str());
  return files;
}

// Whether the decode speeds of the rows can be told apart: with repeats, the
// fastest and slowest rows' 95 % intervals must not overlap; a single
// timing per row cannot tell a difference from run-to-run noise (a tiny
// model's decode step takes microseconds).
std::string decode_noise_note(const std::vector<RowSpread>& spreads) {
  const RowSpread *fast = nullptr, *slow = nullptr;
  for (const RowSpread& s : spreads) {
    if (s.decode_tokens_per_s.n == 0) continue;
    if (!fast || s.decode_tokens_per_s.mean > fast->decode_tokens_per_s.mean) fast = &s;
    if (!slow || s.decode_tokens_per_s.mean < slow->decode_tokens_per_s.mean) slow = &s;
  }
  if (!fast || fast == slow) return "";
  const Spread &f = fast->decode_tokens_per_s, &w = slow->decode_tokens_per_s;
  if (!f.has_interval() || !w.has_interval())
    return " Decode tok/s is one timing per row: differences between rows may be run-to-run noise "
           "(run with --repeats, or time decoding with `hymba bench infer`).";
  if (f.low() <= w.high())
    return " Decode tok/s of every row lies within the others' run-to-run noise: the fastest row's 95 % interval (" +
           fmt("%.0f", f.low()) + "-" + fmt("%.0f", f.high()) + ") overlaps the slowest's (" + fmt("%.0f", w.low()) +
           "-" + fmt("%.0f", w.high()) + "), so their order is not a measurement.";
  return "";
}

}  // namespace hymba::ablate
