// Where a training run starts: its directory (locked, swept, checked against
// --resume) and its model and tokenizer: the run's last checkpoint
// (--resume), another checkpoint's weights (--init), or a new model.
// Internal to train/.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>

#include <nlohmann/json.hpp>

#include "tokenizer/tokenizer.h"
#include "dist/communicator.h"
#include "model/model.h"
#include "train/run_lock.h"
#include "train/run_recipe.h"
#include "train/trainer.h"

namespace hymba {

// Creates opt.out_dir; rank 0 takes its lock and removes what a killed writer
// left behind. A directory holding a run needs --resume, --resume needs one.
// Every rank returns once all have seen the directory as it was; `lock`
// holds rank 0's lock for the run's life.
void open_run_directory(const TrainOptions& opt, const dist::Communicator& comm, std::FILE* log,
                        std::optional<RunLock>& lock);

struct RunStart {
  std::unique_ptr<Tokenizer> tok;
  std::unique_ptr<Model> model;
  SavedState state;  // the resumed checkpoint's; a new run's zeros
  nlohmann::json saved_run = nlohmann::json::object();  // the resumed run's recipe
  int64_t start_step = 0;
};

// The model and tokenizer the run trains, after the memory they need is
// checked. A resume checks the recipe against the run's and may fill
// opt.init_from with the run's own.
RunStart start_run(const ModelConfig& base_cfg, TrainOptions& opt, const dist::Communicator& comm, std::FILE* log);

}  // namespace hymba
