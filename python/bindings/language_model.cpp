// hymba.LanguageModel's engine side: load/create/save, text <-> ids,
// generation (streamed through a callback), logits and hidden states as
// numpy arrays, scoring. Every compute call releases the GIL.
#include <algorithm>
#include <cstring>
#include <map>
#include <optional>

#include "bindings.h"
#include "model/memory_estimate.h"
#include "model/presets.h"

namespace hymba::python {

namespace {

// A Python callback raised: unwind the engine, then re-raise it in Python.
struct CallbackRaised {};

std::unique_ptr<ModelHolder> load(const std::string& dir) {
  py::gil_scoped_release nogil;
  return std::make_unique<ModelHolder>(LanguageModel::load(dir));
}

// A preset (or a full config) with config fields overridden, as
// `hymba init --preset P --scale S` with the byte tokenizer.
std::unique_ptr<ModelHolder> create(const std::string& preset, const std::string& scale, uint64_t seed,
                                    py::object config, py::dict overrides) {
  nlohmann::json j;
  if (!config.is_none()) {
    HYMBA_CHECK(preset.empty(), "create: give a preset or a config, not both");
    j = to_json(config, "config");
    HYMBA_CHECK(j.is_object(), "create: config must be a dict of model config fields");
  } else {
    HYMBA_CHECK(!preset.empty(), "create: give a preset (hymba.presets()) or a config dict");
    j = scaled_config_json(find_preset(preset), parse_scale(scale));
  }
  const nlohmann::json fields = to_json(overrides, "overrides");
  for (const auto& [k, v] : fields.items()) j[k] = v;
  const ModelConfig cfg =
      ModelConfig::from_json(j, preset.empty() ? "config" : "preset '" + preset + "' with overrides");
  py::gil_scoped_release nogil;
  return std::make_unique<ModelHolder>(LanguageModel::create(cfg, make_byte_tokenizer(), seed));
}

py::dict score_dict(const EvalResult& r) {
  py::dict d;
  d["loss"] = r.loss;
  d["ppl"] = r.ppl;
  d["accuracy"] = r.accuracy;
  d["tokens"] = r.tokens;
  d["windows"] = r.windows;
  return d;
}

std::vector<int32_t> ids_from(const py::array_t<int32_t, py::array::c_style | py::array::forcecast>& a,
                              const char* what) {
  HYMBA_CHECK(a.ndim() == 1, what, ": expected a flat sequence of token ids (got ", a.ndim(), " dimensions)");
  return std::vector<int32_t>(a.data(), a.data() + a.size());
}

py::list generate(ModelHolder& h, const std::vector<std::string>& prompts, int64_t max_new_tokens, double temperature,
                  int64_t top_k, double top_p, uint64_t seed, const std::vector<std::string>& stop, bool stop_at_eos,
                  py::object on_text, double min_p, double presence_penalty, double frequency_penalty,
                  double repetition_penalty, const std::map<int64_t, double>& logit_bias) {
  BusyGuard busy(h);
  infer::GenerateOptions opt;
  opt.max_new_tokens = max_new_tokens;
  opt.sampling.temperature = temperature;
  opt.sampling.top_k = top_k;
  opt.sampling.top_p = top_p;
  opt.sampling.seed = seed;
  opt.sampling.min_p = min_p;
  opt.sampling.presence_penalty = presence_penalty;
  opt.sampling.frequency_penalty = frequency_penalty;
  opt.sampling.repetition_penalty = repetition_penalty;
  const int64_t vocab = h.lm.config().vocab_size;
  for (const auto& [id, bias] : logit_bias) {
    HYMBA_CHECK(id >= 0 && id < vocab, "logit_bias: token id ", id, " is outside the vocabulary (0..", vocab - 1, ")");
    opt.sampling.logit_bias.emplace_back(static_cast<int32_t>(id), static_cast<float>(bias));
  }
  opt.stop = stop;
  opt.stop_at_eos = stop_at_eos;
  // Called as text becomes final: streams it, and lets Ctrl-C stop a long generation.
  std::optional<py::error_already_set> raised;
  const infer::TextCallback callback = [&](int64_t sequence, std::string_view chunk) {
    py::gil_scoped_acquire gil;
    try {
      if (PyErr_CheckSignals() != 0) throw py::error_already_set();
      if (!on_text.is_none()) on_text(sequence, text(chunk));
    } catch (py::error_already_set& e) {
      raised.emplace(std::move(e));
      throw CallbackRaised{};
    }
  };
  std::vector<infer::Generation> out;
  try {
    py::gil_scoped_release nogil;
    out = h.lm.generate_batch(prompts, opt, callback);
  } catch (const CallbackRaised&) {
    throw *raised;
  }
  py::list result;
  for (const infer::Generation& g : out) {
    py::dict d;
    d["text"] = text(g.text);
    d["ids"] = py::cast(g.tokens);
    d["prompt_ids"] = py::cast(g.prompt);
    d["finish_reason"] = infer::to_string(g.finish);
    result.append(d);
  }
  return result;
}

// One forward over ids [B, T]: the logits [B, T, V] or the final-norm hidden
// states [B, T, d] of the token positions, copied once out of the engine's
// activation arena (which the next call reuses) into a buffer numpy owns.
py::array_t<float> forward(ModelHolder& h, const py::array_t<int32_t, py::array::c_style | py::array::forcecast>& ids,
                           bool hidden) {
  BusyGuard busy(h);
  const char* what = hidden ? "hidden_states" : "logits";
  HYMBA_CHECK(ids.ndim() == 2, what, ": ids must be one sequence or a batch of equal-length sequences (got ",
              ids.ndim(), " dimensions)");
  const int64_t B = ids.shape(0), T = ids.shape(1);
  HYMBA_CHECK(B >= 1 && T >= 1, what, ": no token ids given");
  const ModelConfig& cfg = h.lm.config();
  const int64_t V = cfg.vocab_size, width = hidden ? cfg.hidden_size : V;
  const int32_t* data = ids.data();
  for (int64_t i = 0; i < B * T; ++i)
    HYMBA_CHECK(data[i] >= 0 && data[i] < V, what, ": token id ", data[i], " (position ", i,
                ") is outside the vocabulary of ", V);
  MemoryEstimate need;
  need.add("activations for " + std::to_string(B) + " x " + std::to_string(T) + " tokens",
           activation_bytes(cfg, B, T, false), "the number of ids");
  need.add(std::string(what) + " output", static_cast<double>(B * T * width) * sizeof(float), "the number of ids");
  need.require_available(what);
  std::vector<float> out;
  {
    py::gil_scoped_release nogil;
    Model& model = h.lm.model();
    if (hidden) {
      // Up to the final norm only (no LM head); meta-token rows lead each sequence.
      ForwardOptions fo;
      fo.hidden_only = true;
      model.forward(data, nullptr, B, T, fo);
      const int64_t M = cfg.num_memory_tokens, d = cfg.hidden_size;
      out.resize(static_cast<size_t>(B * T * d));
      for (int64_t b = 0; b < B; ++b)
        std::copy_n(model.hidden() + (b * (M + T) + M) * d, T * d, out.data() + b * T * d);
    } else {
      model.forward(data, nullptr, B, T);
      out.assign(model.logits(), model.logits() + B * T * width);
    }
  }
  return as_numpy(std::move(out), {B, T, width});
}

}  // namespace

void register_language_model(py::module_& m) {
  py::class_<ModelHolder>(m, "_LanguageModel")
      .def_static("load", &load, py::arg("dir"))
      .def_static("create", &create, py::arg("preset"), py::arg("scale"), py::arg("seed"), py::arg("config"),
                  py::arg("overrides"))
      .def("config", [](ModelHolder& h) { return to_python(h.lm.config().to_json()); })
      .def("num_parameters", [](ModelHolder& h) { return h.lm.num_params(); })
      .def("source", [](ModelHolder& h) { return h.lm.source(); })
      .def("adds_bos", [](ModelHolder& h) { return h.lm.adds_bos(); })
      .def("vocab_size", [](ModelHolder& h) { return h.lm.tokenizer().vocab_size(); })
      .def("save",
           [](ModelHolder& h, const std::string& dir) {
             BusyGuard busy(h);
             py::gil_scoped_release nogil;
             h.lm.save(dir);
           })
      .def("encode",
           [](ModelHolder& h, const std::string& s) {
             std::vector<int32_t> ids;
             {
               py::gil_scoped_release nogil;
               ids = h.lm.encode(s);
             }
             return py::cast(ids);
           })
      .def("encode_prompt", [](ModelHolder& h, const std::string& s) { return py::cast(h.lm.encode_prompt(s)); })
      .def("decode",
           [](ModelHolder& h, const py::array_t<int32_t, py::array::c_style | py::array::forcecast>& ids) {
             const std::vector<int32_t> v = ids_from(ids, "decode");
             std::string s;
             {
               py::gil_scoped_release nogil;
               s = h.lm.decode(v);
             }
             return text(s);
           })
      .def("generate", &generate, py::arg("prompts"), py::arg("max_new_tokens"), py::arg("temperature"),
           py::arg("top_k"), py::arg("top_p"), py::arg("seed"), py::arg("stop"), py::arg("stop_at_eos"),
           py::arg("on_text"), py::arg("min_p"), py::arg("presence_penalty"), py::arg("frequency_penalty"),
           py::arg("repetition_penalty"), py::arg("logit_bias"))
      .def("forward", &forward, py::arg("ids"), py::arg("hidden"))
      .def("token_logprobs",
           [](ModelHolder& h, const py::array_t<int32_t, py::array::c_style | py::array::forcecast>& ids) {
             BusyGuard busy(h);
             const std::vector<int32_t> v = ids_from(ids, "token_logprobs");
             std::vector<double> lp;
             {
               py::gil_scoped_release nogil;
               lp = h.lm.token_logprobs(v);
             }
             const auto n = static_cast<py::ssize_t>(lp.size());
             return as_numpy(std::move(lp), {n});
           })
      .def("embedding",
           [](ModelHolder& h, const py::array_t<int32_t, py::array::c_style | py::array::forcecast>& ids,
              bool last) {
             BusyGuard busy(h);
             const std::vector<int32_t> v = ids_from(ids, "embedding");
             std::vector<float> e;
             {
               py::gil_scoped_release nogil;
               e = h.lm.embedding(v, last ? LanguageModel::Pooling::kLast : LanguageModel::Pooling::kMean);
             }
             const auto n = static_cast<py::ssize_t>(e.size());
             return as_numpy(std::move(e), {n});
           })
      .def("score",
           [](ModelHolder& h, const std::string& s, int64_t seq_len, int64_t batch, int64_t max_windows) {
             BusyGuard busy(h);
             EvalResult r;
             {
               py::gil_scoped_release nogil;
               r = h.lm.score(s, {.seq_len = seq_len, .batch = batch, .max_windows = max_windows});
             }
             return score_dict(r);
           })
      .def("evaluate", [](ModelHolder& h, const std::string& data, bool all_tokens, int64_t seq_len, int64_t batch,
                          int64_t max_windows) {
        BusyGuard busy(h);
        CorpusScore c;
        {
          py::gil_scoped_release nogil;
          c = h.lm.score_corpus({.data = data,
                                 .all_tokens = all_tokens,
                                 .seq_len = seq_len,
                                 .batch = batch,
                                 .max_windows = max_windows,
                                 .on_progress = {}});
        }
        py::dict d = score_dict(c.result);
        d["data"] = c.data;
        d["seq_len"] = c.seq_len;
        return d;
      });
}

}  // namespace hymba::python
