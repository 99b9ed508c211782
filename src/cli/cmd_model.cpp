// `hymba init`: a freshly initialised checkpoint from a preset or config.
// `hymba forward`: run a checkpoint on given ids and dump logits (and loss and
// gradients) as safetensors, to debug or to compare with other implementations.
#include <cctype>
#include <cstdio>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/model_options.h"
#include "core/error.h"
#include "core/safetensors.h"
#include "formats/checkpoint.h"
#include "model/summary.h"

namespace hymba::cli {

namespace {

// "1,2,3;4,5,6" -> {{1,2,3},{4,5,6}}; every sequence must have the same length.
std::vector<std::vector<int32_t>> parse_batches(const std::string& text, const char* flag) {
  std::vector<std::vector<int32_t>> out;
  std::stringstream rows(text);
  std::string row;
  while (std::getline(rows, row, ';')) {
    std::vector<int32_t> seq;
    std::stringstream cells(row);
    std::string cell;
    while (std::getline(cells, cell, ',')) {
      size_t used = 0;
      long long v = 0;
      try {
        v = std::stoll(cell, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      while (used < cell.size() && std::isspace(static_cast<unsigned char>(cell[used]))) ++used;
      HYMBA_CHECK(used == cell.size() && used > 0, flag, ": '", cell, "' is not an integer");
      HYMBA_CHECK(v >= -2147483648LL && v <= 2147483647LL, flag, ": ", v, " is out of range");
      seq.push_back(static_cast<int32_t>(v));
    }
    HYMBA_CHECK(!seq.empty(), flag, ": sequence ", out.size(), " is empty");
    HYMBA_CHECK(out.empty() || seq.size() == out.front().size(), flag, ": sequence ", out.size(), " has ",
                seq.size(), " tokens but sequence 0 has ", out.front().size(), " (all must be equal)");
    out.push_back(std::move(seq));
  }
  HYMBA_CHECK(!out.empty(), flag, ": no tokens given");
  return out;
}

std::vector<int32_t> flatten(const std::vector<std::vector<int32_t>>& b) {
  std::vector<int32_t> flat;
  for (const auto& s : b) flat.insert(flat.end(), s.begin(), s.end());
  return flat;
}

}  // namespace

void register_model_commands(CLI::App& app, const GlobalOptions& global) {
  {
    struct Options {
      ModelChoice model;
      std::string out;
      uint64_t seed = 1234;
      int64_t vocab = 0;
    };
    auto opts = std::make_shared<Options>();
    CLI::App* cmd = app.add_subcommand("init", "Write a freshly initialised checkpoint (config.json + model.safetensors)");
    add_model_options(cmd, opts->model);
    cmd->add_option("--out", opts->out, "Checkpoint directory to write")->required();
    cmd->add_option("--seed", opts->seed, "Initialisation seed")->capture_default_str();
    cmd->add_option("--vocab-size", opts->vocab, "Override the vocabulary size")->check(range(1, 1 << 24));
    cmd->callback([opts, &global] {
      apply_global_options(global);
      ModelConfig cfg = resolve_model(opts->model);
      if (opts->vocab > 0) {
        nlohmann::json j = cfg.to_json();
        j["vocab_size"] = opts->vocab;
        cfg = ModelConfig::from_json(j, "--vocab-size");
      }
      Model model(cfg, false);
      model.init(opts->seed);
      save_model(opts->out, model, {{"seed", std::to_string(opts->seed)}});
      std::printf("wrote %s (%.3fM parameters)\n", opts->out.c_str(), model.params().num_params() / 1e6);
    });
  }
  {
    struct Options {
      std::string ckpt, ids, targets, out;
      bool grads = false;
      double label_smoothing = 0.0;
    };
    auto opts = std::make_shared<Options>();
    CLI::App* cmd = app.add_subcommand("forward", "Run a checkpoint on token ids and write logits/loss/grads as safetensors");
    cmd->add_option("--ckpt", opts->ckpt, "Checkpoint directory")->required();
    cmd->add_option("--ids", opts->ids, "Token ids: sequences separated by ';', ids by ','  e.g. \"1,2,3;4,5,6\"")
        ->required();
    cmd->add_option("--targets", opts->targets, "Next-token targets in the same layout (-100 = ignore)");
    cmd->add_option("--out", opts->out, "Output .safetensors file")->required();
    cmd->add_flag("--grads", opts->grads, "Also write every parameter gradient as grad.<name> (needs --targets)");
    cmd->add_option("--label-smoothing", opts->label_smoothing, "Label smoothing for the loss")
        ->check(range(0.0, 0.999));
    cmd->callback([opts, &global] {
      apply_global_options(global);
      HYMBA_CHECK(!opts->grads || !opts->targets.empty(), "--grads needs --targets");
      const auto batches = parse_batches(opts->ids, "--ids");
      const int64_t B = static_cast<int64_t>(batches.size()), T = static_cast<int64_t>(batches.front().size());
      std::vector<int32_t> targets;
      if (!opts->targets.empty()) {
        const auto tb = parse_batches(opts->targets, "--targets");
        HYMBA_CHECK(tb.size() == batches.size() && tb.front().size() == batches.front().size(),
                    "--targets: shape ", tb.size(), "x", tb.front().size(), " differs from --ids ", B, "x", T);
        targets = flatten(tb);
      }
      const std::vector<int32_t> ids = flatten(batches);
      auto model = load_model(opts->ckpt, opts->grads);
      // Named here, with the checkpoint's size, rather than deep in the embedding.
      for (size_t i = 0; i < ids.size(); ++i)
        HYMBA_CHECK(ids[i] >= 0 && ids[i] < model->config().vocab_size, "--ids: token id ", ids[i], " (position ",
                    i, ") is outside the vocabulary of ", opts->ckpt, " (vocab_size ", model->config().vocab_size,
                    " in its config.json)");
      ForwardOptions fo;
      fo.label_smoothing = opts->label_smoothing;
      const LossStats loss = model->forward(ids.data(), targets.empty() ? nullptr : targets.data(), B, T, fo);
      const int64_t V = model->config().vocab_size;
      std::vector<NamedTensor> out = {{"logits", Shape{B, T, V}, model->logits()}};
      const float mean_loss = static_cast<float>(loss.scored > 0 ? loss.loss_sum / loss.scored : 0.0);
      if (!targets.empty()) out.push_back({"loss", Shape{1}, &mean_loss});
      if (opts->grads) {
        model->params().zero_grad();
        model->backward();
        for (const ParamInfo& p : model->params().rows())
          out.push_back({"grad." + p.name, p.shape, model->params().grads_block() + p.offset});
      }
      save_safetensors(opts->out, out, {{"checkpoint", opts->ckpt}});
      if (!targets.empty())
        std::printf("loss %.6f over %lld scored tokens; wrote %s\n", mean_loss, static_cast<long long>(loss.scored),
                    opts->out.c_str());
      else
        std::printf("wrote %s\n", opts->out.c_str());
    });
  }
}

}  // namespace hymba::cli
