// Reading corpora: which files a --data SPEC names, and the documents in them.
// The token dataset and its cache live in dataset.cpp.
#include "data/corpus.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <string_view>
#include <system_error>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/json_io.h"
#include "data/published_corpus.h"
#include "data/text_file.h"

namespace hymba {

namespace fs = std::filesystem;

namespace {

enum class SpecKind { kDefault, kTextFile, kDirectory, kJsonl, kStoryJson, kPublished };

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

SpecKind classify(const std::string& spec) {
  if (spec == kDefaultCorpus) return SpecKind::kDefault;
  HYMBA_CHECK(!spec.empty(), "--data: empty corpus path (give a .txt or .jsonl file, a directory, or \"default\")");
  std::error_code ec;
  fs::file_status st = fs::status(spec, ec);
  if (ec || !fs::exists(st)) {
    fail(spec, ": no such file or directory", ec && ec != std::errc::no_such_file_or_directory ? " (" + ec.message() + ")" : "");
  }
  if (find_published_corpus(spec)) return SpecKind::kPublished;
  if (fs::is_directory(st)) return SpecKind::kDirectory;
  if (fs::is_regular_file(st)) {
    if (ends_with(spec, ".txt")) return SpecKind::kTextFile;
    if (ends_with(spec, ".jsonl")) return SpecKind::kJsonl;
    if (ends_with(spec, ".json")) return SpecKind::kStoryJson;
  }
  fail(spec, ": unsupported corpus (expected a .txt, .jsonl or TinyStories .json file, TinyStories-train.txt, "
       "wiki.train.raw, a directory of .txt files, a PG-19 folder, or \"default\")");
}

// Every file with extension `ext` below `dir`, sorted by path.
std::vector<std::string> list_files(const std::string& dir, const char* ext) {
  std::vector<std::string> files;
  std::error_code ec;
  // Directory symlinks are not followed (no loops); file symlinks are.
  fs::recursive_directory_iterator it(dir, fs::directory_options::none, ec), end;
  if (ec) fail(dir, ": cannot read directory: ", ec.message());
  for (; it != end; it.increment(ec)) {
    if (ec) break;
    const fs::path& p = it->path();
    std::error_code sec;
    if (p.extension() == ext && fs::is_regular_file(p, sec)) files.push_back(p.string());
  }
  if (ec) fail(dir, ": cannot read directory: ", ec.message());
  std::sort(files.begin(), files.end());
  return files;
}

// The .txt files below `dir`, or else its TinyStories .json files.
std::vector<std::string> list_txt_files(const std::string& dir) {
  std::vector<std::string> files = list_files(dir, ".txt");
  if (files.empty()) files = list_files(dir, ".json");
  HYMBA_CHECK(!files.empty(), dir, ": no .txt files (nor TinyStories .json files) in this directory (searched "
              "recursively)");
  return files;
}

std::vector<std::string> list_fortune_files(const std::string& dir) {
  std::error_code ec;
  HYMBA_CHECK(fs::is_directory(dir, ec), dir,
              ": not found; the built-in corpus needs Debian's fortunes-min package (run scripts/setup.sh, "
              "or apt-get install fortunes-min)");
  std::vector<std::string> files;
  fs::directory_iterator it(dir, ec), end;
  if (ec) fail(dir, ": cannot read directory: ", ec.message());
  for (; it != end; it.increment(ec)) {
    if (ec) break;
    const fs::path& p = it->path();
    std::string name = p.filename().string();
    if (name.starts_with(".") || ends_with(name, ".dat") || ends_with(name, ".u8")) continue;
    std::error_code sec;
    if (fs::is_regular_file(p, sec)) files.push_back(p.string());  // follows symlinks
  }
  if (ec) fail(dir, ": cannot read directory: ", ec.message());
  std::sort(files.begin(), files.end());
  // Two names for one file (a symlink beside its target) would double it.
  std::set<std::string> seen;
  std::erase_if(files, [&](const std::string& f) {
    std::error_code cec;
    fs::path real = fs::canonical(f, cec);
    return !seen.insert(cec ? f : real.string()).second;
  });
  HYMBA_CHECK(!files.empty(), dir, ": no fortune data files; reinstall Debian's fortunes-min (scripts/setup.sh)");
  return files;
}

// Splits a fortune file on lines that are exactly "%" (a "\r" before the
// newline is tolerated); keeps each fortune's text as written.
void split_fortunes(const std::string& text, std::vector<std::string>& docs) {
  size_t doc_begin = 0, pos = 0;
  auto flush = [&](size_t end) {
    std::string_view d(text.data() + doc_begin, end - doc_begin);
    if (!is_blank_text(d)) docs.emplace_back(d);
  };
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    size_t line_end = nl == std::string::npos ? text.size() : nl;
    std::string_view line(text.data() + pos, line_end - pos);
    size_t next = nl == std::string::npos ? text.size() : nl + 1;
    if (line == "%" || line == "%\r") {
      flush(pos);
      doc_begin = next;
    }
    pos = next;
  }
  flush(text.size());
}

void read_jsonl(const std::string& path, std::vector<std::string>& docs) {
  const std::string text = read_utf8_text(path);
  size_t pos = 0;
  int64_t line_no = 0;
  while (pos < text.size()) {
    ++line_no;
    size_t nl = text.find('\n', pos);
    size_t end = nl == std::string::npos ? text.size() : nl;
    std::string_view line(text.data() + pos, end - pos);
    pos = nl == std::string::npos ? text.size() : nl + 1;
    if (is_blank_text(line)) continue;
    const nlohmann::json j = parse_json(line, path + ":" + std::to_string(line_no));
    HYMBA_CHECK(j.is_object(), path, ":", line_no, ": expected a JSON object with a string \"text\" field, got ",
                j.type_name());
    auto it = j.find("text");
    HYMBA_CHECK(it != j.end(), path, ":", line_no, ": the object has no \"text\" field");
    HYMBA_CHECK(it->is_string(), path, ":", line_no, ": \"text\" is a ", it->type_name(), ", expected a string");
    std::string doc = it->get<std::string>();
    if (!is_blank_text(doc)) docs.push_back(std::move(doc));
  }
}

}  // namespace

std::vector<std::string> corpus_files(const std::string& spec, CorpusSplit split) {
  const SpecKind kind = classify(spec);
  if (kind == SpecKind::kPublished) {
    const PublishedCorpus c = *find_published_corpus(spec);
    HYMBA_CHECK(!c.files(split).empty(), spec, ": this ", c.format, " corpus has no published ", to_string(split),
                " split");
    return c.files(split);
  }
  HYMBA_CHECK(split == CorpusSplit::kTrain, spec, ": publishes no ", to_string(split),
              " split (only TinyStories' .txt pair, WikiText-103 and PG-19 do)");
  switch (kind) {
    case SpecKind::kDefault:
      return list_fortune_files(kFortunesDir);
    case SpecKind::kDirectory:
      return list_txt_files(spec);
    default:
      break;
  }
  return {spec};
}

bool has_published_splits(const std::string& spec) { return classify(spec) == SpecKind::kPublished; }

std::vector<std::string> read_fortunes(const std::string& dir) {
  std::vector<std::string> docs;
  for (const std::string& f : list_fortune_files(dir)) split_fortunes(read_utf8_text(f), docs);
  HYMBA_CHECK(!docs.empty(), dir, ": the fortune files hold no text");
  return docs;
}

std::vector<std::string> read_documents(const std::string& spec, CorpusSplit split) {
  std::vector<std::string> docs;
  const SpecKind kind = classify(spec);
  if (kind == SpecKind::kPublished) return read_published_split(*find_published_corpus(spec), split);
  (void)corpus_files(spec, split);  // names the split an unsplit corpus lacks
  switch (kind) {
    case SpecKind::kPublished:
      break;
    case SpecKind::kDefault:
      return read_fortunes(kFortunesDir);
    case SpecKind::kTextFile: {
      std::string text = read_utf8_text(spec);
      HYMBA_CHECK(!is_blank_text(text), spec, ": empty corpus (the file holds no text)");
      docs.push_back(std::move(text));
      return docs;
    }
    case SpecKind::kDirectory:
      for (const std::string& f : list_txt_files(spec)) {
        if (ends_with(f, ".json")) {
          read_story_json(f, docs);
          continue;
        }
        std::string text = read_utf8_text(f);
        if (!is_blank_text(text)) docs.push_back(std::move(text));
      }
      HYMBA_CHECK(!docs.empty(), spec, ": empty corpus (every file in it is empty)");
      return docs;
    case SpecKind::kStoryJson:
      read_story_json(spec, docs);
      HYMBA_CHECK(!docs.empty(), spec, ": empty corpus (no item has a non-empty \"story\")");
      return docs;
    case SpecKind::kJsonl:
      read_jsonl(spec, docs);
      HYMBA_CHECK(!docs.empty(), spec, ": empty corpus (no line has a non-empty \"text\")");
      return docs;
  }
  return docs;
}

}  // namespace hymba
