// Datasets read as their owners publish them, from local files (no
// download): which files make each of their splits, and the documents in
// them. A --data SPEC in one of these layouts is recognised by its names:
//   TinyStories (text): TinyStories-train.txt and TinyStories-valid.txt
//     (TinyStoriesV2-GPT4-... too), stories separated by <|endoftext|>;
//     SPEC = either file or the folder holding them.
//   WikiText-103 raw: wiki.train.raw, wiki.valid.raw, wiki.test.raw; SPEC =
//     any of them or their folder (wikitext-103-raw/). Each file is one
//     document: the split's text as published.
//   PG-19: a folder holding train/, validation/ and test/ folders of book
//     .txt files (one document per book).
// TinyStories' JSON form (TinyStories_all_data/data00.json ...: a JSON array
// of objects with a "story" field) has no split; read_story_json reads it.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace hymba {

enum class CorpusSplit { kTrain, kValid, kTest };
const char* to_string(CorpusSplit split);  // "train", "valid", "test"

struct PublishedCorpus {
  std::string format;                           // "tinystories", "wikitext-103" or "pg19"
  std::vector<std::string> train, valid, test;  // the files of each split (test may be empty)
  const std::vector<std::string>& files(CorpusSplit split) const;
};

// The published layout SPEC names, or nullopt when it names none of them.
// A layout with a part missing is an error naming the missing file or folder
// (wiki.valid.raw beside wiki.train.raw, validation/ beside train/, ...).
std::optional<PublishedCorpus> find_published_corpus(const std::string& spec);

// The documents of one split; errors name the file (invalid UTF-8, a split
// with no text) or, for a split the dataset does not publish, the split.
std::vector<std::string> read_published_split(const PublishedCorpus& corpus, CorpusSplit split);

// Appends the "story" of every object of TinyStories' JSON form in `path`.
// Errors name the file and item: not an array, an item without a string "story".
void read_story_json(const std::string& path, std::vector<std::string>& docs);

}  // namespace hymba
