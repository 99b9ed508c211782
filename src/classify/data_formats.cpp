#include "classify/data_formats.h"

#include <algorithm>
#include <filesystem>
#include <string_view>
#include <system_error>

#include "core/atomic_file.h"
#include "core/error.h"

namespace hymba::classify {

namespace fs = std::filesystem;

namespace {

bool is_dir(const fs::path& p) {
  std::error_code ec;
  return fs::is_directory(p, ec);
}

bool is_split_dir(const fs::path& p) { return is_dir(p / "pos") || is_dir(p / "neg"); }

// One CSV record from `pos` (RFC 4180); advances past its line end.
std::vector<std::string> csv_record(std::string_view text, size_t& pos, const std::string& where) {
  std::vector<std::string> fields(1);
  bool quoted = false;
  while (pos < text.size()) {
    const char c = text[pos++];
    if (quoted) {
      if (c != '"')
        fields.back() += c;
      else if (pos < text.size() && text[pos] == '"')
        fields.back() += '"', ++pos;
      else
        quoted = false;
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      fields.emplace_back();
    } else if (c == '\n') {
      break;
    } else if (c != '\r') {
      fields.back() += c;
    }
  }
  HYMBA_CHECK(!quoted, where, ": a quoted field is not closed before the end of the file");
  return fields;
}

size_t column(const std::vector<std::string>& header, const std::string& want, const std::string& fallback,
              const std::string& path) {
  for (const std::string& name : {want, fallback}) {
    auto it = std::find(header.begin(), header.end(), name);
    if (it != header.end()) return static_cast<size_t>(it - header.begin());
  }
  fail(
      path, ":1: the header has no '", want, "' column (columns: ",
      [&] {
        std::string s;
        for (const std::string& h : header) s += (s.empty() ? "" : ", ") + h;
        return s;
      }(),
      ")");
}

std::vector<std::string> reviews_in(const fs::path& dir) {
  std::vector<std::string> files;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    if (it->path().extension() == ".txt") files.push_back(it->path().string());
  if (ec) fail(dir.string(), ": cannot read directory: ", ec.message());
  std::sort(files.begin(), files.end());
  return files;
}

std::vector<LabeledText> read_split(const fs::path& split) {
  std::vector<LabeledText> out;
  for (const char* label : {"neg", "pos"}) {
    HYMBA_CHECK(is_dir(split / label), (split / label).string(),
                ": missing (aclImdb publishes pos/ and neg/ folders of reviews in train/ and test/)");
    for (const std::string& f : reviews_in(split / label)) {
      std::string text = read_file(f);
      HYMBA_CHECK(text.find_first_not_of(" \t\r\n") != std::string::npos, f, ": empty review");
      out.push_back({label, std::move(text), f});
    }
  }
  HYMBA_CHECK(!out.empty(), split.string(), ": no .txt reviews in pos/ or neg/");
  return out;
}

}  // namespace

std::vector<LabeledText> read_csv_labeled(const std::string& path, const ReadOptions& opt) {
  const std::string text = read_file(path);
  size_t pos = text.starts_with("\xEF\xBB\xBF") ? 3 : 0;
  const std::vector<std::string> header = csv_record(text, pos, path + ":1");
  const size_t text_col = column(header, opt.text_field, "review", path);
  const size_t label_col = column(header, opt.label_field, "sentiment", path);
  std::vector<LabeledText> out;
  for (int64_t row = 2; pos < text.size(); ++row) {
    const std::string where = path + ": row " + std::to_string(row);
    std::vector<std::string> r = csv_record(text, pos, where);
    if (r.size() == 1 && r[0].empty()) continue;  // a blank line
    HYMBA_CHECK(r.size() == header.size(), where, ": ", r.size(), " fields, the header has ", header.size());
    HYMBA_CHECK(!r[label_col].empty(), where, ": field '", header[label_col], "' is empty");
    HYMBA_CHECK(r[text_col].find_first_not_of(" \t\r\n") != std::string::npos, where, ": field '", header[text_col],
                "' is empty");
    out.push_back({std::move(r[label_col]), std::move(r[text_col]), where});
  }
  HYMBA_CHECK(!out.empty(), path, ": no examples below the header");
  return out;
}

bool is_acl_imdb(const std::string& path) {
  const fs::path p(path);
  return is_dir(p) && (is_split_dir(p) || is_dir(p / "train") || is_dir(p / "test"));
}

std::vector<LabeledText> read_acl_imdb(const std::string& path) {
  const fs::path p(path);
  if (is_split_dir(p)) return read_split(p);
  HYMBA_CHECK(is_dir(p / "train"), (p / "train").string(), ": missing (aclImdb publishes train/ and test/ folders)");
  return read_split(p / "train");
}

std::string published_heldout(const std::string& path) {
  const fs::path p(path);
  if (!is_dir(p) || is_split_dir(p) || !is_dir(p / "train")) return "";
  HYMBA_CHECK(is_dir(p / "test"), (p / "test").string(), ": missing (aclImdb publishes train/ and test/ folders)");
  return (p / "test").string();
}

}  // namespace hymba::classify
