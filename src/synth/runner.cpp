#include "synth/runner.h"

#include <algorithm>
#include <functional>
#include <filesystem>
#include <map>
#include <optional>
#include <sstream>

#include "report/report_kit.h"
#include "core/atomic_file.h"
#include "core/error.h"
#include "core/stats.h"
#include "dist/communicator.h"
#include "synth/repeats.h"
#include "train/progress.h"

namespace hymba::synth {

namespace fs = std::filesystem;
using nlohmann::json;
using report::fmt;

namespace {

double number(const json& j, const char* key) {
  HYMBA_CHECK(j.contains(key) && j[key].is_number(), "field '", key, "' is missing or not a number");
  return j[key].get<double>();
}

std::string text(const json& j, const char* key) {
  HYMBA_CHECK(j.contains(key) && j[key].is_string(), "field '", key, "' is missing or not a string");
  return j[key].get<std::string>();
}

// Best eval accuracy over the epochs run.
double best_acc(const RunResult& r) {
  double best = 0;
  for (const EpochStats& e : r.epochs) best = std::max(best, e.eval_acc);
  return best;
}

report::TextTable table(const std::vector<RowRecord>& rows) {
  bool refs = false;
  for (const RowRecord& r : rows) refs = refs || r.reference.has_value();
  report::TextTable t;
  t.headers = {"Model", "Params", "Epoch", "Train loss", "Eval loss", "Eval acc", "Macro acc (MAD)", "Best acc", "Time"};
  if (refs) t.headers.insert(t.headers.end(), {"Ref. epoch", "Ref. train loss", "Ref. eval loss", "Ref. eval acc"});
  double top = -1;
  for (const RowRecord& r : rows) top = std::max(top, r.result.last().eval_acc);
  for (const RowRecord& r : rows) {
    const EpochStats& e = r.result.last();
    std::vector<std::string> c = {r.name,
                                  std::to_string(r.result.params),
                                  std::to_string(e.epoch) + (r.result.stopped_early ? " (stop)" : ""),
                                  fmt("%.3f", e.train_loss),
                                  fmt("%.3f", e.eval_loss),
                                  fmt("%.3f", e.eval_acc),
                                  fmt("%.3f", e.eval_macro_acc),
                                  fmt("%.3f", best_acc(r.result)),
                                  format_duration(r.result.seconds)};
    if (refs) {
      if (r.reference) {
        const ReferenceFigures& f = *r.reference;
        c.insert(c.end(), {std::to_string(f.epoch), fmt("%.3f", f.train_loss), fmt("%.3f", f.eval_loss),
                           fmt("%.3f", f.eval_acc)});
      } else {
        c.insert(c.end(), 4, "—");
      }
    }
    std::vector<bool> h(c.size(), false);
    h[5] = rows.size() > 1 && e.eval_acc == top;
    t.cells.push_back(std::move(c));
    t.highlight.push_back(std::move(h));
  }
  return t;
}

const std::vector<std::string>& chart_names() {
  static const std::vector<std::string> names = {"accuracy", "eval_loss"};
  return names;
}

// Per epoch over a row's runs: epoch, then mean, min and max of the eval
// accuracy, of the eval loss and of the training loss (one run: the value
// three times).
std::string epoch_bands(const std::vector<RowRecord>& runs, const std::string& id) {
  struct Values {
    std::vector<double> acc, loss, train;
  };
  std::map<int64_t, Values> by_epoch;
  for (const RowRecord& r : runs)
    if (r.id == id)
      for (const EpochStats& e : r.result.epochs) {
        by_epoch[e.epoch].acc.push_back(e.eval_acc);
        by_epoch[e.epoch].loss.push_back(e.eval_loss);
        by_epoch[e.epoch].train.push_back(e.train_loss);
      }
  std::ostringstream out;
  for (const auto& [epoch, values] : by_epoch) {
    out << epoch;
    for (const std::vector<double>* xs : {&values.acc, &values.loss, &values.train}) {
      const Spread s = spread_of(*xs);
      out << " " << s.mean << " " << s.min << " " << s.max;
    }
    out << "\n";
  }
  return out.str();
}

bool write_plots(const std::string& dir_name, const std::string& title, const std::string& gnuplot_name,
                 const std::vector<RowRecord>& rows, const std::vector<RowRecord>& runs, std::string& why) {
  const auto gnuplot = report::find_gnuplot(gnuplot_name, why);
  if (!gnuplot) return false;
  const fs::path dir = fs::path(dir_name) / "plots";
  fs::create_directories(dir);
  std::ostringstream data;
  size_t most = 0;
  for (const RowRecord& r : rows) {
    most = std::max<size_t>(most, std::count_if(runs.begin(), runs.end(), [&](const RowRecord& x) { return x.id == r.id; }));
    data << "# " << r.id << "\n" << epoch_bands(runs, r.id) << "\n\n";
  }
  write_text_atomic((dir / "epochs.dat").string(), data.str());
  const std::string repeats = most > 1 ? " (" + std::to_string(most) + " repeats: mean in its min-max band)" : "";
  // train_column > 0: each row's training loss too, dashed in its colour.
  auto chart = [&](const std::string& what, const std::string& ylabel, int column, const std::string& extra,
                   int train_column = 0) {
    std::ostringstream c;
    c << "set title " << report::gp_str(what + " — " + title + repeats) << "\nset xlabel 'epoch'\nset ylabel "
      << report::gp_str(ylabel) << "\nset key outside right\nset grid\nset style fill transparent solid 0.2 noborder\n"
      << extra << "plot ";
    for (size_t i = 0; i < rows.size(); ++i) {
      const std::string lc = " lc " + std::to_string(i + 1);
      c << (i ? ", " : "") << "'epochs.dat' index " << i << " using 1:" << column + 1 << ":" << column + 2
        << " with filledcurves" << lc << " notitle, 'epochs.dat' index " << i << " using 1:" << column
        << " with linespoints lw 2 pt 7 ps 0.6" << lc << " title " << report::gp_str(rows[i].name);
      if (train_column > 0)
        c << ", 'epochs.dat' index " << i << " using 1:" << train_column << " with lines dt 2 lw 1" << lc << " notitle";
    }
    return c.str() + "\n";
  };
  const std::vector<std::pair<std::string, std::string>> charts = {
      {chart_names()[0], chart("Eval accuracy over scored positions", "eval accuracy", 2, "set yrange [0:1.02]\n")},
      {chart_names()[1], chart("Eval loss (solid) and training loss (dashed)", "loss (log scale)", 5,
                               "set logscale y\n", 8)}};
  return report::render_charts(*gnuplot, dir.string(), charts, why);
}

std::string settings_line(const SynthSuite& s) {
  const TrainSettings& t = s.train;
  std::ostringstream o;
  o << "suite `" << s.name << "`; task " << s.task.summary() << "; "
    << t.num_train << " train / " << t.num_test << " test examples, up to " << t.epochs << " epochs of batch "
    << t.batch_size << ", AdamW lr " << t.lr << " (" << t.schedule << "), weight decay " << t.weight_decay
    << ", seed " << t.seed;
  if (t.grad_clip > 0) o << ", gradient clipping at " << t.grad_clip;
  else o << ", no gradient clipping";
  if (t.stop_at_acc > 0) o << ", stop at " << t.stop_metric << " eval accuracy >= " << t.stop_at_acc;
  return o.str();
}

}  // namespace

json RowRecord::to_json() const {
  json epochs = json::array();
  for (const EpochStats& e : result.epochs)
    epochs.push_back({{"epoch", e.epoch}, {"train_loss", e.train_loss}, {"eval_loss", e.eval_loss},
                      {"eval_acc", e.eval_acc}, {"eval_macro_acc", e.eval_macro_acc}, {"lr", e.lr},
                      {"seconds", e.seconds}});
  json j = {{"id", id},           {"name", name},       {"repeat", repeat},     {"seed", seed},  {"task", task},
            {"model", arch},      {"train", train},     {"params", result.params},
            {"epochs", epochs},   {"stopped_early", result.stopped_early}, {"seconds", result.seconds}};
  const EpochStats& e = result.last();
  j["final"] = {{"epoch", e.epoch},         {"train_loss", e.train_loss},        {"eval_loss", e.eval_loss},
                {"eval_acc", e.eval_acc}, {"eval_macro_acc", e.eval_macro_acc}};
  if (reference)
    j["reference"] = {{"epoch", reference->epoch}, {"train_loss", reference->train_loss},
                      {"eval_loss", reference->eval_loss}, {"eval_acc", reference->eval_acc}};
  return j;
}

RowRecord RowRecord::from_json(const json& j) {
  HYMBA_CHECK(j.is_object(), "not a JSON object");
  RowRecord r;
  r.id = text(j, "id");
  r.name = text(j, "name");
  for (const char* k : {"task", "model", "train"})
    HYMBA_CHECK(j.contains(k) && j[k].is_object(), "field '", k, "' is missing or not an object");
  r.task = j["task"];
  r.arch = j["model"];
  r.train = j["train"];
  // Records from before repeats are repeat 0 with the seed they trained with.
  r.repeat = j.contains("repeat") ? static_cast<int64_t>(number(j, "repeat")) : 0;
  HYMBA_CHECK(r.repeat >= 0, "field 'repeat' is negative");
  r.seed = j.contains("seed") ? static_cast<uint64_t>(number(j, "seed"))
                              : (r.train.contains("seed") ? r.train["seed"].get<uint64_t>() : 0);
  r.result.params = static_cast<int64_t>(number(j, "params"));
  r.result.seconds = number(j, "seconds");
  HYMBA_CHECK(j.contains("stopped_early") && j["stopped_early"].is_boolean(), "field 'stopped_early' is missing");
  r.result.stopped_early = j["stopped_early"].get<bool>();
  HYMBA_CHECK(j.contains("epochs") && j["epochs"].is_array() && !j["epochs"].empty(),
              "field 'epochs' is missing or empty");
  for (const json& e : j["epochs"]) {
    EpochStats s;
    s.epoch = static_cast<int64_t>(number(e, "epoch"));
    s.train_loss = number(e, "train_loss");
    s.eval_loss = number(e, "eval_loss");
    s.eval_acc = number(e, "eval_acc");
    s.eval_macro_acc = number(e, "eval_macro_acc");
    s.lr = number(e, "lr");
    s.seconds = number(e, "seconds");
    r.result.epochs.push_back(s);
  }
  if (j.contains("reference")) {
    const json& f = j["reference"];
    r.reference = ReferenceFigures{static_cast<int64_t>(number(f, "epoch")), number(f, "train_loss"),
                                   number(f, "eval_loss"), number(f, "eval_acc")};
  }
  return r;
}

std::string synth_markdown_table(const std::vector<RowRecord>& rows) { return report::markdown_table(table(rows)); }

namespace {

// Every row's task and model, the training settings, --repeats and the
// suite's questions, checked before the first row trains; returns the tasks.
std::vector<TaskSpec> checked_tasks(const SynthSuite& suite, const SuiteRunOptions& opt) {
  HYMBA_CHECK(!opt.out_dir.empty(), "--out: an output directory is needed");
  HYMBA_CHECK(!suite.rows.empty(), "suite '", suite.name, "' has no rows");
  std::vector<TaskSpec> tasks;
  for (const SynthRow& r : suite.rows) {
    tasks.push_back(row_task(suite, r));
    tasks.back().validate();
    make_model_config(r.arch, tasks.back().vocab_size);
  }
  suite.train.validate();
  HYMBA_CHECK(opt.repeats >= 1 && opt.repeats <= 1000, "--repeats ", opt.repeats, " must be in [1, 1000]");
  for (const report::Question& q : synth_questions(suite)) {
    try {
      (void)synth_metric_lower_is_better(q.metric);
    } catch (const Error& e) {
      fail("suite '", suite.name, "': question '", q.text, "': ", e.what());
    }
  }
  return tasks;
}

// The rows results.json holds from earlier runs; an unreadable row is
// measured again.
std::vector<RowRecord> read_stored_records(const std::string& results_path) {
  std::vector<RowRecord> stored;
  if (!fs::exists(results_path)) return stored;
  const json old = read_json_file(results_path);
  HYMBA_CHECK(old.is_object() && old.contains("rows") && old["rows"].is_array(), results_path,
              ": not a synth results file (no 'rows' list)");
  for (size_t i = 0; i < old["rows"].size(); ++i) {
    try {
      stored.push_back(RowRecord::from_json(old["rows"][i]));
    } catch (const Error& e) {
      std::fprintf(stderr, "%s: row %zu is unreadable (%s); it will be measured again\n", results_path.c_str(), i,
                   e.what());
    }
  }
  return stored;
}

// results.json: the header, this suite's runs, then rows of ids the suite
// no longer has (kept in the file, out of the report), and the answers.
void save_results(const std::string& path, const json& header, const SynthSuite& suite,
                  const SuiteRunSummary& summary, const std::vector<RowRecord>& stored) {
  json all = header;
  all["rows"] = json::array();
  for (const RowRecord& r : summary.runs) all["rows"].push_back(r.to_json());
  for (const RowRecord& r : stored) {
    const bool in_suite = std::any_of(suite.rows.begin(), suite.rows.end(), [&](const SynthRow& x) { return x.id == r.id; });
    if (!in_suite) all["rows"].push_back(r.to_json());
  }
  if (!summary.answers.empty()) {
    all["questions"] = json::array();
    for (const report::Answer& a : summary.answers) all["questions"].push_back(a.to_json());
  }
  write_text_atomic(path, all.dump(2) + "\n");
}

// Repeat `rep` trains with the suite's seed + rep.
TrainSettings repeat_settings(const SynthSuite& suite, int64_t rep) {
  TrainSettings train = suite.train;
  train.seed = suite.train.seed + static_cast<uint64_t>(rep);
  return train;
}

// The record of one run of a row, before its result.
RowRecord run_record(const SynthSuite& suite, const SynthRow& row, const TaskSpec& task, int64_t rep) {
  const TrainSettings train = repeat_settings(suite, rep);
  RowRecord rec;
  rec.id = row.id;
  rec.name = row.name;
  rec.repeat = rep;
  rec.seed = train.seed;
  rec.task = task.to_json();
  rec.arch = row.arch.to_json();
  rec.train = train.to_json();
  rec.reference = row.reference;
  return rec;
}

// Under mpirun: every group leader's runs to rank 0, in run order. False on
// the other ranks (rank 0 writes the suite's files).
bool gather_records(const dist::Communicator& world, bool leader, const std::function<bool(size_t)>& mine,
                    std::vector<std::optional<RowRecord>>& records, SuiteRunSummary& summary) {
  json trained_here = json::array();
  for (size_t j = 0; j < records.size(); ++j)
    if (records[j] && leader && mine(j)) trained_here.push_back({{"index", j}, {"record", records[j]->to_json()}});
  const std::vector<std::string> parts = world.gather(json{{"trained", summary.trained}, {"rows", trained_here}}.dump());
  if (!world.is_root()) return false;
  summary.trained = 0;
  for (size_t k = 0; k < parts.size(); ++k) {
    const json part = json::parse(parts[k]);
    summary.trained += part.at("trained").get<int64_t>();
    for (const json& r : part.at("rows")) records.at(r.at("index").get<size_t>()) = RowRecord::from_json(r.at("record"));
  }
  summary.runs.clear();
  for (const std::optional<RowRecord>& r : records) summary.runs.push_back(*r);
  return true;
}

void write_results_csv(const std::string& path, const std::vector<RowRecord>& runs) {
  std::ostringstream csv;
  csv << "id,model,params,epoch,stopped_early,train_loss,eval_loss,eval_acc,eval_macro_acc,best_acc,seconds,ref_epoch,"
         "ref_train_loss,"
         "ref_eval_loss,ref_eval_acc,repeat,seed\n";
  for (const RowRecord& r : runs) {
    const EpochStats& e = r.result.last();
    csv << report::csv_field(r.id) << "," << report::csv_field(r.name) << "," << r.result.params << "," << e.epoch
        << "," << (r.result.stopped_early ? "true" : "false") << "," << fmt("%.4f", e.train_loss) << ","
        << fmt("%.4f", e.eval_loss) << "," << fmt("%.4f", e.eval_acc) << "," << fmt("%.4f", e.eval_macro_acc) << ","
        << fmt("%.4f", best_acc(r.result)) << ","
        << fmt("%.1f", r.result.seconds);
    if (r.reference)
      csv << "," << r.reference->epoch << "," << r.reference->train_loss << "," << r.reference->eval_loss << ","
          << r.reference->eval_acc;
    else
      csv << ",,,,";
    csv << "," << r.repeat << "," << r.seed << "\n";
  }
  write_text_atomic(path, csv.str());
}

// report.md and report.html: the table, the repeats and questions, the charts.
void write_synth_report(const SynthSuite& suite, const SuiteRunOptions& opt, SuiteRunSummary& summary) {
  std::string why;
  summary.plots_written = write_plots(opt.out_dir, suite.title, opt.gnuplot, summary.rows, summary.runs, why);
  if (!summary.plots_written) std::fprintf(stderr, "%s\n", why.c_str());
  const report::TextTable t = table(summary.rows);
  const std::string ref_note =
      suite.reference_source.empty() ? "" : " Ref. columns: the figures " + suite.reference_source + " reported.";
  const std::string legend =
      "Epoch = the last epoch run (\"stop\": eval accuracy reached the stop threshold). Train loss = mean over the "
      "epoch's batches; eval loss and accuracy over the scored positions of the test set after that epoch (eval acc: "
      "token accuracy; macro acc: MAD's, the per-class mean per test batch of batch-size examples, averaged over the "
      "batches); best acc = best token accuracy over all epochs; **bold** = best eval acc." + ref_note;
  std::ostringstream md;
  const std::string repeats_md = synth_repeats_markdown(suite, summary.runs, summary.answers);
  md << "# " << suite.title << "\n\n" << settings_line(suite) << ".\n\n" << legend << "\n\n"
     << report::markdown_table(t) << "\n" << repeats_md;
  if (summary.plots_written)
    for (const std::string& n : chart_names()) md << "![" << n << "](plots/" << n << ".png)\n\n";
  else
    md << "_" << why << "._\n";
  summary.report_md = (fs::path(opt.out_dir) / "report.md").string();
  write_text_atomic(summary.report_md, md.str());

  std::ostringstream h;
  h << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>" << report::html_escape(suite.title)
    << "</title>\n" << report::html_style() << "</head><body>\n<h1>" << report::html_escape(suite.title)
    << "</h1>\n<p>" << report::html_escape(settings_line(suite)) << ".</p>\n<p>" << report::html_escape(legend)
    << "</p>\n" << report::html_table(t) << report::markdown_to_html(repeats_md);
  if (summary.plots_written)
    for (const std::string& n : chart_names()) h << "<img src=\"plots/" << n << ".svg\" alt=\"" << n << "\">\n";
  else
    h << "<p><em>" << report::html_escape(why) << ".</em></p>\n";
  h << "</body></html>\n";
  summary.report_html = (fs::path(opt.out_dir) / "report.html").string();
  write_text_atomic(summary.report_html, h.str());
}

}  // namespace

SuiteRunSummary run_synth_suite(const SynthSuite& suite, const SuiteRunOptions& opt) {
  const std::vector<TaskSpec> tasks = checked_tasks(suite, opt);
  std::error_code ec;
  fs::create_directories(opt.out_dir, ec);
  HYMBA_CHECK(!ec && fs::is_directory(opt.out_dir), "--out: cannot create directory ", opt.out_dir,
              ec ? " (" + ec.message() + ")" : std::string());
  // Rows measured before under the same settings are kept, not retrained.
  const std::string results_path = (fs::path(opt.out_dir) / "results.json").string();
  const std::vector<RowRecord> stored = read_stored_records(results_path);
  const json header = {{"suite", suite.name}, {"title", suite.title}, {"task", suite.task.to_json()},
                       {"train", suite.train.to_json()}, {"reference_source", suite.reference_source}};
  // Under mpirun group g of K ranks (--ranks-per-row K; groups = N / K)
  // trains rows g, g + groups, ... data-parallel (K = 1: each rank alone,
  // with its own threads); rank 0 gathers the records and writes the results
  // and report.
  const dist::Communicator& world = dist::world();
  const bool root = world.is_root();
  HYMBA_CHECK(opt.ranks_per_row >= 1 && world.size() % opt.ranks_per_row == 0, "--ranks-per-row ", opt.ranks_per_row,
              " must be >= 1 and divide the ", world.size(), " MPI rank(s) of the job");
  const int groups = world.size() / opt.ranks_per_row;
  const int group = world.rank() / opt.ranks_per_row;
  const dist::Communicator group_comm = world.split(group);
  const bool leader = group_comm.is_root();  // reports its group's rows
  const auto mine = [groups, group](size_t run) { return static_cast<int>(run % static_cast<size_t>(groups)) == group; };
  SuiteRunSummary summary;
  // Runs go repeat-major (every row once, then again); run j belongs to group j % groups.
  const size_t rows_n = suite.rows.size(), runs_n = rows_n * static_cast<size_t>(opt.repeats);
  std::vector<std::optional<RowRecord>> records(runs_n);
  for (size_t j = 0; j < runs_n; ++j) {
    const size_t i = j % rows_n;
    const int64_t rep = static_cast<int64_t>(j / rows_n);
    const SynthRow& row = suite.rows[i];
    RowRecord rec = run_record(suite, row, tasks[i], rep);
    std::string label = "[" + std::to_string(j + 1) + "/" + std::to_string(runs_n) + "] " + row.name;
    if (opt.repeats > 1) label += " (repeat " + std::to_string(rep + 1) + "/" + std::to_string(opt.repeats) + ")";
    auto same = [&](const RowRecord& r) {
      return r.id == rec.id && r.task == rec.task && r.arch == rec.arch && r.train == rec.train;
    };
    auto found = std::find_if(stored.begin(), stored.end(), same);
    if (found != stored.end()) {
      rec.result = found->result;
      ++summary.skipped;
      if (!opt.quiet && root) std::fprintf(opt.log, "%s: measured before, kept\n", label.c_str());
    } else if (!mine(j)) {
      continue;  // another group's run
    } else {
      if (!opt.quiet && leader) std::fprintf(opt.log, "%s\n", label.c_str());
      rec.result = train_on_task(tasks[i], row.arch, repeat_settings(suite, rep), [&](const EpochStats& e) {
        if (opt.quiet || !leader) return;
        std::fprintf(opt.log, "  epoch %3lld  train loss %.4f  eval loss %.4f  eval acc %.4f  macro %.4f  (%.1fs)\n",
                     static_cast<long long>(e.epoch), e.train_loss, e.eval_loss, e.eval_acc, e.eval_macro_acc,
                     e.seconds);
        std::fflush(opt.log);
      }, &group_comm);
      ++summary.trained;
    }
    summary.runs.push_back(rec);
    records[j] = rec;
    // Saved after every run, so a killed suite keeps what it measured (rank
    // 0's runs so far, under mpirun).
    if (root) save_results(results_path, header, suite, summary, stored);
  }
  if (world.size() > 1) {
    if (!gather_records(world, leader, mine, records, summary)) return summary;
    save_results(results_path, header, suite, summary, stored);
  }
  for (const RowRecord& r : summary.runs)
    if (r.repeat == 0) summary.rows.push_back(r);
  summary.answers = answer_synth_questions(synth_questions(suite), summary.runs);
  if (!summary.answers.empty()) save_results(results_path, header, suite, summary, stored);  // with the answers
  write_results_csv((fs::path(opt.out_dir) / "results.csv").string(), summary.runs);
  write_synth_report(suite, opt, summary);
  return summary;
}

}  // namespace hymba::synth
