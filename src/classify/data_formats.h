// Labelled data in the layouts datasets are published in (read_labeled
// dispatches here):
//   CSV: a header row naming the columns, then one example a row (RFC 4180:
//        quoted fields may hold commas, newlines and "" for a quote). The
//        text and label columns are ReadOptions' text_field / label_field
//        ("text", "label"); Kaggle's IMDB file names them "review" and
//        "sentiment", which are taken when "text" / "label" are absent.
//   aclImdb: IMDB as Stanford publishes it (aclImdb_v1.tar.gz unpacked):
//        aclImdb/{train,test}/{pos,neg}/<id>_<rating>.txt, labels "pos" and
//        "neg" (unsup/ and the .feat / urls files are not read). PATH =
//        aclImdb (its train split; the test split is the published held-out
//        one) or aclImdb/train, aclImdb/test (that split).
#pragma once

#include <string>
#include <vector>

#include "classify/data.h"

namespace hymba::classify {

std::vector<LabeledText> read_csv_labeled(const std::string& path, const ReadOptions& opt);

// Whether `path` is an aclImdb folder or one of its split folders.
bool is_acl_imdb(const std::string& path);
std::vector<LabeledText> read_acl_imdb(const std::string& path);

// The published held-out split of `path` (aclImdb -> aclImdb/test), or ""
// when it publishes none: what --val defaults to, and what eval reads.
std::string published_heldout(const std::string& path);

}  // namespace hymba::classify
