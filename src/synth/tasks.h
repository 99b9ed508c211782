// Deterministic generators for the synthetic tasks that separate attention,
// SSMs and hybrids: the six MAD tasks (Poli et al. 2024), Zoology's MQAR and
// the Mamba paper's induction heads (definitions: docs/synth.md). Every
// example is an input sequence and a target sequence of the same length;
// targets are kIgnoreIndex (-100) wherever a position is not scored.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace hymba::synth {

enum class TaskKind {
  kInContextRecall,
  kNoisyRecall,
  kFuzzyRecall,
  kSelectiveCopying,
  kCompression,
  kMemorization,
  kMqar,
  kInductionHeads,
};

// Every difficulty setting of every task; each task reads the fields its
// definition names and ignores the rest. Defaults are MAD's baselines.
struct TaskSpec {
  TaskKind kind = TaskKind::kInContextRecall;
  int64_t vocab_size = 16;
  int64_t seq_len = 128;
  int64_t num_tokens_to_copy = 16;  // selective copying
  int64_t noise_vocab_size = 16;    // noisy recall: extra noise tokens at the top of the vocabulary
  double frac_noise = 0.2;          // noisy recall: probability a pair slot becomes two noise tokens
  int64_t max_key_len = 3;          // fuzzy recall: key tuples of 1..max tokens (test keys: max)
  int64_t max_value_len = 3;        // fuzzy recall: value tuples of 1..max tokens
  int64_t num_kv_pairs = 4;         // MQAR
  double mqar_power_a = 0.01;       // MQAR: query gaps drawn with p(g) ~ (g+1)^(a-1)
  int64_t num_passes = 1;           // MQAR: the key-value context repeated this often (Zoology's JRT option)
  bool random_non_queries = true;   // MQAR: non-query slots hold random tokens (Zoology's default); false: 0
  uint64_t memorization_seed = 0;   // memorization: the fixed one-to-one key -> value table
  // Recall tasks: MAD's multi-query variant (every repeated key's value is
  // scored at test); false: MAD's single-query variant (a copy-prefix token
  // V-1 before the final probe, only the probe's value scored at test).
  bool multi_query = true;
  // Recall tasks: training scores every next token, noise and pad included
  // (MAD); false scores only the answers, as at test.
  bool train_scores_all = true;

  // Throws hymba::Error naming the flag (--vocab-size, --seq-len, ...) when a
  // setting is out of range or the combination is impossible.
  void validate() const;
  nlohmann::json to_json() const;
  // The settings this task reads, in words: "selective-copying V=16 L=20, 5 to copy".
  std::string summary() const;
  // Reads the keys to_json() writes (all optional over `base`); unknown keys
  // and wrong types are errors naming `source` and the key.
  static TaskSpec from_json(const nlohmann::json& j, const TaskSpec& base, const std::string& source);
};

// Examples stored row-major: inputs / targets [n, seq].
struct Dataset {
  int64_t n = 0, seq = 0;
  std::vector<int32_t> inputs, targets;
  const int32_t* input(int64_t i) const { return inputs.data() + i * seq; }
  const int32_t* target(int64_t i) const { return targets.data() + i * seq; }
  int64_t scored() const;  // targets that are not kIgnoreIndex
};

// n examples of `spec` from `seed` (the same arguments give the same bytes).
// `test` switches to the test-time scoring (and fuzzy recall's test keys).
Dataset generate(const TaskSpec& spec, int64_t n, uint64_t seed, bool test);

// The model input length an example of `spec` has (seq_len, or seq_len - 1
// for multi-query in-context / noisy recall, whose L tokens are shifted by one).
int64_t input_length(const TaskSpec& spec);

// Task names as the command line spells them ("in-context-recall", ...).
const char* to_string(TaskKind k);
TaskKind parse_task(const std::string& name);  // error lists the names
const std::vector<std::string>& task_names();

// Named settings: MAD's baselines ("mad-selective-copying", ...), Zoology's
// ("mqar"), the Mamba paper's ("induction-heads") and seed 004's
// ("seed004-selective-copying", "seed004-in-context-recall"). `train` holds
// the recipe as training-settings keys (TrainSettings::from_json): data-set
// sizes, and for the mad-* presets MAD's training defaults.
struct TaskPreset {
  std::string name, description;
  TaskSpec spec;
  nlohmann::json train = nlohmann::json::object();
};
const std::vector<TaskPreset>& task_presets();
const TaskPreset& find_task_preset(const std::string& name);  // error lists the names

}  // namespace hymba::synth
