// Training from Python: hymba.train (a new run from a preset or config) and
// LanguageModel.finetune (`hymba train --init`). The trainer runs with the
// GIL released; after every step it calls back (GIL briefly held) to report
// progress and to check for Ctrl-C (PyErr_CheckSignals): a KeyboardInterrupt,
// or an exception from the user's callback, stops the run at that step with a
// checkpoint, as SIGINT does on the command line, and is then re-raised.
#include <functional>
#include <map>
#include <optional>

#include "bindings.h"
#include "core/threading.h"
#include "model/presets.h"
#include "train/trainer.h"

namespace hymba::python {

namespace {

using nlohmann::json;

// Keyword arguments -> TrainOptions, named as the `hymba train` flags with
// underscores (seq_len for --seq-len). Errors name the argument.
TrainOptions train_options(const json& kw) {
  TrainOptions o;
  using Setter = std::function<void(const std::string&, const json&)>;
  auto str = [](std::string& field) -> Setter {
    return [&field](const std::string& k, const json& v) {
      HYMBA_CHECK(v.is_string(), k, ": expected a string (got ", v.dump(), ")");
      field = v.get<std::string>();
    };
  };
  auto i64 = [](int64_t& field) -> Setter {
    return [&field](const std::string& k, const json& v) {
      HYMBA_CHECK(v.is_number_integer(), k, ": expected an integer (got ", v.dump(), ")");
      field = v.get<int64_t>();
    };
  };
  auto f64 = [](double& field) -> Setter {
    return [&field](const std::string& k, const json& v) {
      HYMBA_CHECK(v.is_number(), k, ": expected a number (got ", v.dump(), ")");
      field = v.get<double>();
    };
  };
  auto flag = [](bool& field) -> Setter {
    return [&field](const std::string& k, const json& v) {
      HYMBA_CHECK(v.is_boolean(), k, ": expected True or False (got ", v.dump(), ")");
      field = v.get<bool>();
    };
  };
  int64_t tokenizer_vocab = o.tokenizer_vocab, threads = 0;
  int64_t seed = static_cast<int64_t>(o.seed);
  std::string precision = cpu::to_string(o.precision), decay_scope = o.adamw.decay_all ? "all" : "matrices";
  std::string data_split = to_string(o.data_split), batching = batching_name(o.batching_epochs),
              chunk_last_target = chunk_last_target_name(o.chunk_last_eos);
  const std::map<std::string, Setter> setters = {
      {"data", str(o.data)},
      {"out", str(o.out_dir)},
      {"tokenizer", str(o.tokenizer_path)},
      {"tokenizer_type", str(o.tokenizer_type)},
      {"tokenizer_vocab", i64(tokenizer_vocab)},
      {"steps", i64(o.steps)},
      {"epochs", f64(o.epochs)},
      {"stop_epochs", f64(o.stop_epochs)},
      {"batch", i64(o.batch)},
      {"seq_len", i64(o.seq_len)},
      {"grad_accum", i64(o.grad_accum)},
      {"grad_shards", i64(o.grad_shards)},
      {"lr", f64(o.lr)},
      {"min_lr_ratio", f64(o.min_lr_ratio)},
      {"warmup", i64(o.warmup)},
      {"weight_decay", f64(o.adamw.weight_decay)},
      {"weight_decay_scope", str(decay_scope)},
      {"precision", str(precision)},
      {"data_split", str(data_split)},
      {"batching", str(batching)},
      {"chunk_last_target", str(chunk_last_target)},
      {"beta1", f64(o.adamw.beta1)},
      {"beta2", f64(o.adamw.beta2)},
      {"grad_clip", f64(o.grad_clip)},
      {"label_smoothing", f64(o.label_smoothing)},
      {"dropout", f64(o.dropout)},
      {"log_interval", i64(o.log_interval)},
      {"eval_interval", i64(o.eval_interval)},
      {"eval_windows", i64(o.eval_windows)},
      {"save_interval", i64(o.save_interval)},
      {"val_fraction", f64(o.val_fraction)},
      {"seed", i64(seed)},
      {"threads", i64(threads)},
      {"resume", flag(o.resume)},
      {"recompute", flag(o.recompute)},
  };
  for (const auto& [key, value] : kw.items()) {
    if (value.is_null()) continue;  // None: the default
    const auto it = setters.find(key);
    if (it == setters.end()) {
      std::string known;
      for (const auto& [name, _] : setters) known += (known.empty() ? "" : ", ") + name;
      fail("train: unknown option '", key, "' (known: ", known, ")");
    }
    it->second(key, value);
  }
  HYMBA_CHECK(seed >= 0, "seed: must be >= 0");
  const auto parsed_precision = cpu::parse_matmul_precision(precision);
  HYMBA_CHECK(parsed_precision.has_value(), "precision: must be 'f32' or 'bf16' (got '", precision, "')");
  o.precision = *parsed_precision;
  HYMBA_CHECK(decay_scope == "matrices" || decay_scope == "all",
              "weight_decay_scope: must be 'matrices' or 'all' (got '", decay_scope, "')");
  o.adamw.decay_all = decay_scope == "all";
  o.data_split = parse_data_split(data_split, "data_split");
  HYMBA_CHECK(batching == "random-windows" || batching == "epochs",
              "batching: must be 'random-windows' or 'epochs' (got '", batching, "')");
  o.batching_epochs = batching == "epochs";
  HYMBA_CHECK(chunk_last_target == "next" || chunk_last_target == "eos",
              "chunk_last_target: must be 'next' or 'eos' (got '", chunk_last_target, "')");
  o.chunk_last_eos = chunk_last_target == "eos";
  HYMBA_CHECK(tokenizer_vocab >= 1 && tokenizer_vocab <= (1 << 24), "tokenizer_vocab: out of range");
  HYMBA_CHECK(threads >= 0 && threads <= 4096, "threads: must be in [0, 4096]");
  o.seed = static_cast<uint64_t>(seed);
  o.tokenizer_vocab = static_cast<int32_t>(tokenizer_vocab);
  // Keep hymba.set_threads()'s count (train() applies its own).
  o.threads = threads > 0 ? static_cast<int>(threads) : num_threads();
  o.quiet = true;           // progress is the Python layer's (tqdm or lines)
  o.catch_signals = false;  // Python's own SIGINT handler stays; on_step polls it
  return o;
}

// Runs `run` with the GIL released and on_step (Python) called after every
// step; re-raises what the callback raised once the run has stopped.
TrainSummary run_with_hook(TrainOptions& o, py::object on_step, const std::function<TrainSummary()>& run) {
  std::optional<py::error_already_set> raised;
  o.on_step = [&](const json& record) {
    py::gil_scoped_acquire gil;
    try {
      if (PyErr_CheckSignals() != 0) throw py::error_already_set();
      if (!on_step.is_none()) on_step(to_python(record));
      return true;
    } catch (py::error_already_set& e) {
      raised.emplace(std::move(e));
      return false;  // stop here: checkpoint, then Interrupted
    }
  };
  TrainSummary summary;
  try {
    py::gil_scoped_release nogil;
    summary = run();
  } catch (const Interrupted& e) {
    if (!raised) throw;
    // Ctrl-C: a KeyboardInterrupt that says where the checkpoint is.
    if (raised->matches(PyExc_KeyboardInterrupt)) {
      PyErr_SetString(PyExc_KeyboardInterrupt, e.what());
      throw py::error_already_set();
    }
    throw *raised;
  }
  if (raised) throw *raised;  // raised at the last step: the run finished
  return summary;
}

py::dict summary_dict(const TrainSummary& s, const std::string& out_dir) {
  py::dict d = to_python(s.to_json());
  d["out"] = out_dir;
  return d;
}

py::dict train_new(py::object model, const std::string& scale, py::dict options, py::object on_step) {
  ModelConfig cfg;
  TrainOptions o = train_options(to_json(options, "options"));
  if (py::isinstance<py::str>(model)) {
    cfg = preset_config(model.cast<std::string>(), parse_scale(scale));
  } else {
    const json j = to_json(model, "config");
    HYMBA_CHECK(j.is_object(), "train: give a preset name or a model config dict");
    json with_vocab = j;
    // The run's tokenizer sets the vocabulary; a placeholder lets the config parse.
    if (!with_vocab.contains("vocab_size")) with_vocab["vocab_size"] = 256;
    cfg = ModelConfig::from_json(with_vocab, "config");
  }
  const TrainSummary s = run_with_hook(o, on_step, [&] { return hymba::train(cfg, o); });
  return summary_dict(s, o.out_dir);
}

py::dict finetune(ModelHolder& h, py::dict options, py::object on_step) {
  BusyGuard busy(h);
  TrainOptions o = train_options(to_json(options, "options"));
  const TrainSummary s = run_with_hook(o, on_step, [&] { return h.lm.finetune(o); });
  return summary_dict(s, o.out_dir);
}

py::dict finetune_from(const std::string& from, py::dict options, py::object on_step) {
  TrainOptions o = train_options(to_json(options, "options"));
  const TrainSummary s = run_with_hook(o, on_step, [&] { return hymba::finetune(from, o); });
  return summary_dict(s, o.out_dir);
}

}  // namespace

void register_training(py::module_& m) {
  m.def("_train", &train_new, py::arg("model"), py::arg("scale"), py::arg("options"), py::arg("on_step"));
  m.def("_finetune", &finetune, py::arg("model"), py::arg("options"), py::arg("on_step"));
  m.def("_finetune_from", &finetune_from, py::arg("source"), py::arg("options"), py::arg("on_step"));
}

}  // namespace hymba::python
