// Labelled text for sequence classification: reading TSV / JSONL files, the
// class list, train/validation splits and tokenized, right-padded batches.
//
//   TSV:   one example a line, `label<TAB>text`; the text is everything after
//          the first tab, with the escapes \n, \t, \r and \\ decoded (so a
//          multi-line document fits on one line). Blank lines are skipped.
//   JSONL: one object a line, {"label": ..., "text": ...}; the field names are
//          options; a label may be a string or an integer.
//   CSV and IMDB's aclImdb folder: classify/data_formats.h.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace hymba::classify {

struct LabeledText {
  std::string label;
  std::string text;
  std::string where;  // "file:line", for errors about this example
};

struct ReadOptions {
  std::string format = "auto";  // auto (aclImdb folder; .jsonl/.json -> jsonl, .csv -> csv, else tsv) | tsv | jsonl | csv
  std::string label_field = "label";
  std::string text_field = "text";
};

// Reads every example of path. Errors (one line, naming file:line and the
// field): missing or empty file, a line without a tab, an empty label or
// text, bad JSON, a missing or mistyped field.
std::vector<LabeledText> read_labeled(const std::string& path, const ReadOptions& opt = {});

// The validation file a run uses: `val_path`, else the data's published
// held-out split (aclImdb's test/), else "" (split val_fraction off the data).
std::string resolve_val_path(const std::string& data_path, const std::string& val_path);

// The class names: `given` (comma-separated, in that order; duplicates are an
// error) or else the sorted distinct labels of the examples.
std::vector<std::string> class_list(const std::vector<LabeledText>& examples, const std::string& given = "");

// Deterministic shuffle by seed, then the last round(fraction * n) examples
// (at least 1) go to val. Needs at least 2 examples.
void split_train_val(const std::vector<LabeledText>& all, double val_fraction, uint64_t seed,
                     std::vector<LabeledText>& train, std::vector<LabeledText>& val);

// At most n examples (n <= 0 or n >= size: all), chosen by a seeded shuffle
// so a file sorted by label (IMDB's) still gives every class; kept in file order.
std::vector<LabeledText> sample_examples(const std::vector<LabeledText>& all, int64_t n, uint64_t seed);

// One tokenized example: ids per backbone (each backbone has its own
// tokenizer) and the class index.
struct Example {
  std::vector<std::vector<int32_t>> ids;
  int32_t label = 0;
};

// Tokenizes with each tokenizer and truncates to max_len tokens (the first
// ones; max_len <= 0 keeps all). A label not in classes is an error naming
// file:line and the label; so is a text with no tokens.
std::vector<Example> encode_examples(const std::vector<LabeledText>& texts, const std::vector<std::string>& classes,
                                     const std::vector<const Tokenizer*>& tokenizers, int64_t max_len);

// A right-padded batch for one backbone: ids [B, T] with T the longest
// sequence of the batch, pad_id after each sequence's lengths[b] real tokens.
struct PaddedBatch {
  int64_t B = 0, T = 0;
  std::vector<int32_t> ids;
  std::vector<int64_t> lengths;
};
PaddedBatch pad_batch(const std::vector<Example>& examples, const std::vector<int64_t>& indices, size_t backbone,
                      int32_t pad_id);

}  // namespace hymba::classify
