// Suites from Python: hymba.ablate (`hymba ablate`) and hymba.synth
// (`hymba synth`). Rows come back as dicts with the report's columns, in its
// order, so pandas.DataFrame(rows) is the report's table.
#include <algorithm>
#include <optional>

#include "ablate/results.h"
#include "ablate/runner.h"
#include "bindings.h"
#include "core/threading.h"
#include "synth/runner.h"
#include "synth/suite.h"
#include "synth/trainer.h"

namespace hymba::python {

namespace {

using nlohmann::json;

// A dict of the given keys in that order (JSON objects are sorted by key).
py::dict ordered(const json& record, const std::vector<std::string>& keys) {
  py::dict d;
  for (const std::string& k : keys) d[text(k)] = to_python(record.at(k));
  return d;
}

// The answered questions (ablate/questions.h) as dicts, as results.json holds them.
py::list answers_list(const std::vector<report::Answer>& answers) {
  py::list out;
  for (const report::Answer& a : answers) out.append(to_python(a.to_json()));
  return out;
}

py::dict ablate(py::dict options) {
  const json o = to_json(options, "ablate");
  ablate::AblateOptions a;
  a.suite = o.value("suite", "");
  a.out_dir = o.value("out", "");
  HYMBA_CHECK(!a.suite.empty(), "suite: give a suite name or a suite .json file");
  HYMBA_CHECK(!a.out_dir.empty(), "out: give an output directory");
  a.scale = o.value("scale", "");
  a.data = o.value("data", "default");
  a.transformer = o.value("transformer", "");
  if (o.contains("seq_lens") && !o["seq_lens"].is_null()) a.seq_lens = o["seq_lens"].get<std::vector<int64_t>>();
  if (o.contains("prompts") && !o["prompts"].is_null()) a.prompts = o["prompts"].get<std::vector<std::string>>();
  a.cache_context = o.value("cache_context", a.cache_context);
  a.sample_tokens = o.value("sample_tokens", a.sample_tokens);
  a.repeats = o.value("repeats", int64_t{1});
  if (!o.value("plots", true)) a.gnuplot.clear();
  for (const char* k : {"train", "model", "sampling"})
    HYMBA_CHECK(!o.contains(k) || o[k].is_object(), k, ": expected a dict of overrides");
  if (o.contains("train")) a.train_overrides = o["train"];
  if (o.contains("model")) a.model_overrides = o["model"];
  if (o.contains("sampling")) a.sampling_overrides = o["sampling"];
  a.quiet = !o.value("progress", false);
  a.plain_progress = true;
  a.threads = num_threads();  // hymba.set_threads()'s count
  ablate::AblateSummary s;
  {
    py::gil_scoped_release nogil;
    s = ablate::run_ablation(a);
  }
  py::list rows;
  for (const ablate::RowResult& r : s.rows) rows.append(ordered(ablate::result_record(r), ablate::result_columns()));
  py::list runs;
  for (const ablate::RowResult& r : s.runs) runs.append(ordered(ablate::result_record(r), ablate::result_columns()));
  py::list skipped;
  for (const ablate::SkippedRow& r : s.skipped_rows) {
    py::dict d;
    d["id"] = r.id;
    d["model"] = text(r.name);
    d["group"] = r.group;
    d["seq_len"] = r.seq_len;
    d["batch"] = r.batch;
    d["est_train_memory_mb"] = r.est_train_memory_mb;
    d["reason"] = text(r.reason);
    skipped.append(d);
  }
  py::dict out;
  out["rows"] = rows;
  out["runs"] = runs;
  out["questions"] = answers_list(s.answers);
  out["skipped_rows"] = skipped;
  out["trained"] = s.trained;
  out["report_md"] = s.report_md;
  out["report_html"] = s.report_html;
  out["columns"] = py::cast(ablate::result_columns());
  return out;
}

py::dict epoch_dict(const synth::EpochStats& e) {
  py::dict d;
  d["epoch"] = e.epoch;
  d["train_loss"] = e.train_loss;
  d["eval_loss"] = e.eval_loss;
  d["eval_acc"] = e.eval_acc;
  d["eval_macro_acc"] = e.eval_macro_acc;
  d["lr"] = e.lr;
  d["seconds"] = e.seconds;
  return d;
}

// results.csv's columns, unrounded, and the per-epoch curve.
py::dict synth_row(const synth::RowRecord& r) {
  const synth::EpochStats& e = r.result.last();
  double best = 0;
  for (const synth::EpochStats& x : r.result.epochs) best = std::max(best, x.eval_acc);
  py::dict d;
  d["id"] = r.id;
  d["model"] = text(r.name);
  d["params"] = r.result.params;
  d["epoch"] = e.epoch;
  d["stopped_early"] = r.result.stopped_early;
  d["train_loss"] = e.train_loss;
  d["eval_loss"] = e.eval_loss;
  d["eval_acc"] = e.eval_acc;
  d["eval_macro_acc"] = e.eval_macro_acc;
  d["best_acc"] = best;
  d["seconds"] = r.result.seconds;
  d["ref_epoch"] = r.reference ? py::object(py::int_(r.reference->epoch)) : py::object(py::none());
  d["ref_train_loss"] = r.reference ? py::object(py::float_(r.reference->train_loss)) : py::object(py::none());
  d["ref_eval_loss"] = r.reference ? py::object(py::float_(r.reference->eval_loss)) : py::object(py::none());
  d["ref_eval_acc"] = r.reference ? py::object(py::float_(r.reference->eval_acc)) : py::object(py::none());
  d["repeat"] = r.repeat;
  d["seed"] = r.seed;
  py::list curve;
  for (const synth::EpochStats& x : r.result.epochs) curve.append(epoch_dict(x));
  d["curve"] = curve;
  return d;
}

// As `hymba synth`: a built-in or file suite, or one run of a task / task
// preset, with {task, train, model} overrides. on_epoch sees each epoch of a
// single run (GIL held) and may raise to stop it.
py::dict synth_run(py::dict options, py::object on_epoch) {
  const json o = to_json(options, "synth");
  const std::string suite_name = o.value("suite", ""), task = o.value("task", ""), preset = o.value("preset", "");
  const std::string out = o.value("out", "");
  json ovr = {{"task", o.value("task_options", json::object())},
              {"train", o.value("train_options", json::object())},
              {"model", o.value("model_options", json::object())}};
  if (ovr["task"].contains("train_scores")) {
    ovr["task"]["train_scores_all"] = ovr["task"]["train_scores"] == "all";
    ovr["task"].erase("train_scores");
  }
  synth::SynthSuite suite;
  const bool single = suite_name.empty();
  if (!single) {
    HYMBA_CHECK(task.empty() && preset.empty(), "suite: a suite names its own task; drop task / preset");
    suite = synth::load_synth_suite(suite_name);
  } else {
    HYMBA_CHECK(!task.empty() || !preset.empty(), "task: give a task, a preset or a suite (hymba synth --list)");
    suite.name = "custom";
    if (!preset.empty()) {
      const synth::TaskPreset& p = synth::find_task_preset(preset);
      suite.task = p.spec;
      suite.train = synth::TrainSettings::from_json(p.train, suite.train, "preset " + p.name);
    }
    if (!task.empty()) {
      const synth::TaskKind kind = synth::parse_task(task);
      HYMBA_CHECK(preset.empty() || kind == suite.task.kind, "task: ", task, " differs from preset ", preset,
                  "'s task");
      suite.task.kind = kind;
    }
    synth::SynthRow row;
    row.id = "run";
    suite.rows.push_back(row);
  }
  suite.task = synth::TaskSpec::from_json(ovr["task"], suite.task, "task options");
  suite.train = synth::TrainSettings::from_json(ovr["train"], suite.train, "train options");
  for (synth::SynthRow& r : suite.rows) {
    const bool default_name = r.name.empty() || r.name == r.arch.label();
    r.arch = synth::ArchSpec::from_json(ovr["model"], r.arch, "model options");
    if (default_name) r.name = r.arch.label();
  }
  if (single) suite.title = std::string(synth::to_string(suite.task.kind)) + " — " + suite.rows[0].name;

  py::dict result;
  if (single && out.empty()) {
    HYMBA_CHECK(o.value("repeats", int64_t{1}) == 1, "repeats: only for a suite or a run with out=DIR");
    const synth::TaskSpec row_task = synth::row_task(suite, suite.rows[0]);
    std::optional<py::error_already_set> raised;
    struct Stop {};
    synth::RunResult r;
    try {
      py::gil_scoped_release nogil;
      r = synth::train_on_task(row_task, suite.rows[0].arch, suite.train, [&](const synth::EpochStats& e) {
        py::gil_scoped_acquire gil;
        try {
          if (PyErr_CheckSignals() != 0) throw py::error_already_set();
          if (!on_epoch.is_none()) on_epoch(epoch_dict(e));
        } catch (py::error_already_set& err) {
          raised.emplace(std::move(err));
          throw Stop{};
        }
      });
    } catch (const Stop&) {
      throw *raised;
    }
    py::list epochs;
    for (const synth::EpochStats& e : r.epochs) epochs.append(epoch_dict(e));
    result["rows"] = epochs;
    result["params"] = r.params;
    result["name"] = text(suite.rows[0].name);
    return result;
  }
  HYMBA_CHECK(!out.empty(), "out: a suite needs an output directory");
  synth::SuiteRunOptions ro;
  ro.out_dir = out;
  ro.quiet = !o.value("progress", false);
  ro.log = stderr;
  ro.repeats = o.value("repeats", int64_t{1});
  if (!o.value("plots", true)) ro.gnuplot.clear();
  synth::SuiteRunSummary s;
  {
    py::gil_scoped_release nogil;
    s = synth::run_synth_suite(suite, ro);
  }
  py::list rows;
  for (const synth::RowRecord& r : s.rows) rows.append(synth_row(r));
  py::list runs;
  for (const synth::RowRecord& r : s.runs) runs.append(synth_row(r));
  result["rows"] = rows;
  result["runs"] = runs;
  result["questions"] = answers_list(s.answers);
  result["report_md"] = s.report_md;
  result["report_html"] = s.report_html;
  result["trained"] = s.trained;
  return result;
}

}  // namespace

void register_suites(py::module_& m) {
  m.def("_ablate", &ablate, py::arg("options"));
  m.def("_synth", &synth_run, py::arg("options"), py::arg("on_epoch"));
}

}  // namespace hymba::python
