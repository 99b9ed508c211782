#include "classify/data.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <string_view>

#include <nlohmann/json.hpp>

#include "classify/data_formats.h"
#include "core/atomic_file.h"
#include "core/error.h"
#include "core/json_io.h"
#include "core/rng.h"

namespace hymba::classify {

namespace {

bool is_blank(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return c == ' ' || c == '\t' || c == '\r'; });
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Decodes \n, \t, \r and \\; any other backslash stays as it is.
std::string unescape_tsv(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 1 < s.size()) {
      const char n = s[i + 1];
      const char decoded = n == 'n' ? '\n' : n == 't' ? '\t' : n == 'r' ? '\r' : n == '\\' ? '\\' : 0;
      if (decoded != 0) {
        out += decoded;
        ++i;
        continue;
      }
    }
    out += s[i];
  }
  return out;
}

LabeledText parse_tsv_line(std::string_view line, const std::string& where) {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  const size_t tab = line.find('\t');
  HYMBA_CHECK(tab != std::string_view::npos, where, ": no tab between label and text (expected label<TAB>text)");
  LabeledText ex;
  ex.label = std::string(line.substr(0, tab));
  ex.text = unescape_tsv(line.substr(tab + 1));
  ex.where = where;
  HYMBA_CHECK(!is_blank(ex.label), where, ": field 'label' is empty");
  HYMBA_CHECK(!is_blank(ex.text), where, ": field 'text' is empty");
  return ex;
}

LabeledText parse_jsonl_line(std::string_view line, const std::string& where, const ReadOptions& opt) {
  const nlohmann::json j = parse_json(line, where);  // one line naming file:line; duplicate keys refused
  HYMBA_CHECK(j.is_object(), where, ": expected a JSON object, got ", j.type_name());
  LabeledText ex;
  ex.where = where;
  auto label = j.find(opt.label_field);
  HYMBA_CHECK(label != j.end(), where, ": field '", opt.label_field, "' is missing");
  if (label->is_string()) ex.label = label->get<std::string>();
  else if (label->is_number_integer()) ex.label = label->dump();
  else fail(where, ": field '", opt.label_field, "' is a ", label->type_name(), ", expected a string or integer");
  HYMBA_CHECK(!is_blank(ex.label), where, ": field '", opt.label_field, "' is empty");
  auto text = j.find(opt.text_field);
  HYMBA_CHECK(text != j.end(), where, ": field '", opt.text_field, "' is missing");
  HYMBA_CHECK(text->is_string(), where, ": field '", opt.text_field, "' is a ", text->type_name(),
              ", expected a string");
  ex.text = text->get<std::string>();
  HYMBA_CHECK(!is_blank(ex.text), where, ": field '", opt.text_field, "' is empty");
  return ex;
}

}  // namespace

std::vector<LabeledText> read_labeled(const std::string& path, const ReadOptions& opt) {
  std::string format = opt.format;
  if (format == "auto" && is_acl_imdb(path)) return read_acl_imdb(path);
  if (format == "auto") format = ends_with(path, ".jsonl") || ends_with(path, ".json") ? "jsonl"
                                 : ends_with(path, ".csv")                            ? "csv"
                                                                                      : "tsv";
  HYMBA_CHECK(format == "tsv" || format == "jsonl" || format == "csv",
              "--format: expected auto, tsv, jsonl or csv (got '", opt.format, "')");
  if (format == "csv") return read_csv_labeled(path, opt);
  const std::string text = read_file(path);
  std::vector<LabeledText> out;
  size_t pos = 0;
  int64_t line_no = 0;
  while (pos < text.size()) {
    ++line_no;
    const size_t nl = text.find('\n', pos);
    const size_t end = nl == std::string::npos ? text.size() : nl;
    const std::string_view line(text.data() + pos, end - pos);
    pos = nl == std::string::npos ? text.size() : nl + 1;
    if (is_blank(line)) continue;
    const std::string where = path + ":" + std::to_string(line_no);
    out.push_back(format == "tsv" ? parse_tsv_line(line, where) : parse_jsonl_line(line, where, opt));
  }
  HYMBA_CHECK(!out.empty(), path, ": no examples (the file is empty)");
  return out;
}

std::string resolve_val_path(const std::string& data_path, const std::string& val_path) {
  return val_path.empty() ? published_heldout(data_path) : val_path;
}

std::vector<std::string> class_list(const std::vector<LabeledText>& examples, const std::string& given) {
  std::vector<std::string> classes;
  if (!given.empty()) {
    size_t pos = 0;
    while (pos <= given.size()) {
      const size_t comma = std::min(given.find(',', pos), given.size());
      const std::string name = given.substr(pos, comma - pos);
      HYMBA_CHECK(!name.empty(), "--classes: empty class name in '", given, "'");
      HYMBA_CHECK(std::find(classes.begin(), classes.end(), name) == classes.end(), "--classes: '", name,
                  "' is listed twice");
      classes.push_back(name);
      pos = comma + 1;
    }
  } else {
    std::set<std::string> seen;
    for (const LabeledText& e : examples) seen.insert(e.label);
    classes.assign(seen.begin(), seen.end());
  }
  HYMBA_CHECK(classes.size() >= 2, "classification needs at least 2 classes (found ", classes.size(),
              given.empty() ? " distinct label in the data)" : " in --classes)");
  return classes;
}

void split_train_val(const std::vector<LabeledText>& all, double val_fraction, uint64_t seed,
                     std::vector<LabeledText>& train, std::vector<LabeledText>& val) {
  HYMBA_CHECK(all.size() >= 2, "need at least 2 examples to split off a validation set (got ", all.size(), ")");
  HYMBA_CHECK(val_fraction > 0 && val_fraction < 1, "--val-fraction must be in (0, 1) (got ", val_fraction, ")");
  std::vector<size_t> order(all.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  Rng rng = Rng(seed).split(0x5B117);
  for (size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[rng.below(i)]);
  const size_t n_val = std::clamp<size_t>(static_cast<size_t>(std::llround(val_fraction * all.size())), 1,
                                          all.size() - 1);
  train.clear();
  val.clear();
  for (size_t i = 0; i < order.size(); ++i) (i < order.size() - n_val ? train : val).push_back(all[order[i]]);
}

std::vector<LabeledText> sample_examples(const std::vector<LabeledText>& all, int64_t n, uint64_t seed) {
  if (n <= 0 || static_cast<size_t>(n) >= all.size()) return all;
  std::vector<size_t> order(all.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  Rng rng = Rng(seed).split(0x5A3D1E);
  for (size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[rng.below(i)]);
  order.resize(static_cast<size_t>(n));
  std::sort(order.begin(), order.end());
  std::vector<LabeledText> out;
  out.reserve(order.size());
  for (size_t i : order) out.push_back(all[i]);
  return out;
}

std::vector<Example> encode_examples(const std::vector<LabeledText>& texts, const std::vector<std::string>& classes,
                                     const std::vector<const Tokenizer*>& tokenizers, int64_t max_len) {
  std::vector<Example> out(texts.size());
#pragma omp parallel for schedule(dynamic, 16)
  for (size_t i = 0; i < texts.size(); ++i) {
    Example& ex = out[i];
    ex.ids.resize(tokenizers.size());
    for (size_t k = 0; k < tokenizers.size(); ++k) {
      ex.ids[k] = tokenizers[k]->encode(texts[i].text);
      if (max_len > 0 && static_cast<int64_t>(ex.ids[k].size()) > max_len) ex.ids[k].resize(max_len);
    }
  }
  // Errors outside the parallel region (an exception may not leave it).
  for (size_t i = 0; i < texts.size(); ++i) {
    const auto it = std::find(classes.begin(), classes.end(), texts[i].label);
    HYMBA_CHECK(it != classes.end(), texts[i].where, ": field 'label' is '", texts[i].label,
                "', not one of the classifier's classes");
    out[i].label = static_cast<int32_t>(it - classes.begin());
    for (const auto& ids : out[i].ids) HYMBA_CHECK(!ids.empty(), texts[i].where, ": field 'text' has no tokens");
  }
  return out;
}

PaddedBatch pad_batch(const std::vector<Example>& examples, const std::vector<int64_t>& indices, size_t backbone,
                      int32_t pad_id) {
  PaddedBatch b;
  b.B = static_cast<int64_t>(indices.size());
  for (int64_t i : indices) b.T = std::max<int64_t>(b.T, static_cast<int64_t>(examples[i].ids[backbone].size()));
  b.ids.assign(static_cast<size_t>(b.B * b.T), pad_id);
  b.lengths.resize(indices.size());
  for (size_t r = 0; r < indices.size(); ++r) {
    const auto& ids = examples[indices[r]].ids[backbone];
    std::copy(ids.begin(), ids.end(), b.ids.begin() + static_cast<int64_t>(r) * b.T);
    b.lengths[r] = static_cast<int64_t>(ids.size());
  }
  return b;
}

}  // namespace hymba::classify
