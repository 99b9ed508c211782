#include "data/published_corpus.h"

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string_view>
#include <system_error>

#include "core/error.h"
#include "core/json_io.h"
#include "data/text_file.h"

namespace hymba {

namespace fs = std::filesystem;

namespace {

constexpr std::string_view kStorySeparator = "<|endoftext|>";

bool is_file(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec);
}

bool is_dir(const fs::path& p) {
  std::error_code ec;
  return fs::is_directory(p, ec);
}

// "TinyStories-train.txt" -> "TinyStories" (also TinyStoriesV2-GPT4-...);
// empty for any other name. `suffix` is "-train.txt" or "-valid.txt".
std::string tinystories_prefix(const std::string& name, std::string_view suffix) {
  if (!name.starts_with("TinyStories") || !name.ends_with(suffix)) return "";
  return name.substr(0, name.size() - suffix.size());
}

// The files of one published pair or triple in `dir`, each required unless
// optional; a missing one is named with what it belongs to.
std::string require_file(const fs::path& dir, const std::string& name, const std::string& what) {
  const fs::path p = dir / name;
  HYMBA_CHECK(is_file(p), p.string(), ": missing (", what, ")");
  return p.string();
}

PublishedCorpus tinystories_in(const fs::path& dir, const std::string& prefix) {
  PublishedCorpus c;
  c.format = "tinystories";
  const std::string what = "TinyStories publishes " + prefix + "-train.txt and " + prefix + "-valid.txt side by side";
  c.train = {require_file(dir, prefix + "-train.txt", what)};
  c.valid = {require_file(dir, prefix + "-valid.txt", what)};
  return c;
}

PublishedCorpus wikitext_in(const fs::path& dir) {
  PublishedCorpus c;
  c.format = "wikitext-103";
  const std::string what = "WikiText-103 raw publishes wiki.train.raw, wiki.valid.raw and wiki.test.raw";
  c.train = {require_file(dir, "wiki.train.raw", what)};
  c.valid = {require_file(dir, "wiki.valid.raw", what)};
  if (is_file(dir / "wiki.test.raw")) c.test = {(dir / "wiki.test.raw").string()};
  return c;
}

// Every .txt file below `dir`, sorted by path; none is an error naming `dir`.
std::vector<std::string> books_in(const fs::path& dir) {
  std::vector<std::string> files;
  std::error_code ec;
  fs::recursive_directory_iterator it(dir, fs::directory_options::none, ec), end;
  if (ec) fail(dir.string(), ": cannot read directory: ", ec.message());
  for (; it != end; it.increment(ec)) {
    if (ec) fail(dir.string(), ": cannot read directory: ", ec.message());
    if (it->path().extension() == ".txt" && is_file(it->path())) files.push_back(it->path().string());
  }
  HYMBA_CHECK(!files.empty(), dir.string(), ": no .txt books in this PG-19 split folder");
  std::sort(files.begin(), files.end());
  return files;
}

PublishedCorpus pg19_in(const fs::path& dir) {
  PublishedCorpus c;
  c.format = "pg19";
  HYMBA_CHECK(is_dir(dir / "validation"), (dir / "validation").string(),
              ": missing (PG-19 publishes train/, validation/ and test/ folders of .txt books)");
  c.train = books_in(dir / "train");
  c.valid = books_in(dir / "validation");
  if (is_dir(dir / "test")) c.test = books_in(dir / "test");
  return c;
}

// The one TinyStories prefix with a -train.txt or -valid.txt file in `dir`.
std::string tinystories_prefix_in(const fs::path& dir) {
  std::string found;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    std::string prefix = tinystories_prefix(name, "-train.txt");
    if (prefix.empty()) prefix = tinystories_prefix(name, "-valid.txt");
    if (prefix.empty() || prefix == found) continue;
    HYMBA_CHECK(found.empty(), dir.string(), ": holds two TinyStories versions (", std::min(found, prefix), " and ",
                std::max(found, prefix), "); point --data at one -train.txt file");
    found = prefix;
  }
  return found;
}

std::optional<PublishedCorpus> published_in_dir(const fs::path& dir) {
  if (is_file(dir / "wiki.train.raw") || is_file(dir / "wiki.valid.raw") || is_file(dir / "wiki.test.raw"))
    return wikitext_in(dir);
  if (const std::string prefix = tinystories_prefix_in(dir); !prefix.empty()) return tinystories_in(dir, prefix);
  // IMDB's aclImdb/ (train/pos, train/neg) stays a plain folder of texts.
  const bool imdb = is_dir(dir / "train" / "pos") || is_dir(dir / "train" / "neg");
  if (is_dir(dir / "train") && (is_dir(dir / "validation") || is_dir(dir / "test")) && !imdb) return pg19_in(dir);
  return std::nullopt;
}

// TinyStories' text files: stories between <|endoftext|> lines, trimmed.
void split_stories(const std::string& text, std::vector<std::string>& docs) {
  size_t pos = 0;
  while (pos <= text.size()) {
    const size_t sep = std::min(text.find(kStorySeparator, pos), text.size());
    const std::string_view story = trim_text(std::string_view(text).substr(pos, sep - pos));
    if (!story.empty()) docs.emplace_back(story);
    pos = sep + kStorySeparator.size();
  }
}

}  // namespace

const char* to_string(CorpusSplit split) {
  return split == CorpusSplit::kTrain ? "train" : split == CorpusSplit::kValid ? "valid" : "test";
}

const std::vector<std::string>& PublishedCorpus::files(CorpusSplit split) const {
  return split == CorpusSplit::kTrain ? train : split == CorpusSplit::kValid ? valid : test;
}

std::optional<PublishedCorpus> find_published_corpus(const std::string& spec) {
  const fs::path p = fs::path(spec).lexically_normal();
  if (is_dir(p)) return published_in_dir(p);
  if (!is_file(p)) return std::nullopt;
  const std::string name = p.filename().string();
  const fs::path dir = p.has_parent_path() ? p.parent_path() : fs::path(".");
  if (name == "wiki.train.raw" || name == "wiki.valid.raw" || name == "wiki.test.raw") return wikitext_in(dir);
  std::string prefix = tinystories_prefix(name, "-train.txt");
  if (prefix.empty()) prefix = tinystories_prefix(name, "-valid.txt");
  if (!prefix.empty()) return tinystories_in(dir, prefix);
  return std::nullopt;
}

std::vector<std::string> read_published_split(const PublishedCorpus& corpus, CorpusSplit split) {
  const std::vector<std::string>& files = corpus.files(split);
  HYMBA_CHECK(!files.empty(), corpus.format, ": ", corpus.train.front(), " has no published ", to_string(split),
              " split beside it");
  std::vector<std::string> docs;
  for (const std::string& f : files) {
    std::string text = read_utf8_text(f);
    if (corpus.format == "tinystories")
      split_stories(text, docs);
    else if (!is_blank_text(text))
      docs.push_back(std::move(text));
  }
  HYMBA_CHECK(!docs.empty(), files.front(), ": the ", to_string(split), " split of this ", corpus.format,
              " corpus holds no text");
  return docs;
}

void read_story_json(const std::string& path, std::vector<std::string>& docs) {
  const std::string text = read_utf8_text(path);
  const nlohmann::json j = parse_json(text, path);
  HYMBA_CHECK(j.is_array(), path, ": expected a JSON array of objects with a string \"story\" field (TinyStories' ",
              "JSON form), got ", j.type_name());
  for (size_t i = 0; i < j.size(); ++i) {
    const nlohmann::json& item = j[i];
    HYMBA_CHECK(item.is_object(), path, ": item ", i, " is a ", item.type_name(),
                ", expected an object with \"story\"");
    auto it = item.find("story");
    HYMBA_CHECK(it != item.end(), path, ": item ", i, " has no \"story\" field");
    HYMBA_CHECK(it->is_string(), path, ": item ", i, ": \"story\" is a ", it->type_name(), ", expected a string");
    const std::string_view story = trim_text(it->get_ref<const std::string&>());
    if (!story.empty()) docs.emplace_back(story);
  }
}

}  // namespace hymba
