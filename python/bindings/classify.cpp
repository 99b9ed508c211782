// hymba.classify from Python: `hymba classify train` and `hymba classify
// eval` with keyword options named as their flags; the summaries come back as
// dicts (summary.json).
#include <functional>
#include <map>

#include "bindings.h"
#include "classify/trainer.h"

namespace hymba::python {

namespace {

using nlohmann::json;
using Setter = std::function<void(const std::string&, const json&)>;

// Applies the keyword options by name; an unknown one lists the known ones.
void apply(const json& kw, const std::map<std::string, Setter>& setters, const char* what) {
  for (const auto& [key, value] : kw.items()) {
    if (value.is_null()) continue;
    const auto it = setters.find(key);
    if (it == setters.end()) {
      std::string known;
      for (const auto& [name, _] : setters) known += (known.empty() ? "" : ", ") + name;
      fail(what, ": unknown option '", key, "' (known: ", known, ")");
    }
    it->second(key, value);
  }
}

Setter str(std::string& f) {
  return [&f](const std::string& k, const json& v) {
    HYMBA_CHECK(v.is_string(), k, ": expected a string (got ", v.dump(), ")");
    f = v.get<std::string>();
  };
}
Setter i64(int64_t& f) {
  return [&f](const std::string& k, const json& v) {
    HYMBA_CHECK(v.is_number_integer(), k, ": expected an integer (got ", v.dump(), ")");
    f = v.get<int64_t>();
  };
}
Setter f64(double& f) {
  return [&f](const std::string& k, const json& v) {
    HYMBA_CHECK(v.is_number(), k, ": expected a number (got ", v.dump(), ")");
    f = v.get<double>();
  };
}
Setter flag(bool& f) {
  return [&f](const std::string& k, const json& v) {
    HYMBA_CHECK(v.is_boolean(), k, ": expected True or False (got ", v.dump(), ")");
    f = v.get<bool>();
  };
}

py::object classify_train(py::dict options) {
  const json kw = to_json(options, "classify.train");
  classify::ClassifyTrainOptions o;
  o.quiet = true;
  bool unfreeze = false;
  int64_t seed = static_cast<int64_t>(o.seed);
  std::string format = o.read.format;
  apply(kw,
        {{"backbones",
          [&o](const std::string& k, const json& v) {
            HYMBA_CHECK(v.is_array() && !v.empty() && v.size() <= 2, k, ": one or two checkpoint directories");
            for (const json& b : v) {
              HYMBA_CHECK(b.is_string(), k, ": checkpoint directories are strings");
              o.backbones.push_back(b.get<std::string>());
            }
          }},
         {"data", str(o.train_path)},
         {"val", str(o.val_path)},
         {"format", str(format)},
         {"label_field", str(o.read.label_field)},
         {"text_field", str(o.read.text_field)},
         {"classes", str(o.classes)},
         {"out", str(o.out_dir)},
         {"pooling", str(o.pooling)},
         {"fusion", str(o.fusion)},
         {"hidden", i64(o.hidden)},
         {"unfreeze", flag(unfreeze)},
         {"max_len", i64(o.max_len)},
         {"batch", i64(o.batch)},
         {"epochs", f64(o.epochs)},
         {"steps", i64(o.steps)},
         {"lr", f64(o.lr)},
         {"backbone_lr", f64(o.backbone_lr)},
         {"min_lr_ratio", f64(o.min_lr_ratio)},
         {"warmup", i64(o.warmup)},
         {"weight_decay", f64(o.adamw.weight_decay)},
         {"grad_clip", f64(o.grad_clip)},
         {"val_fraction", f64(o.val_fraction)},
         {"eval_interval", i64(o.eval_interval)},
         {"log_interval", i64(o.log_interval)},
         {"seed", i64(seed)},
         {"progress",
          [&o](const std::string& k, const json& v) {
            HYMBA_CHECK(v.is_boolean(), k, ": expected True or False");
            o.quiet = !v.get<bool>();
            o.plain_progress = true;
          }}},
        "classify.train");
  HYMBA_CHECK(seed >= 0, "seed: must be >= 0");
  o.seed = static_cast<uint64_t>(seed);
  o.freeze = !unfreeze;
  o.read.format = format;
  json summary;
  {
    py::gil_scoped_release nogil;
    summary = classify::train_classifier(o);
  }
  return to_python(summary);
}

py::object classify_eval(py::dict options) {
  const json kw = to_json(options, "classify.evaluate");
  classify::ClassifyEvalOptions o;
  o.quiet = true;
  apply(kw,
        {{"classifier", str(o.classifier_dir)},
         {"data", str(o.data_path)},
         {"format", str(o.read.format)},
         {"label_field", str(o.read.label_field)},
         {"text_field", str(o.read.text_field)},
         {"out", str(o.out_dir)},
         {"batch", i64(o.batch)}},
        "classify.evaluate");
  json summary;
  {
    py::gil_scoped_release nogil;
    summary = classify::eval_classifier(o);
  }
  return to_python(summary);
}

}  // namespace

void register_classify(py::module_& m) {
  m.def("_classify_train", &classify_train, py::arg("options"));
  m.def("_classify_eval", &classify_eval, py::arg("options"));
}

}  // namespace hymba::python
