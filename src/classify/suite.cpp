#include "classify/suite.h"

#include <chrono>
#include <cstdio>
#include <filesystem>

#include "classify/suite_report.h"
#include "classify/trainer.h"
#include "core/atomic_file.h"
#include "core/error.h"
#include "core/system_memory.h"
#include "core/threading.h"
#include "tokenizer/sentencepiece_tokenizer.h"
#include "tokenizer/train/train_tokenizer.h"
#include "tokenizer/tokenizer_files.h"
#include "formats/checkpoint.h"
#include "model/presets.h"
#include "train/progress.h"
#include "train/run_state.h"

namespace hymba::classify {

namespace fs = std::filesystem;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

constexpr const char* kSuiteResultsFormat = "hymba-classify-suite/1";

// A backbone role of the suite: the flag that gives it and the preset drawn
// when it is not given.
struct BackboneRole {
  const char* role;    // "gpt-neo", "mamba"
  const char* flag;    // "--gpt-neo"
  const char* preset;  // "gpt-neo-125m"
};
constexpr BackboneRole kRoles[] = {{"gpt-neo", "--gpt-neo", "gpt-neo-125m"}, {"mamba", "--mamba", "mamba-130m"}};

const BackboneRole& role_of(const std::string& role) {
  for (const BackboneRole& r : kRoles)
    if (role == r.role) return r;
  fail("unknown backbone role '", role, "'");
}

const std::string& given_dir(const ClassifySuiteOptions& o, const std::string& role) {
  return role == "gpt-neo" ? o.gpt_neo : o.mamba;
}

void validate(const ClassifySuiteOptions& o) {
  (void)find_classify_suite(o.suite);
  HYMBA_CHECK(!o.data.empty(), "--data: a labelled training file is required");
  HYMBA_CHECK(!o.out_dir.empty(), "--out: an output directory is required");
  for (const BackboneRole& r : kRoles) {
    const std::string& dir = given_dir(o, r.role);
    if (dir.empty()) continue;
    HYMBA_CHECK(fs::is_directory(dir), r.flag, ": ", dir, " is not a directory (give a checkpoint or a Hugging Face ",
                r.preset, " directory, or leave the flag out for a randomly initialised preset)");
  }
  (void)parse_scale(o.scale);
  HYMBA_CHECK(o.repeats >= 1 && o.repeats <= 1000, "--repeats ", o.repeats, " must be in [1, 1000]");
  HYMBA_CHECK(o.tokenizer.empty() || fs::is_regular_file(o.tokenizer), "--tokenizer: ", o.tokenizer,
              " is not a file");
  HYMBA_CHECK(!o.seed_sizes || (o.train_size == 0 && o.eval_size == 0),
              "--seed-sizes gives each row the seed's sizes; drop --train-size / --eval-size");
  HYMBA_CHECK(o.train_size >= 0 && o.eval_size >= 0, "--train-size and --eval-size must be >= 0 (0: all)");
  HYMBA_CHECK(o.fusion == "concat" || o.fusion == "gated", "--fusion: '", o.fusion, "' is not concat or gated");
  HYMBA_CHECK(o.batch >= 1, "--batch must be >= 1 (got ", o.batch, ")");
  HYMBA_CHECK(o.max_len >= 1, "--max-len must be >= 1 (got ", o.max_len, ")");
  HYMBA_CHECK(o.epochs > 0, "--epochs must be > 0 (got ", o.epochs, ")");
  HYMBA_CHECK(o.lr > 0, "--lr must be > 0 (got ", o.lr, ")");
}

// Everything that decides the results; a rerun must match it.
json settings_json(const ClassifySuiteOptions& o) {
  return {{"suite", o.suite},
          {"data", o.data},
          {"val", resolve_val_path(o.data, o.val_path).empty() ? json("split of --data")
                                                                : json(resolve_val_path(o.data, o.val_path))},
          {"val_fraction", o.val_fraction},
          {"gpt_neo", o.gpt_neo},
          {"mamba", o.mamba},
          {"scale", o.scale},
          {"tokenizer", o.tokenizer},
          {"tokenizer_type", o.tokenizer_type},
          {"tokenizer_vocab", o.tokenizer_vocab},
          {"train_size", o.train_size},
          {"eval_size", o.eval_size},
          {"seed_sizes", o.seed_sizes},
          {"fusion", o.fusion},
          {"pooling", o.pooling},
          {"loss", o.loss},
          {"max_len", o.max_len},
          {"batch", o.batch},
          {"epochs", o.epochs},
          {"lr", o.lr},
          {"eval_interval", o.eval_interval},
          {"seed", o.seed}};
}

// The training texts (the tokenizer of the random backbones learns from
// them, never from the validation texts).
std::vector<std::string> training_texts(const ClassifySuiteOptions& o) {
  std::vector<LabeledText> all = read_labeled(o.data, o.read), train, val;
  if (resolve_val_path(o.data, o.val_path).empty()) split_train_val(all, o.val_fraction, o.seed, train, val);
  else train = std::move(all);
  std::vector<std::string> out;
  for (LabeledText& t : train) out.push_back(std::move(t.text));
  return out;
}

// The random backbones' tokenizer: OUT/tokenizer/ when an earlier run made
// it, else --tokenizer, else trained on the training texts.
struct SuiteTokenizer {
  std::unique_ptr<Tokenizer> tok;
  std::string origin;  // for the report
};
SuiteTokenizer suite_tokenizer(const ClassifySuiteOptions& o, const fs::path& dir, std::FILE* log) {
  SuiteTokenizer s;
  if (!o.tokenizer.empty()) {
    s.tok = load_tokenizer(o.tokenizer);
    s.origin = "loaded from " + o.tokenizer;
    return s;
  }
  const TokenizerKind kind = parse_tokenizer_kind(o.tokenizer_type, "--tokenizer-type");
  if (kind == TokenizerKind::kByte) {
    s.tok = make_byte_tokenizer();
    s.origin = "byte-level (no training)";
    return s;
  }
  s.origin = std::string(to_string(kind)) + " " + std::to_string(o.tokenizer_vocab) + " trained on the training texts";
  if (const std::string path = checkpoint_tokenizer_path(dir.string()); !path.empty()) {
    s.tok = load_tokenizer(path);
    return s;
  }
  if (log) std::fprintf(log, "training the random backbones' %s tokenizer (vocab %d) on %s...\n", to_string(kind),
                        o.tokenizer_vocab, o.data.c_str());
  TokenizerTrainOptions t;
  t.kind = kind;
  t.vocab_size = o.tokenizer_vocab;
  t.seed = o.seed;
  s.tok = train_tokenizer(training_texts(o), t);
  std::error_code ec;
  fs::create_directories(dir, ec);
  HYMBA_CHECK(!ec, dir.string(), ": cannot create the directory (", ec.message(), ")");
  save_tokenizer_files(*s.tok, dir.string());
  return s;
}

// A backbone directory per role: the one given, or the preset drawn at the
// scale with the suite tokenizer's vocabulary (made once, kept for reruns).
json prepare_backbone(const ClassifySuiteOptions& o, const BackboneRole& r, const fs::path& out,
                      std::unique_ptr<SuiteTokenizer>& tok, std::FILE* log) {
  const std::string& given = given_dir(o, r.role);
  if (!given.empty()) return {{"role", r.role}, {"dir", given}, {"origin", "given"}, {"preset", r.preset}};
  const fs::path dir = out / "backbones" / (std::string(r.preset) + "-" + o.scale);
  if (!tok) tok = std::make_unique<SuiteTokenizer>(suite_tokenizer(o, out / "tokenizer", log));
  json rec = {{"role", r.role},
              {"dir", dir.string()},
              {"origin", "random"},
              {"preset", r.preset},
              {"scale", o.scale},
              {"tokenizer_origin", tok->origin}};
  if (fs::exists(dir / kConfigFile) && fs::exists(dir / kWeightsFile) &&
      !checkpoint_tokenizer_path(dir.string()).empty())
    return rec;
  json j = scaled_config_json(find_preset(r.preset), parse_scale(o.scale));
  j["vocab_size"] = tok->tok->vocab_size();
  Model m(ModelConfig::from_json(j, std::string("preset ") + r.preset), false);
  m.init(o.seed);
  if (log)
    std::fprintf(log, "%s: preset %s at scale %s, randomly initialised (%.2fM parameters, not pretrained)\n", r.flag,
                 r.preset, o.scale.c_str(), static_cast<double>(m.params().num_params()) / 1e6);
  save_inference_checkpoint(dir.string(), m, *tok->tok,
                            {{"source", std::string("preset ") + r.preset + ", scale " + o.scale + ", random init"}});
  return rec;
}

// The first setting that differs from the stored run's, or "".
std::string settings_difference(const json& stored, const json& now) {
  for (auto it = now.begin(); it != now.end(); ++it)
    if (!stored.contains(it.key()) || stored.at(it.key()) != it.value())
      return it.key() + ": " + (stored.contains(it.key()) ? stored.at(it.key()).dump() : "absent") + " then, " +
             it.value().dump() + " now";
  return "";
}

double row_seconds(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

}  // namespace

const std::vector<ClassifySuiteInfo>& builtin_classify_suites() {
  static const std::vector<ClassifySuiteInfo> suites = [] {
    ClassifySuiteInfo s;
    s.name = "seed-004";
    s.title = "Seed 004: IMDB classification on frozen GPT-Neo, Mamba and both";
    s.description = "a head on frozen GPT-Neo-125M, on frozen Mamba-130M, and on both (seed 004's IMDB table)";
    s.rows = {{"gpt-neo", "GPT-Neo-125M frozen", {"gpt-neo"}, 0.85, std::nullopt, "not reported",
               "epoch 1, train size 20,000, batch 1, lr 5e-5, log-softmax loss", 20000, 0},
              {"mamba", "Mamba-130M frozen", {"mamba"}, 0.80, 2200.0,
               "GPU memory at batch 1 without amp (1,400 MB with amp)",
               "epoch 1, lr 5e-5, batch 1, train size 5,000, eval size 200", 5000, 200},
              {"hybrid", "Hybrid GPT-Neo + Mamba frozen", {"gpt-neo", "mamba"}, std::nullopt, 9800.0,
               "GPU memory at batch 1", "not stated (no accuracy reported)", 0, 0}};
    return std::vector<ClassifySuiteInfo>{s};
  }();
  return suites;
}

const ClassifySuiteInfo& find_classify_suite(const std::string& name) {
  std::string known;
  for (const ClassifySuiteInfo& s : builtin_classify_suites()) {
    if (s.name == name) return s;
    known += (known.empty() ? "" : ", ") + s.name;
  }
  fail("--suite: unknown suite '", name, "' (known: ", known, ")");
}

ClassifySuiteSummary run_classify_suite(const ClassifySuiteOptions& opt) {
  validate(opt);
  const ClassifySuiteInfo& suite = find_classify_suite(opt.suite);
  std::FILE* log = stderr;
  const auto t_suite = Clock::now();
  (void)read_labeled(opt.data, opt.read);  // a bad --data stops before anything is made
  if (const std::string val = resolve_val_path(opt.data, opt.val_path); !val.empty()) (void)read_labeled(val, opt.read);
  const fs::path out(opt.out_dir);
  std::error_code ec;
  fs::create_directories(out / "rows", ec);
  HYMBA_CHECK(!ec, opt.out_dir, ": cannot create the output directory (", ec.message(), ")");

  const json settings = settings_json(opt);
  const fs::path results_path = out / "results.json";
  if (fs::exists(results_path)) {
    const json stored = read_json_file(results_path.string());
    HYMBA_CHECK(stored.value("format", "") == kSuiteResultsFormat, results_path.string(),
                ": not a classify suite results file");
    const std::string diff = settings_difference(stored.value("settings", json::object()), settings);
    HYMBA_CHECK(diff.empty(), opt.out_dir, ": holds a suite run with other settings (", diff,
                "); use another --out or the same flags");
  }

  std::unique_ptr<SuiteTokenizer> tok;
  json backbones = json::object();
  for (const SeedClassifyRow& row : suite.rows)
    for (const std::string& role : row.backbones)
      if (!backbones.contains(role)) backbones[role] = prepare_backbone(opt, role_of(role), out, tok, log);

  json header = {{"format", kSuiteResultsFormat},
                 {"suite", suite.name},
                 {"title", suite.title},
                 {"threads", num_threads()},
                 {"settings", settings},
                 {"backbones", backbones},
                 {"rows", json::array()}};
  ClassifySuiteSummary summary;
  // Runs go repeat-major: every row once, then again with the next seed.
  const size_t n = suite.rows.size() * static_cast<size_t>(opt.repeats);
  for (size_t j = 0; j < n; ++j) {
    const SeedClassifyRow& row = suite.rows[j % suite.rows.size()];
    const int64_t rep = static_cast<int64_t>(j / suite.rows.size());
    const fs::path row_dir = out / "rows" / (rep == 0 ? row.id : row.id + ".rep" + std::to_string(rep));
    std::string label = "[" + std::to_string(j + 1) + "/" + std::to_string(n) + "] " + row.name;
    if (opt.repeats > 1) label += " (repeat " + std::to_string(rep + 1) + "/" + std::to_string(opt.repeats) + ")";
    ClassifyTrainOptions t;
    for (const std::string& role : row.backbones) t.backbones.push_back(backbones[role]["dir"].get<std::string>());
    t.train_path = opt.data;
    t.val_path = resolve_val_path(opt.data, opt.val_path);
    t.read = opt.read;
    t.out_dir = row_dir.string();
    t.pooling = opt.pooling;
    t.loss = opt.loss;
    if (t.backbones.size() == 2) t.fusion = opt.fusion;
    t.freeze = true;
    t.max_len = opt.max_len;
    t.batch = opt.batch;
    t.epochs = opt.epochs;
    t.lr = opt.lr;
    t.val_fraction = opt.val_fraction;
    t.train_size = opt.seed_sizes ? row.train_size : opt.train_size;
    t.eval_size = opt.seed_sizes ? row.eval_size : opt.eval_size;
    t.eval_interval = opt.eval_interval;
    t.seed = opt.seed + static_cast<uint64_t>(rep);
    t.quiet = opt.quiet;
    t.plain_progress = opt.plain_progress;

    json trained;
    const fs::path summary_path = row_dir / "summary.json";
    const auto t_row = Clock::now();
    if (fs::exists(summary_path) && fs::exists(row_dir / "classifier.json")) {
      std::fprintf(log, "%s: measured earlier, kept\n", label.c_str());
      trained = read_json_file(summary_path.string());
      ++summary.reused;
    } else {
      fs::remove_all(row_dir, ec);  // an interrupted row starts again
      std::fprintf(log, "%s: start (%s)\n", label.c_str(),
                   t.backbones.size() == 2 ? (t.backbones[0] + " + " + t.backbones[1]).c_str() : t.backbones[0].c_str());
      // Each row's peak RSS from its own start (where the kernel allows the reset).
      const bool rss_from_here = reset_peak_rss();
      trained = train_classifier(t);
      trained["peak_rss_scope"] = rss_from_here ? "row" : "process";
      write_text_atomic(summary_path.string(), trained.dump(2) + "\n");
      ++summary.trained;
    }
    json rec = suite_row_record(row, trained, backbones, opt);
    rec["repeat"] = rep;
    rec["run_seed"] = t.seed;
    header["rows"].push_back(rec);
    write_text_atomic(results_path.string(), header.dump(2) + "\n");
    std::fprintf(log, "%s: done in %s: val acc %.4f, macro-F1 %.4f, peak RSS %.0f MB, %.0f backbone tok/s\n",
                 label.c_str(), format_duration(row_seconds(t_row)).c_str(),
                 rec["engine"]["val_acc"].get<double>(), rec["engine"]["macro_f1"].get<double>(),
                 rec["engine"]["peak_rss_mb"].get<double>(), rec["engine"]["tokens_per_s"].get<double>());
  }
  const SuiteReportFiles files = write_suite_report(opt.out_dir, header);
  header["questions"] = json::array();
  for (const report::Answer& a : files.answers) header["questions"].push_back(a.to_json());
  write_text_atomic(results_path.string(), header.dump(2) + "\n");
  summary.results = header;
  summary.report_md = files.markdown;
  summary.report_html = files.html;
  std::fprintf(log, "suite %s: %lld trained, %lld measured earlier, %s\n", suite.name.c_str(),
               static_cast<long long>(summary.trained), static_cast<long long>(summary.reused),
               format_duration(row_seconds(t_suite)).c_str());
  return summary;
}

}  // namespace hymba::classify
