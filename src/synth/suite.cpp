#include "synth/suite.h"

#include <algorithm>
#include <filesystem>
#include <set>

#include "core/atomic_file.h"
#include "core/error.h"

namespace hymba::synth {

using nlohmann::json;

namespace {

SynthRow row(const std::string& id, ArchSpec arch, std::optional<ReferenceFigures> ref, json task = json::object()) {
  SynthRow r;
  r.id = id;
  r.arch = arch;
  r.name = arch.label();
  r.reference = ref;
  r.task = std::move(task);
  return r;
}

ArchSpec arch(ArchKind kind, int64_t layers, int64_t hidden, int64_t heads) {
  ArchSpec a;
  a.kind = kind;
  a.num_layers = layers;
  a.hidden_size = hidden;
  a.num_heads = heads;
  return a;
}

ArchSpec hybrid(int64_t blocks, BlockLink link, int64_t hidden, int64_t heads) {
  ArchSpec a = arch(ArchKind::kHybrid, 0, hidden, heads);
  a.num_blocks = blocks;
  a.link = link;
  return a;
}

// Seed 004's Mamba and hybrid rows start from mamba_ssm's MambaLMHeadModel
// init, the Mamba the seed notebooks used: under it they reach the seed's
// epochs more closely than under the engine's normal init (docs/synth.md).
// The Transformer rows keep normal: no scheme matched the seed's better.
ArchSpec with_mamba_ssm_init(ArchSpec a) {
  a.init_scheme = InitScheme::kMambaSsm;
  return a;
}

// A seed 004 suite: the preset of the same name, its recipe at lr 5e-4.
SynthSuite seed004_suite(const std::string& name, const std::string& title, int64_t epochs, int64_t batch) {
  SynthSuite s;
  s.name = name;
  s.title = title;
  const TaskPreset& p = find_task_preset(name);
  s.task = p.spec;
  s.train = TrainSettings::from_json(p.train, s.train, "preset " + name);
  s.train.epochs = epochs;
  s.train.batch_size = batch;
  s.train.lr = 5e-4;
  s.train.stop_at_acc = 0.95;  // the seed's "epoch reached": its runs stop once eval accuracy is high
  s.reference_source = "seed 004";
  return s;
}

// Seed 004, "Selective Copying": V=16, L=20, 5 tokens, 4000/200 examples,
// 2 layers, hidden 32, 2 heads, 50 epochs of batch 8 at lr 5e-4.
SynthSuite seed004_selective_copying() {
  SynthSuite s = seed004_suite("seed004-selective-copying", "Selective copying (seed 004 settings)", 50, 8);
  using K = ArchKind;
  using L = BlockLink;
  auto seed_hybrid = [](int64_t blocks, BlockLink link) { return with_mamba_ssm_init(hybrid(blocks, link, 32, 2)); };
  s.rows = {row("transformer-2", arch(K::kTransformer, 2, 32, 2), ReferenceFigures{6, 0.127, 0.159, 0.950}),
            row("mamba-2", with_mamba_ssm_init(arch(K::kMamba, 2, 32, 2)), ReferenceFigures{3, 0.025, 0.004, 1.000}),
            row("hybrid-1-null", seed_hybrid(1, L::kNull), ReferenceFigures{2, 0.061, 0.056, 0.989}),
            row("hybrid-2-null", seed_hybrid(2, L::kNull), ReferenceFigures{2, 0.098, 0.055, 0.984}),
            row("hybrid-1-res", seed_hybrid(1, L::kResidual), ReferenceFigures{3, 0.287, 0.059, 0.984}),
            row("hybrid-2-res", seed_hybrid(2, L::kResidual), ReferenceFigures{3, 0.131, 0.066, 0.980}),
            row("hybrid-1-gated", seed_hybrid(1, L::kGated), ReferenceFigures{3, 0.046, 0.010, 0.998})};
  return s;
}

// Seed 004, "In-context Recall": V=16, L=64, 4096/256 examples, hidden 128,
// 16 heads, 20 epochs of batch 32 at lr 5e-4. The seed ran its hybrid at
// seq_len 16; we run it at 64 like the others and also at 16.
SynthSuite seed004_in_context_recall() {
  SynthSuite s = seed004_suite("seed004-in-context-recall", "In-context recall (seed 004 settings)", 20, 32);
  const ReferenceFigures hybrid_ref{19, 1.539, 0.126, 0.968};
  s.rows = {row("transformer-2", arch(ArchKind::kTransformer, 2, 128, 16), ReferenceFigures{19, 1.510, 0.589, 0.757}),
            row("mamba-4", with_mamba_ssm_init(arch(ArchKind::kMamba, 4, 128, 16)), ReferenceFigures{1, 1.337, 0.002, 1.000}),
            row("hybrid-1-null", with_mamba_ssm_init(hybrid(1, BlockLink::kNull, 128, 16)), std::nullopt),
            row("hybrid-1-null-len16", with_mamba_ssm_init(hybrid(1, BlockLink::kNull, 128, 16)), hybrid_ref,
                json{{"seq_len", 16}})};
  s.rows.back().name += " (seq_len 16, as the seed)";
  return s;
}

std::optional<ReferenceFigures> reference_from_json(const json& j, const std::string& where) {
  HYMBA_CHECK(j.is_object(), where, ": 'reference' must be an object");
  ReferenceFigures f;
  for (auto it = j.begin(); it != j.end(); ++it) {
    HYMBA_CHECK(it.value().is_number(), where, ": 'reference.", it.key(), "' must be a number");
    if (it.key() == "epoch") f.epoch = it.value().get<int64_t>();
    else if (it.key() == "train_loss") f.train_loss = it.value().get<double>();
    else if (it.key() == "eval_loss") f.eval_loss = it.value().get<double>();
    else if (it.key() == "eval_acc") f.eval_acc = it.value().get<double>();
    else fail(where, ": unknown key 'reference.", it.key(), "'");
  }
  return f;
}

std::vector<report::Question> questions_from_json(const json& qs, const SynthSuite& s, const std::string& path) {
  HYMBA_CHECK(qs.is_array(), path, ": 'questions' must be a list");
  std::vector<report::Question> out;
  for (size_t i = 0; i < qs.size(); ++i) {
    const std::string where = path + ": questions[" + std::to_string(i) + "]";
    report::Question q = report::question_from_json(qs[i], where, "best_acc");
    for (const std::string& id : {q.row_a, q.row_b})
      HYMBA_CHECK(id.empty() || std::any_of(s.rows.begin(), s.rows.end(), [&](const SynthRow& r) { return r.id == id; }),
                  where, ": row '", id, "' is not a row id of the suite");
    out.push_back(std::move(q));  // the runner checks the metric before anything trains
  }
  return out;
}

SynthSuite suite_from_file(const std::string& path) {
  const json j = read_json_file(path);
  HYMBA_CHECK(j.is_object(), path, ": a suite must be a JSON object");
  SynthSuite s;
  s.name = std::filesystem::path(path).stem().string();
  s.title = s.name;
  TaskPreset base{"", "", TaskSpec{}, json::object()};
  ArchSpec model_defaults;
  json task = json::object(), train = json::object();
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& k = it.key();
    const json& v = it.value();
    if (k == "name" || k == "title" || k == "reference_source" || k == "preset") {
      HYMBA_CHECK(v.is_string(), path, ": '", k, "' must be a string");
      if (k == "name") s.name = v.get<std::string>();
      else if (k == "title") s.title = v.get<std::string>();
      else if (k == "reference_source") s.reference_source = v.get<std::string>();
      else base = find_task_preset(v.get<std::string>());
    } else if (k == "task") {
      task = v;
    } else if (k == "train") {
      train = v;
    } else if (k == "model") {
      model_defaults = ArchSpec::from_json(v, model_defaults, path + ": 'model'");
    } else if (k != "rows" && k != "questions") {
      fail(path, ": unknown key '", k, "'");
    }
  }
  s.task = TaskSpec::from_json(task, base.spec, path + ": 'task'");
  s.train = TrainSettings::from_json(base.train, s.train, "preset " + base.name);
  s.train = TrainSettings::from_json(train, s.train, path + ": 'train'");
  HYMBA_CHECK(j.contains("rows") && j["rows"].is_array() && !j["rows"].empty(), path,
              ": 'rows' must be a non-empty list of models");
  std::set<std::string> ids;
  for (size_t i = 0; i < j["rows"].size(); ++i) {
    const json& r = j["rows"][i];
    const std::string where = path + ": rows[" + std::to_string(i) + "]";
    HYMBA_CHECK(r.is_object(), where, ": must be an object");
    SynthRow row;
    json model = json::object();
    for (auto it = r.begin(); it != r.end(); ++it) {
      const std::string& k = it.key();
      if (k == "id" || k == "name") {
        HYMBA_CHECK(it.value().is_string() && !it.value().get<std::string>().empty(), where, ": '", k,
                    "' must be a non-empty string");
        (k == "id" ? row.id : row.name) = it.value().get<std::string>();
      } else if (k == "model") {
        model = it.value();
      } else if (k == "task") {
        row.task = it.value();
        TaskSpec::from_json(row.task, s.task, where + ": 'task'").validate();
      } else if (k == "reference") {
        row.reference = reference_from_json(it.value(), where);
      } else {
        fail(where, ": unknown key '", k, "'");
      }
    }
    row.arch = ArchSpec::from_json(model, model_defaults, where + ": 'model'");
    if (row.name.empty()) row.name = row.arch.label();
    if (row.id.empty()) row.id = "row-" + std::to_string(i + 1);
    for (char c : row.id)
      HYMBA_CHECK(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.', where,
                  ": 'id' may hold only letters, digits, '-', '_' and '.' (got '", row.id, "')");
    HYMBA_CHECK(ids.insert(row.id).second, where, ": id '", row.id, "' appears twice");
    s.rows.push_back(std::move(row));
  }
  if (j.contains("questions")) s.questions = questions_from_json(j["questions"], s, path);
  return s;
}

}  // namespace

const std::vector<SynthSuiteInfo>& builtin_synth_suites() {
  static const std::vector<SynthSuiteInfo> suites = {
      {"seed004-selective-copying", "seed 004: selective copying, Transformer, Mamba and five sequential hybrids"},
      {"seed004-in-context-recall", "seed 004: in-context recall, Transformer, Mamba and a sequential hybrid"},
  };
  return suites;
}

SynthSuite load_synth_suite(const std::string& name_or_file) {
  if (name_or_file == "seed004-selective-copying") return seed004_selective_copying();
  if (name_or_file == "seed004-in-context-recall") return seed004_in_context_recall();
  HYMBA_CHECK(name_or_file.ends_with(".json"), "--suite: unknown suite '", name_or_file,
              "' (seed004-selective-copying, seed004-in-context-recall, or a .json file)");
  return suite_from_file(name_or_file);
}

TaskSpec row_task(const SynthSuite& suite, const SynthRow& row) {
  return TaskSpec::from_json(row.task, suite.task, "suite row '" + row.id + "' task");
}

}  // namespace hymba::synth
