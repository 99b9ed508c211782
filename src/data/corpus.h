// Text corpora (--data SPEC): the documents of a corpus and the files they
// come from. data/dataset.h tokenises them into train/val splits;
// data/batch_sampler.h draws training batches from those.
//   SPEC = a .txt file | a directory of .txt files | a .jsonl file with a
//          "text" field per line | a .json file (or a directory of them) in
//          TinyStories' JSON form | a published dataset with its own splits
//          (TinyStories-train.txt, WikiText-103 raw, PG-19:
//          data/published_corpus.h) | "default" (the built-in corpus:
//          Debian's fortunes, split into documents; no download).
#pragma once

#include <string>
#include <vector>

#include "data/published_corpus.h"

namespace hymba {

inline constexpr const char* kDefaultCorpus = "default";
// Where Debian's fortunes-min package (scripts/setup.sh) puts the data files.
inline constexpr const char* kFortunesDir = "/usr/share/games/fortunes";

// The documents of a corpus, in a deterministic order. Errors name the file
// (and line for JSONL): missing/unreadable, empty, invalid UTF-8, a JSONL
// line that is not an object with a string "text".
//   .txt file: one document; directory: every *.txt below it (recursive,
//   sorted by path), one document each; .jsonl: the "text" of each non-blank
//   line; .json: each item's "story"; "default": read_fortunes(kFortunesDir);
//   a published dataset: the documents of `split` (read_published_split).
//   Whitespace-only documents are dropped; a leading UTF-8 byte order mark
//   is skipped. A split other than train of a corpus that publishes none is
//   an error naming the spec.
std::vector<std::string> read_documents(const std::string& spec, CorpusSplit split = CorpusSplit::kTrain);

// Whether SPEC is a dataset that publishes its own train/valid(/test) splits.
bool has_published_splits(const std::string& spec);

// The fortune data files in `dir` (not *.dat / *.u8; sorted by name), split
// on lines that are exactly "%". Separate from read_documents so the
// missing-package error can be tested with any directory.
std::vector<std::string> read_fortunes(const std::string& dir);

// The files read_documents(spec, split) reads, in its order (paths as found:
// under the spec, or in kFortunesDir for "default"). Cheap: lists and checks
// paths without reading them; errors as read_documents for missing paths, an
// unsupported file type, a directory without .txt files or a split the
// corpus does not publish.
std::vector<std::string> corpus_files(const std::string& spec, CorpusSplit split = CorpusSplit::kTrain);

}  // namespace hymba
