#include "classify/report.h"

#include <cstdio>
#include <filesystem>
#include <sstream>
#include <vector>

#include "report/report_kit.h"
#include "core/atomic_file.h"

namespace hymba::classify {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

struct Table {
  std::string title;
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
};

std::string num(double v, const char* f = "%.4f") {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

std::string markdown(const Table& t) {
  std::ostringstream o;
  o << "## " << t.title << "\n\n|";
  for (const std::string& h : t.header) o << " " << report::md_escape(h) << " |";
  o << "\n|";
  for (size_t i = 0; i < t.header.size(); ++i) o << (i == 0 ? "---|" : "---:|");
  o << "\n";
  for (const auto& row : t.rows) {
    o << "|";
    for (const std::string& c : row) o << " " << report::md_escape(c) << " |";
    o << "\n";
  }
  return o.str() + "\n";
}

std::string html(const Table& t) {
  std::ostringstream o;
  o << "<h2>" << report::html_escape(t.title) << "</h2>\n<table>\n<tr>";
  for (const std::string& h : t.header) o << "<th>" << report::html_escape(h) << "</th>";
  o << "</tr>\n";
  for (const auto& row : t.rows) {
    o << "<tr>";
    for (const std::string& c : row) o << "<td>" << report::html_escape(c) << "</td>";
    o << "</tr>\n";
  }
  return o.str() + "</table>\n";
}

std::vector<Table> tables(const json& s) {
  std::vector<Table> out;
  const json& m = s.at("metrics");
  out.push_back({"Metrics",
                 {"examples", "accuracy", "macro F1", "mean loss"},
                 {{std::to_string(m.at("examples").get<int64_t>()), num(m.at("accuracy").get<double>()),
                   num(m.at("macro_f1").get<double>()), num(m.at("loss").get<double>())}}});
  Table per{"Per class", {"class", "support", "predicted", "precision", "recall", "F1"}, {}};
  for (const json& c : m.at("per_class"))
    per.rows.push_back({c.at("class").get<std::string>(), std::to_string(c.at("support").get<int64_t>()),
                        std::to_string(c.at("predicted").get<int64_t>()), num(c.at("precision").get<double>()),
                        num(c.at("recall").get<double>()), num(c.at("f1").get<double>())});
  out.push_back(per);
  const auto classes = s.at("classes").get<std::vector<std::string>>();
  Table conf{"Confusion matrix (rows: true class, columns: predicted)", {"true \\ predicted"}, {}};
  for (const std::string& c : classes) conf.header.push_back(c);
  const auto matrix = m.at("confusion_matrix").get<std::vector<std::vector<int64_t>>>();
  for (size_t i = 0; i < classes.size(); ++i) {
    std::vector<std::string> row{classes[i]};
    for (int64_t v : matrix.at(i)) row.push_back(std::to_string(v));
    conf.rows.push_back(row);
  }
  out.push_back(conf);
  const json& mem = s.at("memory");
  Table cost{"Memory and speed",
             {"peak RSS MB", "backbone weights MB", "backbone grads + AdamW MB", "head MB", "activation peak MB",
              "eval tok/s"},
             {{num(mem.at("peak_rss_mb").get<double>(), "%.1f"), num(mem.at("backbone_weights_mb").get<double>(), "%.2f"),
               num(mem.at("backbone_grads_optimizer_mb").get<double>(), "%.2f"),
               num(mem.at("head_mb").get<double>(), "%.3f"), num(mem.at("activation_peak_mb").get<double>(), "%.2f"),
               num(s.at("eval_tokens_per_s").get<double>(), "%.0f")}}};
  if (s.contains("train")) {
    const json& t = s.at("train");
    cost.header.insert(cost.header.end(), {"train s", "train examples/s", "backbone tok/s (train)"});
    cost.rows[0].insert(cost.rows[0].end(), {num(t.at("seconds").get<double>(), "%.1f"),
                                             num(t.at("examples_per_s").get<double>(), "%.1f"),
                                             num(t.at("backbone_tokens_per_s").get<double>(), "%.0f")});
  }
  out.push_back(cost);
  Table bb{"Backbones", {"#", "source", "params", "hidden size", "layers", "tokenizer"}, {}};
  int k = 0;
  for (const json& b : s.at("backbones"))
    bb.rows.push_back({std::to_string(k++), b.at("source").get<std::string>(),
                       std::to_string(b.at("params").get<int64_t>()), std::to_string(b.at("hidden_size").get<int64_t>()),
                       std::to_string(b.at("layers").get<int64_t>()),
                       b.at("tokenizer").get<std::string>() + " " + std::to_string(b.at("vocab_size").get<int64_t>())});
  out.push_back(bb);
  if (s.contains("history") && !s.at("history").empty()) {
    Table h{"Validation during training", {"step", "val loss", "val accuracy", "val macro F1"}, {}};
    for (const json& r : s.at("history"))
      h.rows.push_back({std::to_string(r.at("step").get<int64_t>()), num(r.at("val_loss").get<double>()),
                        num(r.at("val_accuracy").get<double>()), num(r.at("val_macro_f1").get<double>())});
    out.push_back(h);
  }
  return out;
}

std::string title(const json& s) {
  const json& head = s.at("head");
  std::string t = s.at("command").get<std::string>() == "classify eval" ? "Classifier evaluation" : "Classifier training";
  if (s.contains("mode")) t += ", " + s.at("mode").get<std::string>() + " backbone";
  return t + " (" + head.at("pooling").get<std::string>() + " pooling, " + head.at("fusion").get<std::string>() +
         " features, hidden " + std::to_string(head.at("hidden").get<int64_t>()) + ")";
}

}  // namespace

void write_classify_report(const std::string& dir, const json& summary) {
  const std::vector<Table> ts = tables(summary);
  const std::string t = title(summary);
  std::string note = "Figures from summary.json";
  if (summary.contains("data") && summary.at("data").is_string()) note += " on " + summary.at("data").get<std::string>();
  note += ". Precision, recall and F1 are 0 where undefined (a class never predicted or never present).";
  std::ostringstream md;
  md << "# " << t << "\n\n" << note << "\n\n";
  for (const Table& x : ts) md << markdown(x);
  write_text_atomic((fs::path(dir) / "report.md").string(), md.str());

  std::ostringstream h;
  h << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>" << report::html_escape(t)
    << "</title>\n<style>body{font-family:sans-serif;margin:2em;max-width:1200px}table{border-collapse:collapse;"
       "font-size:14px}th,td{border:1px solid #ccc;padding:4px 8px;text-align:right}th{background:#f0f0f0}"
       "td:first-child{text-align:left}</style></head><body>\n<h1>"
    << report::html_escape(t) << "</h1>\n<p>" << report::html_escape(note) << "</p>\n";
  for (const Table& x : ts) h << html(x);
  h << "</body></html>\n";
  write_text_atomic((fs::path(dir) / "report.html").string(), h.str());
}

}  // namespace hymba::classify
