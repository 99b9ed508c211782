// A run's recipe (every option that changes the weights it produces), the
// state each checkpoint records, and the checks a resume makes against both.
// Internal to train/; the public pieces are declared in train/trainer.h.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

#include "core/json_io.h"
#include "model/config.h"
#include "train/trainer.h"

namespace hymba {

// train_state.json, read field by field with typed getters: a missing key or
// a wrong type is one line naming the file and field.
struct SavedState {
  int64_t step = 0, tokens = 0, best_step = -1;
  double best_val_loss = INFINITY, train_seconds = 0.0;
  double final_train_loss = 0.0, final_val_loss = 0.0, final_val_accuracy = 0.0;
};
SavedState read_train_state(const JsonFields& f);

// The whole recipe as stored in each checkpoint ("run"), with the dropout in effect.
nlohmann::json run_recipe(const TrainOptions& o, double dropout);

// Refuses a resume whose recipe (`saved` against `now`) or model differs from
// the run's, naming every change; a different thread count is a note on `log`.
void resume_checks(const JsonFields& saved, const nlohmann::json& now, const ModelConfig* asked_model,
                   const ModelConfig& run_model, const std::string& tokenizer_path, const std::string& run_tokenizer,
                   std::FILE* log);

// The options' own ranges and combinations, each error naming its flag.
void validate_train_options(const TrainOptions& o);

}  // namespace hymba
