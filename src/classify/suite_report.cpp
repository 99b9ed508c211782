#include "classify/suite_report.h"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "classify/repeats.h"
#include "core/atomic_file.h"

namespace hymba::classify {

namespace fs = std::filesystem;
using nlohmann::json;
using report::fmt;

namespace {

// What seed 004 ran, per backbone role.
struct SeedBackbone {
  const char* role;
  const char* name;       // "GPT-Neo"
  const char* published;  // the pretrained checkpoint the seed loaded
  const char* tokenizer;  // its tokenizer
};
constexpr SeedBackbone kSeedBackbones[] = {
    {"gpt-neo", "GPT-Neo", "EleutherAI/gpt-neo-125M (125,198,592 parameters, pretrained on the Pile)",
     "GPT-2's byte-level BPE (50,257 tokens)"},
    {"mamba", "Mamba", "state-spaces/mamba-130m (129,135,360 parameters, pretrained on the Pile)",
     "GPT-NeoX's BPE (50,277 tokens, embedding padded to 50,280)"}};

const SeedBackbone& seed_backbone(const std::string& role) {
  for (const SeedBackbone& b : kSeedBackbones)
    if (role == b.role) return b;
  return kSeedBackbones[0];
}

// Seed 004's GPT-Neo dev accuracy during its one epoch, with and without
// the log-softmax on the logits.
struct SeedStep {
  int64_t step;
  double with_log_softmax, raw_logits;
};
constexpr SeedStep kSeedGptNeoSteps[] = {{2000, 0.75, 0.62}, {3000, 0.79, 0.68}, {4000, 0.80, 0.58}};

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) {
      const size_t colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(' ', colon + 1));
    }
  return "CPU";
}

std::string with_commas(int64_t v) {
  std::string s = std::to_string(v < 0 ? -v : v), out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (i > 0 && (s.size() - i) % 3 == 0) out += ',';
    out += s[i];
  }
  return (v < 0 ? "-" : "") + out;
}

std::string millions(int64_t params) { return fmt("%.2fM", static_cast<double>(params) / 1e6); }

std::string optional_number(const json& v, const char* format) {
  return v.is_null() ? "—" : fmt(format, v.get<double>());
}

// Every way the row's run differs from the seed's, in words.
std::vector<std::string> differences(const SeedClassifyRow& row, const json& trained, const json& backbones,
                                     const ClassifySuiteOptions& opt) {
  std::vector<std::string> out;
  const json& recs = trained.at("backbones");
  for (size_t k = 0; k < row.backbones.size(); ++k) {
    const SeedBackbone& seed = seed_backbone(row.backbones[k]);
    const json& b = backbones.at(row.backbones[k]);
    const json& measured = recs.at(k);
    const std::string params = with_commas(measured.at("params").get<int64_t>());
    const std::string tok =
        measured.at("tokenizer").get<std::string>() + ", " + with_commas(measured.at("vocab_size").get<int64_t>()) + " tokens";
    if (b.at("origin") == "given") {
      out.push_back(std::string(seed.name) + " weights: as given (" + b.at("dir").get<std::string>() + ", " + params +
                    " parameters); the seed loaded " + seed.published);
      out.push_back(std::string(seed.name) + " tokenizer: the given directory's (" + tok + "); the seed's: " +
                    seed.tokenizer);
    } else {
      out.push_back(std::string(seed.name) + " weights: preset " + b.at("preset").get<std::string>() + " at scale " +
                    b.at("scale").get<std::string>() + " (" + params +
                    " parameters), randomly initialised and not pretrained (no --" + row.backbones[k] +
                    " given); the seed loaded " + seed.published + ", so this row measures random features");
      out.push_back(std::string(seed.name) + " tokenizer: " + b.at("tokenizer_origin").get<std::string>() + " (" + tok +
                    "); the seed's: " + seed.tokenizer);
    }
  }
  const json& data = trained.at("data");
  const json& s = trained.at("settings");
  const int64_t n_train = data.at("train_examples").get<int64_t>(), n_val = data.at("val_examples").get<int64_t>();
  std::string sizes = "data: " + opt.data + " (" + with_commas(n_train) + " training examples";
  if (s.value("train_size", int64_t{0}) > 0) sizes += " of " + with_commas(data.value("train_examples_read", n_train));
  sizes += "), validation " + (resolve_val_path(opt.data, opt.val_path).empty() ? fmt("%.0f%% split off --data", 100 * opt.val_fraction)
                                                                : resolve_val_path(opt.data, opt.val_path)) +
           " (" + with_commas(n_val) + " examples";
  if (s.value("eval_size", int64_t{0}) > 0) sizes += " of " + with_commas(data.value("val_examples_read", n_val));
  sizes += "); the seed: IMDB (25,000 training / 25,000 test reviews), train size " +
           (row.train_size > 0 ? with_commas(row.train_size) : std::string("not stated")) + ", eval size " +
           (row.eval_size > 0 ? with_commas(row.eval_size) : std::string("not stated"));
  out.push_back(sizes);
  std::string recipe = "recipe: batch " + std::to_string(opt.batch) + ", lr " + fmt("%g", opt.lr) + ", " +
                       fmt("%g", opt.epochs) + " epoch(s), frozen backbones, " +
                       (opt.loss == "raw-logits" ? "NLL on raw logits (`--loss raw-logits`, the seed's variant without "
                                                   "log-softmax)"
                                                 : "log-softmax cross-entropy (the seed's variant without it: `--loss "
                                                   "raw-logits`)");
  const bool same = opt.batch == 1 && std::fabs(opt.lr - 5e-5) < 1e-12 && opt.epochs == 1.0;
  recipe += same ? " (the seed's)" : "; the seed: batch 1, lr 5e-5, 1 epoch";
  out.push_back(recipe);
  out.push_back("not stated by the seed, the engine's choice: the first " + std::to_string(opt.max_len) +
                " tokens of each text, " + opt.pooling + " pooling of the final hidden states, a linear head" +
                (row.backbones.size() == 2 ? " on " + opt.fusion + " features of both backbones" : std::string()) +
                ", AdamW (weight decay 0.01) with 10 warmup steps and a cosine decay to 0.1 x lr, gradient clip 1.0");
  const int threads = s.value("threads", 0);
  out.push_back("hardware: " + cpu_model() + ", " + std::to_string(threads) +
                " thread(s), fp32; the seed: a GPU it does not name (its memory figures are GPU memory, fp32, one also with amp)");
  out.push_back("memory: peak RSS of the whole process on the CPU (" +
                std::string(trained.value("peak_rss_scope", "process") == "row" ? "from this row's start"
                                                                                 : "since the process started") +
                ": weights, data, cached features) and the backbones' activation-arena peak; the seed's figure is " +
                (row.memory_mb ? row.memory_note : std::string("not reported")));
  if (!row.dev_acc) out.push_back("the seed reports no accuracy for this row, only its memory");
  return out;
}

}  // namespace

json suite_row_record(const SeedClassifyRow& row, const json& trained, const json& backbones,
                      const ClassifySuiteOptions& opt) {
  json bbs = json::array();
  int64_t params = 0;
  const json& recs = trained.at("backbones");
  for (size_t k = 0; k < row.backbones.size(); ++k) {
    json b = backbones.at(row.backbones[k]);
    for (const char* key : {"params", "layers", "hidden_size", "tokenizer", "vocab_size"}) b[key] = recs.at(k).at(key);
    params += recs.at(k).at("params").get<int64_t>();
    bbs.push_back(b);
  }
  const json& m = trained.at("metrics");
  const json& mem = trained.at("memory");
  const json& t = trained.at("train");
  return {{"id", row.id},
          {"name", row.name},
          {"backbones", bbs},
          {"seed",
           {{"dev_acc", row.dev_acc ? json(*row.dev_acc) : json()},
            {"memory_mb", row.memory_mb ? json(*row.memory_mb) : json()},
            {"memory_note", row.memory_note},
            {"recipe", row.recipe},
            {"train_size", row.train_size},
            {"eval_size", row.eval_size}}},
          {"engine",
           {{"val_acc", m.at("accuracy")},
            {"macro_f1", m.at("macro_f1")},
            {"val_loss", m.at("loss")},
            {"peak_rss_mb", mem.at("peak_rss_mb")},
            {"peak_rss_scope", trained.value("peak_rss_scope", "process")},
            {"activation_peak_mb", mem.at("activation_peak_mb")},
            {"backbone_weights_mb", mem.at("backbone_weights_mb")},
            {"tokens_per_s", t.at("backbone_tokens_per_s")},
            {"eval_tokens_per_s", trained.at("eval_tokens_per_s")},
            {"train_seconds", t.at("seconds")},
            {"steps", t.at("steps")},
            {"train_examples", trained.at("data").at("train_examples")},
            {"val_examples", trained.at("data").at("val_examples")},
            {"params", params},
            {"batch", opt.batch}}},
          {"history", trained.value("history", json::array())},
          {"differences", differences(row, trained, backbones, opt)}};
}

report::TextTable suite_table(const json& rows) {
  report::TextTable t;
  t.headers = {"Row",         "Seed dev acc", "Seed memory MB (batch 1)", "Val acc",  "Macro-F1",
               "Peak RSS MB", "Activation peak MB", "Backbone tok/s",   "Train s", "Params", "Train / val examples"};
  for (const json& r : rows) {
    const json& e = r.at("engine");
    std::string params;
    for (const json& b : r.at("backbones"))
      params += (params.empty() ? "" : " + ") + millions(b.at("params").get<int64_t>());
    t.cells.push_back({r.at("name").get<std::string>(), optional_number(r.at("seed").at("dev_acc"), "%.2f"),
                       optional_number(r.at("seed").at("memory_mb"), "%.0f"), fmt("%.4f", e.at("val_acc").get<double>()),
                       fmt("%.4f", e.at("macro_f1").get<double>()), fmt("%.0f", e.at("peak_rss_mb").get<double>()),
                       fmt("%.1f", e.at("activation_peak_mb").get<double>()),
                       fmt("%.0f", e.at("tokens_per_s").get<double>()), fmt("%.1f", e.at("train_seconds").get<double>()),
                       params,
                       with_commas(e.at("train_examples").get<int64_t>()) + " / " +
                           with_commas(e.at("val_examples").get<int64_t>())});
  }
  return t;
}

namespace {

// Seed 004's GPT-Neo dev accuracy at its steps beside ours at the same steps.
report::TextTable progress_table(const json& rows) {
  report::TextTable t;
  t.headers = {"Step", "Seed GPT-Neo dev acc (log-softmax)", "Seed, raw logits (no log-softmax)", "Ours: GPT-Neo val acc"};
  const json* neo = nullptr;
  for (const json& r : rows)
    if (r.at("id") == "gpt-neo") neo = &r;
  auto ours_at = [&](int64_t step) -> std::string {
    if (neo == nullptr) return "—";
    for (const json& h : neo->at("history"))
      if (h.at("step").get<int64_t>() == step) return fmt("%.4f", h.at("val_accuracy").get<double>());
    return "— (not reached)";
  };
  for (const SeedStep& s : kSeedGptNeoSteps)
    t.cells.push_back({with_commas(s.step), fmt("%.2f", s.with_log_softmax), fmt("%.2f", s.raw_logits), ours_at(s.step)});
  std::string final_ours = "—";
  if (neo != nullptr)
    final_ours = fmt("%.4f", neo->at("engine").at("val_acc").get<double>()) + " (step " +
                 with_commas(neo->at("engine").at("steps").get<int64_t>()) + ")";
  t.cells.push_back({"end of epoch 1", "0.85", "—", final_ours});
  return t;
}

std::string settings_line(const json& results) {
  const json& s = results.at("settings");
  std::string line = "Data `" + s.at("data").get<std::string>() + "`, validation " +
                     (s.at("val").get<std::string>() == "split of --data"
                          ? fmt("%.0f%% split off it", 100 * s.at("val_fraction").get<double>())
                          : "`" + s.at("val").get<std::string>() + "`") +
                     "; batch " + std::to_string(s.at("batch").get<int64_t>()) + ", lr " +
                     fmt("%g", s.at("lr").get<double>()) + ", " + fmt("%g", s.at("epochs").get<double>()) +
                     " epoch(s), max length " + std::to_string(s.at("max_len").get<int64_t>()) + ", " +
                     s.at("pooling").get<std::string>() + " pooling, frozen backbones; " +
                     std::to_string(results.at("threads").get<int>()) + " thread(s)";
  bool any_random = false;
  for (auto it = results.at("backbones").begin(); it != results.at("backbones").end(); ++it)
    any_random = any_random || it.value().at("origin") == "random";
  if (any_random)
    line += ". Backbones not given by flag are their presets at scale `" + s.at("scale").get<std::string>() +
            "`, randomly initialised" +
            (s.at("scale") == "tiny" ? " (the default, sized for a laptop: a few million parameters each)" : "");
  return line;
}

std::string csv(const json& rows) {
  std::ostringstream o;
  o << "id,name,seed_dev_acc,seed_memory_mb,val_acc,macro_f1,val_loss,peak_rss_mb,peak_rss_scope,activation_peak_mb,"
       "backbone_tokens_per_s,train_seconds,steps,train_examples,val_examples,params,backbones,repeat,run_seed\n";
  for (const json& r : rows) {
    const json& e = r.at("engine");
    const json& s = r.at("seed");
    std::string bbs;
    for (const json& b : r.at("backbones")) bbs += (bbs.empty() ? "" : " + ") + b.at("dir").get<std::string>();
    o << report::csv_field(r.at("id").get<std::string>()) << ',' << report::csv_field(r.at("name").get<std::string>())
      << ',' << (s.at("dev_acc").is_null() ? "" : fmt("%g", s.at("dev_acc").get<double>())) << ','
      << (s.at("memory_mb").is_null() ? "" : fmt("%g", s.at("memory_mb").get<double>())) << ','
      << fmt("%.6f", e.at("val_acc").get<double>()) << ',' << fmt("%.6f", e.at("macro_f1").get<double>()) << ','
      << fmt("%.6f", e.at("val_loss").get<double>()) << ',' << fmt("%.1f", e.at("peak_rss_mb").get<double>()) << ','
      << e.at("peak_rss_scope").get<std::string>() << ',' << fmt("%.3f", e.at("activation_peak_mb").get<double>())
      << ',' << fmt("%.1f", e.at("tokens_per_s").get<double>()) << ','
      << fmt("%.3f", e.at("train_seconds").get<double>()) << ',' << e.at("steps").get<int64_t>() << ','
      << e.at("train_examples").get<int64_t>() << ',' << e.at("val_examples").get<int64_t>() << ','
      << e.at("params").get<int64_t>() << ',' << report::csv_field(bbs) << ',' << r.value("repeat", int64_t{0}) << ','
      << r.value("run_seed", uint64_t{0}) << '\n';
  }
  return o.str();
}

constexpr const char* kLossNote =
    "Loss: log-softmax cross-entropy unless `--loss raw-logits`. Seed 004 also ran GPT-Neo on the raw logits "
    "(no log-softmax): its loss fell without bound (to -50, -80) and dev accuracy dropped to 0.58; that loss is "
    "wrong, and `--loss raw-logits` reproduces it on demand (with a warning).";

}  // namespace

SuiteReportFiles write_suite_report(const std::string& dir, const json& results) {
  const json& runs = results.at("rows");
  json rows = json::array();  // each row's first repeat
  for (const json& r : runs)
    if (r.value("repeat", int64_t{0}) == 0) rows.push_back(r);
  const report::TextTable main = suite_table(rows), steps = progress_table(rows);
  const std::string title = results.at("title").get<std::string>();
  const std::string settings = settings_line(results);
  SuiteReportFiles files{(fs::path(dir) / "report.md").string(), (fs::path(dir) / "report.html").string(),
                         (fs::path(dir) / "results.csv").string(), {}};
  write_text_atomic(files.csv, csv(runs));
  files.answers = answer_classify_questions(classify_questions(results.at("suite").get<std::string>()), runs);
  const std::string repeats_md = classify_repeats_markdown(runs, files.answers);

  std::ostringstream md;
  md << "# " << title << "\n\n" << settings << ".\n\n## Seed 004's table beside ours\n\n"
     << "Seed columns as seed 004 reports them (dev accuracy; GPU memory in MB at batch 1). Ours: accuracy and "
        "macro-F1 on the validation set, peak RSS and activation peak in MB, backbone tokens/s of the frozen "
        "feature pass, training seconds.\n\n"
     << report::markdown_table(main) << "\n## GPT-Neo during its epoch\n\n" << report::markdown_table(steps) << "\n"
     << kLossNote << "\n\n" << repeats_md << "## Differences from seed 004, per row\n\n";
  for (const json& r : rows) {
    md << "**" << r.at("name").get<std::string>() << "**\n\n";
    for (const json& d : r.at("differences")) md << "- " << d.get<std::string>() << "\n";
    md << "\n";
  }
  write_text_atomic(files.markdown, md.str());

  std::ostringstream h;
  h << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>" << report::html_escape(title)
    << "</title>\n" << report::html_style() << "</head><body>\n<h1>" << report::html_escape(title) << "</h1>\n<p>"
    << report::html_inline(settings) << ".</p>\n<h2>Seed 004's table beside ours</h2>\n" << report::html_table(main)
    << "<h2>GPT-Neo during its epoch</h2>\n" << report::html_table(steps) << "<p>" << report::html_escape(kLossNote)
    << "</p>\n" << report::markdown_to_html(repeats_md) << "<h2>Differences from seed 004, per row</h2>\n";
  for (const json& r : rows) {
    h << "<h3>" << report::html_escape(r.at("name").get<std::string>()) << "</h3>\n<ul>\n";
    for (const json& d : r.at("differences")) h << "<li>" << report::html_escape(d.get<std::string>()) << "</li>\n";
    h << "</ul>\n";
  }
  h << "</body></html>\n";
  write_text_atomic(files.html, h.str());
  return files;
}

}  // namespace hymba::classify
