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

namespace hymba {

namespace fs = std::filesystem;

namespace {

enum class SpecKind { kDefault, kTextFile, kDirectory, kJsonl };

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

bool is_blank(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; });
}

// Offset of the first byte that does not start or continue a well-formed
// UTF-8 sequence (no overlongs, surrogates or code points past U+10FFFF), or
// npos when all of `s` is valid.
size_t first_invalid_utf8(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  size_t i = 0;
  while (i < n) {
    // Fast path: eight ASCII bytes at a time.
    if (i + 8 <= n) {
      uint64_t w;
      std::memcpy(&w, p + i, 8);
      if ((w & 0x8080808080808080ull) == 0) {
        i += 8;
        continue;
      }
    }
    unsigned c = p[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t len;
    unsigned lo = 0x80, hi = 0xBF;  // allowed range of the second byte
    if (c >= 0xC2 && c <= 0xDF) {
      len = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
      len = 3;
      if (c == 0xE0) lo = 0xA0;  // overlong
      if (c == 0xED) hi = 0x9F;  // surrogates
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4;
      if (c == 0xF0) lo = 0x90;  // overlong
      if (c == 0xF4) hi = 0x8F;  // past U+10FFFF
    } else {
      return i;
    }
    if (i + len > n) return i;
    if (p[i + 1] < lo || p[i + 1] > hi) return i;
    for (size_t k = 2; k < len; ++k)
      if (p[i + k] < 0x80 || p[i + k] > 0xBF) return i;
    i += len;
  }
  return std::string_view::npos;
}

// Fails with "path:line: invalid UTF-8 at byte N" when `text` is not UTF-8.
void check_utf8(const std::string& path, std::string_view text) {
  size_t bad = first_invalid_utf8(text);
  if (bad == std::string_view::npos) return;
  size_t line = 1 + static_cast<size_t>(std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(bad), '\n'));
  fail(path, ":", line, ": invalid UTF-8 at byte ", bad, " (the data must be UTF-8 text)");
}

// The file's text, checked to be UTF-8, without a leading byte order mark.
std::string read_text(const std::string& path) {
  std::string text = read_file(path);
  check_utf8(path, text);
  if (text.starts_with("\xEF\xBB\xBF")) text.erase(0, 3);
  return text;
}

SpecKind classify(const std::string& spec) {
  if (spec == kDefaultCorpus) return SpecKind::kDefault;
  HYMBA_CHECK(!spec.empty(), "--data: empty corpus path (give a .txt or .jsonl file, a directory, or \"default\")");
  std::error_code ec;
  fs::file_status st = fs::status(spec, ec);
  if (ec || !fs::exists(st)) {
    fail(spec, ": no such file or directory", ec && ec != std::errc::no_such_file_or_directory ? " (" + ec.message() + ")" : "");
  }
  if (fs::is_directory(st)) return SpecKind::kDirectory;
  if (fs::is_regular_file(st)) {
    if (ends_with(spec, ".txt")) return SpecKind::kTextFile;
    if (ends_with(spec, ".jsonl")) return SpecKind::kJsonl;
  }
  fail(spec, ": unsupported corpus (expected a .txt or .jsonl file, a directory of .txt files, or \"default\")");
}

std::vector<std::string> list_txt_files(const std::string& dir) {
  std::vector<std::string> files;
  std::error_code ec;
  // Directory symlinks are not followed (no loops); file symlinks are.
  fs::recursive_directory_iterator it(dir, fs::directory_options::none, ec), end;
  if (ec) fail(dir, ": cannot read directory: ", ec.message());
  for (; it != end; it.increment(ec)) {
    if (ec) break;
    const fs::path& p = it->path();
    std::error_code sec;
    if (p.extension() == ".txt" && fs::is_regular_file(p, sec)) files.push_back(p.string());
  }
  if (ec) fail(dir, ": cannot read directory: ", ec.message());
  HYMBA_CHECK(!files.empty(), dir, ": no .txt files in this directory (searched recursively)");
  std::sort(files.begin(), files.end());
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
    if (!is_blank(d)) docs.emplace_back(d);
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
  const std::string text = read_text(path);
  size_t pos = 0;
  int64_t line_no = 0;
  while (pos < text.size()) {
    ++line_no;
    size_t nl = text.find('\n', pos);
    size_t end = nl == std::string::npos ? text.size() : nl;
    std::string_view line(text.data() + pos, end - pos);
    pos = nl == std::string::npos ? text.size() : nl + 1;
    if (is_blank(line)) continue;
    const nlohmann::json j = parse_json(line, path + ":" + std::to_string(line_no));
    HYMBA_CHECK(j.is_object(), path, ":", line_no, ": expected a JSON object with a string \"text\" field, got ",
                j.type_name());
    auto it = j.find("text");
    HYMBA_CHECK(it != j.end(), path, ":", line_no, ": the object has no \"text\" field");
    HYMBA_CHECK(it->is_string(), path, ":", line_no, ": \"text\" is a ", it->type_name(), ", expected a string");
    std::string doc = it->get<std::string>();
    if (!is_blank(doc)) docs.push_back(std::move(doc));
  }
}

}  // namespace

std::vector<std::string> corpus_files(const std::string& spec) {
  switch (classify(spec)) {
    case SpecKind::kDefault:
      return list_fortune_files(kFortunesDir);
    case SpecKind::kDirectory:
      return list_txt_files(spec);
    case SpecKind::kTextFile:
    case SpecKind::kJsonl:
      break;
  }
  return {spec};
}

std::vector<std::string> read_fortunes(const std::string& dir) {
  std::vector<std::string> docs;
  for (const std::string& f : list_fortune_files(dir)) split_fortunes(read_text(f), docs);
  HYMBA_CHECK(!docs.empty(), dir, ": the fortune files hold no text");
  return docs;
}

std::vector<std::string> read_documents(const std::string& spec) {
  std::vector<std::string> docs;
  switch (classify(spec)) {
    case SpecKind::kDefault:
      return read_fortunes(kFortunesDir);
    case SpecKind::kTextFile: {
      std::string text = read_text(spec);
      HYMBA_CHECK(!is_blank(text), spec, ": empty corpus (the file holds no text)");
      docs.push_back(std::move(text));
      return docs;
    }
    case SpecKind::kDirectory:
      for (const std::string& f : list_txt_files(spec)) {
        std::string text = read_text(f);
        if (!is_blank(text)) docs.push_back(std::move(text));
      }
      HYMBA_CHECK(!docs.empty(), spec, ": empty corpus (every .txt file in it is empty)");
      return docs;
    case SpecKind::kJsonl:
      read_jsonl(spec, docs);
      HYMBA_CHECK(!docs.empty(), spec, ": empty corpus (no line has a non-empty \"text\")");
      return docs;
  }
  return docs;
}

}  // namespace hymba
