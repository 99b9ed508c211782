#include "ablate/suite.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <set>

#include "ablate/long_suite.h"
#include "ablate/repeats.h"
#include "core/atomic_file.h"
#include "core/error.h"
#include "core/json_io.h"
#include "tokenizer/tokenizer.h"

namespace hymba::ablate {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// Each built-in suite follows the recipe of the notebook it comes from, so a
// run at --scale seed is the notebook's experiment; flags override any key.
json seed001_recipe() {
  // Seed 001: 25 epochs of 16 x 256, AdamW(0.9, 0.99) wd 0.1, 100 warmup
  // steps, cosine to 10 %, label smoothing 0.1, eval every 50; its tokenizer
  // is HF's ByteLevel BPE trained by BpeTrainer(vocab_size=4096,
  // min_frequency=2, special_tokens=['<unk>', '<pad>', '<bos>', '<eos>']),
  // whose alphabet is the corpus's bytes.
  return {{"epochs", 25},        {"batch", 16},          {"seq_len", 256},     {"lr", 3e-4},
          {"warmup", 100},       {"weight_decay", 0.1},  {"beta2", 0.99},      {"grad_clip", 1.0},
          {"label_smoothing", 0.1}, {"min_lr_ratio", 0.1}, {"eval_interval", 50}, {"eval_windows", 0},
          {"val_fraction", 0.1}, {"seed", 42},           {"tokenizer", "byte-level-bpe"}, {"tokenizer_vocab", 4096},
          {"tokenizer_min_frequency", 2}, {"tokenizer_alphabet", "corpus"}};
}

json seed002_recipe() {
  // Seed 002: 150 steps of 16 x 512, AdamW(0.9, 0.95) wd 0.1, 40 warmup
  // steps, cosine to 0, 5 % validation; its tokenizer is HF's Unigram
  // (NFKC + Lowercase, Whitespace) trained by UnigramTrainer(vocab_size=32000,
  // special_tokens=[pad, bos, eos]), which returns fewer pieces when the
  // corpus supports fewer (5,917 tokens on Tiny Shakespeare, as in HF).
  return {{"steps", 150},          {"batch", 16},         {"seq_len", 512},        {"lr", 3e-4},
          {"warmup", 40},          {"weight_decay", 0.1}, {"beta2", 0.95},         {"grad_clip", 1.0},
          {"min_lr_ratio", 0.0},   {"eval_interval", 50}, {"eval_windows", 0},     {"val_fraction", 0.05},
          {"seed", 42},            {"tokenizer", "hf-unigram"}, {"tokenizer_vocab", 32000}};
}

json seed003_recipe() {
  // Seed 003: 5K steps at 256 tokens (TinyStories), BPE 4096.
  return {{"steps", 5000},       {"batch", 16},          {"seq_len", 256},      {"lr", 3e-4},
          {"warmup", 100},       {"weight_decay", 0.1},  {"grad_clip", 1.0},    {"min_lr_ratio", 0.1},
          {"eval_interval", 250}, {"eval_windows", 64},  {"val_fraction", 0.05}, {"seed", 42},
          {"tokenizer", "bpe"},  {"tokenizer_vocab", 4096}};
}

json demo_recipe() {
  // Sized for the README's main job: a few minutes per row on 2 cores.
  return {{"steps", 300},        {"batch", 8},          {"seq_len", 128},     {"lr", 2e-3},
          {"warmup", 30},        {"weight_decay", 0.1}, {"grad_clip", 1.0},   {"min_lr_ratio", 0.1},
          {"eval_interval", 50}, {"eval_windows", 0},   {"val_fraction", 0.1}, {"seed", 1234},
          {"tokenizer", "byte"}};
}

// Seed 001 samples 30 tokens at T 0.8, top-k 40, no top-p, from untrained models.
SampleSettings seed001_sampling() {
  SampleSettings s;
  s.tokens = 30;
  s.untrained = true;
  return s;
}

SuiteRow preset_row(const std::string& preset, Scale scale, const std::string& name = "",
                    const json& overrides = json::object(), const std::string& id = "") {
  const Preset& p = find_preset(preset);
  json cfg = scaled_config_json(p, scale);
  for (auto it = overrides.begin(); it != overrides.end(); ++it) cfg[it.key()] = it.value();
  std::string source = "preset " + p.name + " (" + to_string(scale) + ")";
  if (!overrides.empty()) source += " + " + overrides.dump();
  SuiteRow row;
  row.id = id.empty() ? p.name : id;
  row.name = name.empty() ? p.title : name;
  row.source = source;
  row.config = cfg;
  return row;
}

std::string slug(const std::string& s) {
  std::string out;
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (std::isalnum(c)) out += static_cast<char>(std::tolower(c));
    else if (!out.empty() && out.back() != '-') out += '-';
  }
  while (!out.empty() && out.back() == '-') out.pop_back();
  return out.empty() ? "row" : out;
}

// Seed 003's Transformer row: the GPT-style one as the seed describes it, or
// the engine's RoPE / SwiGLU one (--transformer rope).
const char* seed003_transformer(const std::string& choice) {
  if (choice.empty() || choice == "gpt") return "gpt-baseline";
  if (choice == "rope") return "compare-transformer";
  fail("--transformer: '", choice, "' is not one of gpt, rope");
}

// Round 3: for each T, the Transformer, Mamba and Hymba v2 (round 2's
// matched Hymba, the one whose mixing the seed asks about) at
// batch = tokens per step / T; learned positions sized to T (its --max_len),
// at least the seed's 256 so that samples fit at small T.
void add_long_rows(Suite& s, Scale scale, const std::string& transformer) {
  const char* tf = seed003_transformer(transformer);
  const std::string tf_group = std::string(tf) == "gpt-baseline" ? "Transformer (GPT-style)" : "Transformer (RoPE)";
  for (const int64_t T : s.seq_lens) {
    const std::string t = std::to_string(T);
    const json train = {{"seq_len", T}, {"batch", long_seq_batch(T, s.tokens_per_step)},
                        {"eval_windows", long_seq_eval_windows(T)}};
    struct Arch {
      const char* preset;
      std::string group, id;
    };
    for (const Arch& a : {Arch{tf, tf_group, std::string(tf) == "gpt-baseline" ? "transformer" : "transformer-rope"},
                          Arch{"compare-mamba", "Mamba", "mamba"}, Arch{"hymba-v2", "Hymba v2", "hymba-v2"}}) {
      const json over = find_preset(a.preset).config.value("position_embedding", std::string()) == "learned"
                            ? json{{"max_position_embeddings", std::max<int64_t>(T, 256)}}
                            : json::object();
      SuiteRow row = preset_row(a.preset, scale, a.group + " T=" + t, over, a.id + "-t" + t);
      row.train = train;
      row.group = a.group;
      row.seq_len = T;
      s.rows.push_back(std::move(row));
    }
  }
}

Suite builtin(const std::string& name, Scale scale, const SuiteChoices& choices) {
  Suite s;
  s.name = name;
  const bool seed003 = name == "seed-003" || name == "seed-003-long";
  HYMBA_CHECK(choices.transformer.empty() || seed003, "--transformer: suite '", name,
              "' has no Transformer row to choose (seed-003 and seed-003-long have)");
  HYMBA_CHECK(choices.seq_lens.empty() || name == "seed-003-long", "--seq-lens: suite '", name,
              "' has no sequence-length axis (seed-003-long has)");
  const bool roadmap = name == "hymba-roadmap" || name == "hymba-roadmap-epoch";
  HYMBA_CHECK(choices.same_kv_compression.empty() || roadmap, "--same-kv-compression: suite '", name,
              "' has no row 10 (hymba-roadmap and hymba-roadmap-epoch have)");
  HYMBA_CHECK(choices.same_kv_compression.empty() || choices.same_kv_compression == "paper" ||
                  choices.same_kv_compression == "gqa-only",
              "--same-kv-compression: expected paper or gqa-only (got '", choices.same_kv_compression, "')");
  if (name == "seed-000") {
    s.title = "Seed 000: Mamba, Transformer (global / local) and Hymba hybrids";
    s.seed = "000";
    s.train = seed001_recipe();  // seed 000's report has no recipe; its notebook is seed 001
    s.prompts = {"ROMEO:", "First Citizen:"};
    for (const char* p : {"seed000-mamba", "seed000-transformer-global", "seed000-transformer-local",
                          "seed000-hybrid-5050", "seed000-hybrid-paper"})
      s.rows.push_back(preset_row(p, scale));
  } else if (name == "hymba-roadmap" || name == "hymba-roadmap-epoch") {
    const bool epoch = name == "hymba-roadmap-epoch";
    s.title = epoch ? "Hymba design roadmap at seed 002's real budget (epochs=1 under a 150-step schedule)"
                    : "Hymba design roadmap (paper Table 1, seed 002's matrix)";
    s.seed = "002";
    s.train = seed002_recipe();
    // Seed 002 cuts 512-token chunks, splits them 95/5 at random, sets each
    // chunk's last target to EOS, and batches with shuffle and drop_last.
    s.train.update(json{{"data_split", "chunks-shuffled"}, {"batching", "epochs"}, {"chunk_last_target", "eos"}});
    if (epoch) s.train["stop_epochs"] = 1.0;
    s.prompts = {"ROMEO:"};
    for (int i = 1; i <= 13; ++i) {
      char preset[32];
      std::snprintf(preset, sizeof preset, "roadmap-%02d", i);
      s.rows.push_back(preset_row(preset, scale));
    }
    // Seed 002's code runs its row 10 as row 6 with GQA: no SWA, no sharing.
    if (choices.same_kv_compression == "gqa-only")
      s.rows[9] = preset_row("roadmap-10", scale, "", {{"sliding_window", 0}, {"global_attn_idx", json::array()},
                                                      {"kv_reuse_group", json::array()}});
  } else if (name == "seed-ablation") {
    s.title = "Seed 001 ablation: Mamba, Transformer and hybrid variants";
    s.sort = SortOrder::kBestPpl;  // as seed 001's summary table
    s.seed = "001";
    s.train = seed001_recipe();
    // Seed 001 shuffles its 256-token chunks once (seed 42), splits them
    // 90/10 and trains epochs of shuffled batches with drop_last.
    s.train.update(json{{"data_split", "chunks-shuffled"}, {"batching", "epochs"}});
    s.sampling = seed001_sampling();
    s.prompts = {"ROMEO:", "First Citizen:"};
    for (const char* p : {"mamba-only", "transformer-global", "hybrid-mine", "hybrid-nometa", "hybrid-nokvshare",
                          "hybrid-official", "official-nometa", "transformer-local"}) {
      const std::string id = p;
      const bool official = id == "hybrid-official" || id == "official-nometa";
      // Seed 001's HymbaOfficialConfig rows set attention_dropout=0.1 beside the common dropout.
      s.rows.push_back(official ? preset_row(p, scale, "", {{"attention_dropout", 0.1}}, id) : preset_row(p, scale));
      s.rows.back().implementation = official ? "Official" : "Mine";
    }
  } else if (name == "arch-compare") {
    s.title = "Transformer vs Mamba vs Hymba, 8 layers of d 384 each (seed 003)";
    s.seed = "003";
    s.train = seed003_recipe();
    s.prompts = {"Once upon a time"};
    for (const char* p : {"compare-transformer", "compare-mamba", "compare-hymba"}) s.rows.push_back(preset_row(p, scale));
  } else if (name == "seed-003") {
    s.title = "Seed 003: Transformer vs Mamba vs its Hymba v1 (6 layers) and v2 (8 layers)";
    s.seed = "003";
    s.train = seed003_recipe();
    s.prompts = {"Once upon a time"};
    for (const char* p : {"compare-mamba", seed003_transformer(choices.transformer), "hymba-v1", "hymba-v2"})
      s.rows.push_back(preset_row(p, scale));
  } else if (name == "seed-003-long") {
    s.title = "Seed 003 round 3: Transformer vs Mamba vs Hymba against sequence length";
    s.seed = "003-long";
    s.train = seed003_recipe();
    s.train.erase("seq_len");  // per row
    s.train.erase("batch");
    s.train.erase("eval_windows");
    s.prompts = {"Once upon a time"};
    s.seq_lens = choices.seq_lens.empty() ? long_seq_default_lengths() : choices.seq_lens;
    check_seq_lens(s.seq_lens);
    s.tokens_per_step = kLongSeqTokensPerStep;
    s.skip_over_memory = true;
    add_long_rows(s, scale, choices.transformer);
  } else if (name == "demo") {
    s.title = "Transformer vs Mamba vs Hymba, and Hymba without meta tokens";
    s.train = demo_recipe();
    s.sampling.top_p = 0.95;  // what the demo has always sampled with (stated in its report)
    s.prompts = {"The ", "Once upon a time"};
    for (const char* p : {"compare-transformer", "compare-mamba", "compare-hymba"}) s.rows.push_back(preset_row(p, scale));
    s.rows.push_back(preset_row("compare-hymba", scale, "Hymba-NoMeta", {{"num_memory_tokens", 0}}, "compare-hymba-nometa"));
  } else {
    std::string names;
    for (const SuiteInfo& i : builtin_suites()) names += (names.empty() ? "" : ", ") + i.name;
    fail("--suite: unknown suite '", name, "' (built-in: ", names, "; or a suite .json file)");
  }
  return s;
}

template <class T>
T field(const json& j, const char* key, const std::string& where) {
  try {
    return j.at(key).get<T>();
  } catch (const json::exception&) {
    fail(where, ": field '", key, "' has the wrong type");
  }
}

}  // namespace

void apply_sampling_settings(SampleSettings& s, const json& j, const std::string& where) {
  HYMBA_CHECK(j.is_object(), where, ": must be an object (tokens, temperature, top_k, top_p, untrained)");
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& k = it.key();
    const json& v = it.value();
    if (k == "tokens") {
      HYMBA_CHECK(v.is_number_integer() && v.get<int64_t>() >= 0, where, ": 'tokens' must be an integer >= 0");
      s.tokens = v.get<int64_t>();
    } else if (k == "temperature") {
      HYMBA_CHECK(v.is_number() && v.get<double>() >= 0, where, ": 'temperature' must be a number >= 0");
      s.temperature = v.get<double>();
    } else if (k == "top_k") {
      HYMBA_CHECK(v.is_number_integer() && v.get<int64_t>() >= 0, where, ": 'top_k' must be an integer >= 0");
      s.top_k = v.get<int64_t>();
    } else if (k == "top_p") {
      HYMBA_CHECK(v.is_number() && v.get<double>() > 0 && v.get<double>() <= 1, where,
                  ": 'top_p' must be a number in (0, 1]");
      s.top_p = v.get<double>();
    } else if (k == "untrained") {
      HYMBA_CHECK(v.is_boolean(), where, ": 'untrained' must be true or false");
      s.untrained = v.get<bool>();
    } else {
      fail(where, ": unknown field '", k, "' (known: tokens, temperature, top_k, top_p, untrained)");
    }
  }
}

namespace {

std::vector<Question> questions_from_json(const json& qs, const Suite& s, const std::string& path) {
  HYMBA_CHECK(qs.is_array(), path, ": field 'questions' must be an array");
  std::vector<Question> out;
  std::set<std::string> ids;
  for (size_t i = 0; i < qs.size(); ++i) {
    const std::string where = path + ": questions[" + std::to_string(i) + "]";
    Question q = question_from_json(qs[i], where, "best_val_loss");
    for (const std::string& row : {q.row_a, q.row_b}) {
      const bool known = row.empty() || std::any_of(s.rows.begin(), s.rows.end(), [&](const SuiteRow& r) { return r.id == row; });
      HYMBA_CHECK(known, where, ": row '", row, "' is not a row id of the suite");
    }
    try {
      (void)metric_lower_is_better(q.metric);
    } catch (const Error& e) {
      fail(where, ": field 'metric': ", e.what());
    }
    HYMBA_CHECK(ids.insert(q.id).second, where, ": id '", q.id, "' is used twice");
    out.push_back(std::move(q));
  }
  return out;
}

Suite from_file(const std::string& path, const std::string& scale_flag) {
  const json j = read_json_file(path);
  HYMBA_CHECK(j.is_object(), path, ": a suite file is a JSON object with a 'rows' array");
  static const std::set<std::string> known = {"name",    "title",    "sort", "scale", "train",
                                              "prompts", "sampling", "seed", "rows", "questions"};
  for (auto it = j.begin(); it != j.end(); ++it)
    HYMBA_CHECK(known.count(it.key()), path, ": unknown field '", it.key(),
                "' (known: name, title, sort, scale, train, prompts, sampling, seed, rows, questions)");
  Suite s;
  s.name = j.contains("name") ? field<std::string>(j, "name", path) : fs::path(path).stem().string();
  s.title = j.contains("title") ? field<std::string>(j, "title", path) : s.name;
  const std::string sort = j.contains("sort") ? field<std::string>(j, "sort", path) : "rows";
  HYMBA_CHECK(sort == "rows" || sort == "best_ppl", path, ": field 'sort' must be \"rows\" or \"best_ppl\" (got \"",
              sort, "\")");
  s.sort = sort == "rows" ? SortOrder::kRows : SortOrder::kBestPpl;
  const std::string scale_name =
      !scale_flag.empty() ? scale_flag : j.contains("scale") ? field<std::string>(j, "scale", path) : "seed";
  const Scale scale = parse_scale(scale_name);
  if (j.contains("train")) {
    HYMBA_CHECK(j["train"].is_object(), path, ": field 'train' must be an object of training settings");
    TrainOptions probe;  // checks keys and types now, not after hours of training
    apply_train_settings(probe, j["train"], path + ": train");
    s.train = j["train"];
  }
  s.prompts = j.contains("prompts") ? field<std::vector<std::string>>(j, "prompts", path)
                                    : std::vector<std::string>{"The "};
  if (j.contains("sampling")) apply_sampling_settings(s.sampling, j["sampling"], path + ": sampling");
  if (j.contains("seed")) {
    s.seed = field<std::string>(j, "seed", path);
    HYMBA_CHECK(s.seed == "000" || s.seed == "001" || s.seed == "002" || s.seed == "003", path,
                ": field 'seed' must be \"000\", \"001\", \"002\" or \"003\" (got \"", s.seed, "\")");
  }
  HYMBA_CHECK(j.contains("rows") && j["rows"].is_array() && !j["rows"].empty(), path,
              ": field 'rows' must be a non-empty array");
  const fs::path dir = fs::path(path).parent_path();
  for (size_t i = 0; i < j["rows"].size(); ++i) {
    const json& r = j["rows"][i];
    const std::string where = path + ": rows[" + std::to_string(i) + "]";
    HYMBA_CHECK(r.is_object(), where, ": must be an object with 'preset' or 'config'");
    for (auto it = r.begin(); it != r.end(); ++it)
      HYMBA_CHECK(it.key() == "id" || it.key() == "name" || it.key() == "preset" || it.key() == "config" ||
                      it.key() == "overrides" || it.key() == "implementation",
                  where, ": unknown field '", it.key(), "' (known: id, name, preset, config, overrides, implementation)");
    HYMBA_CHECK(r.contains("preset") != r.contains("config"), where, ": give exactly one of 'preset' and 'config'");
    const json overrides = r.contains("overrides") ? r["overrides"] : json::object();
    HYMBA_CHECK(overrides.is_object(), where, ": field 'overrides' must be an object of config fields");
    const std::string name = r.contains("name") ? field<std::string>(r, "name", where) : "";
    const std::string id = r.contains("id") ? field<std::string>(r, "id", where) : "";
    SuiteRow row;
    if (r.contains("preset")) {
      row = preset_row(field<std::string>(r, "preset", where), scale, name, overrides, id.empty() ? "" : slug(id));
      if (id.empty() && !name.empty()) row.id = slug(name);
    } else {
      const fs::path cfg_path = dir / field<std::string>(r, "config", where);
      row.config = read_json_file(cfg_path.string());
      for (auto it = overrides.begin(); it != overrides.end(); ++it) row.config[it.key()] = it.value();
      row.name = name.empty() ? cfg_path.stem().string() : name;
      row.id = slug(id.empty() ? row.name : id);
      row.source = cfg_path.string() + (overrides.empty() ? "" : " + " + overrides.dump());
    }
    if (r.contains("implementation")) row.implementation = field<std::string>(r, "implementation", where);
    // The config must build now: a typo should not surface after other rows trained.
    (void)ModelConfig::from_json(row.config, where + " (" + row.name + ")");
    s.rows.push_back(std::move(row));
  }
  if (j.contains("questions")) s.questions = questions_from_json(j["questions"], s, path);
  return s;
}

}  // namespace

const std::vector<SuiteInfo>& builtin_suites() {
  static const std::vector<SuiteInfo> v = {
      {"hymba-roadmap", "the 13 rows of the Hymba paper's design roadmap (seed 002's matrix)"},
      {"seed-000", "seed 000's five rows: Mamba-only, Transformer global / local (paired KV), Hybrid 50/50, "
                   "Hybrid paper setting (15 layers)"},
      {"hymba-roadmap-epoch", "hymba-roadmap at seed 002's real budget: one epoch under the 150-step schedule"},
      {"seed-ablation", "seed 001: Mamba-only, Transformer global/local, Hybrid-Mine/NoMeta/NoKVShare, "
                        "Hybrid-Official, Official-NoMeta"},
      {"arch-compare", "seed 003: Transformer vs Mamba vs the official Hymba layer, 8 layers of d 384 each"},
      {"seed-003", "seed 003's rounds 1 and 2: Mamba, Transformer (GPT-style; --transformer rope for RoPE/SwiGLU), "
                   "its Hymba v1 (6 layers) and v2 (8 layers)"},
      {"seed-003-long", "seed 003's round 3: Transformer, Mamba and Hymba v2 at T = 256 ... 4096 (--seq-lens), "
                        "4,096 tokens per step; rows over the memory available are skipped"},
      {"demo", "arch-compare plus Hymba without meta tokens, with a short recipe (the README's main job)"},
  };
  return v;
}

Suite load_suite(const std::string& name_or_file, const std::string& scale) {
  SuiteChoices c;
  c.scale = scale;
  return load_suite(name_or_file, c);
}

Suite load_suite(const std::string& name_or_file, const SuiteChoices& choices) {
  Suite s;
  const std::string& scale = choices.scale;
  const bool is_file = name_or_file.ends_with(".json") || name_or_file.find('/') != std::string::npos;
  if (is_file) {
    HYMBA_CHECK(choices.transformer.empty(), "--transformer: only the built-in seed-003 suites have the choice");
    HYMBA_CHECK(choices.seq_lens.empty(), "--seq-lens: only the built-in seed-003-long suite has a T axis");
    s = from_file(name_or_file, scale);
  } else {
    s = builtin(name_or_file, parse_scale(scale.empty() ? "seed" : scale), choices);
    for (const SuiteRow& r : s.rows) (void)ModelConfig::from_json(r.config, r.source);
  }
  std::set<std::string> ids;
  for (const SuiteRow& r : s.rows)
    HYMBA_CHECK(ids.insert(r.id).second, name_or_file, ": two rows share the id '", r.id, "'; give each an 'id'");
  return s;
}

namespace {

// The recipe's data keys (docs/training.md, "Splits and batches").
void apply_data_setting(TrainOptions& o, const std::string& k, const json& v, const std::string& source) {
  const std::string value = v.is_string() ? v.get<std::string>() : std::string();
  if (k == "data_split") {
    HYMBA_CHECK(value == "blocks" || value == "chunks-shuffled", source,
                ": 'data_split' must be \"blocks\" or \"chunks-shuffled\" (got ", json_excerpt(v), ")");
    o.data_split = parse_data_split(value, source + ": 'data_split'");
  } else if (k == "batching") {
    HYMBA_CHECK(value == "random-windows" || value == "epochs", source,
                ": 'batching' must be \"random-windows\" or \"epochs\" (got ", json_excerpt(v), ")");
    o.batching_epochs = value == "epochs";
  } else {
    HYMBA_CHECK(value == "next" || value == "eos", source,
                ": 'chunk_last_target' must be \"next\" or \"eos\" (got ", json_excerpt(v), ")");
    o.chunk_last_eos = value == "eos";
  }
}

}  // namespace

void apply_train_settings(TrainOptions& o, const json& settings, const std::string& source) {
  HYMBA_CHECK(settings.is_object(), source, ": training settings must be a JSON object");
  for (auto it = settings.begin(); it != settings.end(); ++it) {
    const std::string& k = it.key();
    const json& v = it.value();
    auto num = [&]() -> double {
      HYMBA_CHECK(v.is_number(), source, ": '", k, "' must be a number (got ", json_excerpt(v), ")");
      return v.get<double>();
    };
    auto integer = [&]() -> int64_t {
      HYMBA_CHECK(v.is_number_integer(), source, ": '", k, "' must be an integer (got ", json_excerpt(v), ")");
      return v.get<int64_t>();
    };
    if (k == "steps") o.steps = integer(), o.epochs = o.steps > 0 ? 0.0 : o.epochs;
    else if (k == "epochs") o.epochs = num(), o.steps = o.epochs > 0 ? 0 : o.steps;
    else if (k == "stop_epochs") o.stop_epochs = num();
    else if (k == "batch") o.batch = integer();
    else if (k == "seq_len") o.seq_len = integer();
    else if (k == "grad_accum") o.grad_accum = integer();
    else if (k == "grad_shards") o.grad_shards = integer();
    else if (k == "lr") o.lr = num();
    else if (k == "min_lr_ratio") o.min_lr_ratio = num();
    else if (k == "warmup") o.warmup = integer();
    else if (k == "weight_decay") o.adamw.weight_decay = num();
    else if (k == "weight_decay_scope") {
      HYMBA_CHECK(v.is_string() && (v == "matrices" || v == "all"), source,
                  ": 'weight_decay_scope' must be \"matrices\" (not norms, biases, meta tokens, A_log, D, beta) or "
                  "\"all\" (every parameter, seed 001's) (got ", json_excerpt(v), ")");
      o.adamw.decay_all = v == "all";
    }
    else if (k == "precision") {
      const auto p = v.is_string() ? cpu::parse_matmul_precision(v.get<std::string>()) : std::nullopt;
      HYMBA_CHECK(p.has_value(), source, ": 'precision' must be \"f32\" or \"bf16\" (got ", json_excerpt(v), ")");
      o.precision = *p;
    }
    else if (k == "recompute") {
      HYMBA_CHECK(v.is_boolean(), source, ": 'recompute' must be true or false (got ", json_excerpt(v), ")");
      o.recompute = v.get<bool>();
    }
    else if (k == "data_split" || k == "batching" || k == "chunk_last_target") apply_data_setting(o, k, v, source);
    else if (k == "beta1") o.adamw.beta1 = num();
    else if (k == "beta2") o.adamw.beta2 = num();
    else if (k == "grad_clip") o.grad_clip = num();
    else if (k == "label_smoothing") o.label_smoothing = num();
    else if (k == "dropout") o.dropout = num();
    else if (k == "eval_interval") o.eval_interval = integer();
    else if (k == "eval_windows") o.eval_windows = integer();
    else if (k == "log_interval") o.log_interval = integer();
    else if (k == "save_interval") o.save_interval = integer();
    else if (k == "val_fraction") o.val_fraction = num();
    else if (k == "seed") o.seed = static_cast<uint64_t>(integer());
    else if (k == "tokenizer_vocab") o.tokenizer_vocab = static_cast<int32_t>(integer());
    else if (k == "tokenizer_min_frequency") {
      const int64_t f = integer();
      HYMBA_CHECK(f >= 0, source, ": 'tokenizer_min_frequency' must be >= 0 (got ", f, ")");
      o.tokenizer_min_frequency = static_cast<uint64_t>(f);
    } else if (k == "tokenizer_alphabet") {
      HYMBA_CHECK(v.is_string() && (v == "corpus" || v == "bytes"), source,
                  ": 'tokenizer_alphabet' must be \"corpus\" or \"bytes\" (got ", json_excerpt(v), ")");
      o.tokenizer_corpus_alphabet = v == "corpus";
    } else if (k == "tokenizer") {
      HYMBA_CHECK(v.is_string(), source, ": 'tokenizer' must be \"byte\", \"bpe\", \"unigram\", \"byte-level-bpe\" or \"hf-unigram\"");
      o.tokenizer_type = v.get<std::string>();
      (void)parse_tokenizer_kind(o.tokenizer_type, source + ": 'tokenizer'");
    } else {
      fail(source, ": unknown training setting '", k,
           "' (known: steps, epochs, stop_epochs, batch, seq_len, grad_accum, grad_shards, lr, min_lr_ratio, warmup, weight_decay, "
           "weight_decay_scope, precision, recompute, data_split, batching, chunk_last_target, beta1, "
           "beta2, grad_clip, label_smoothing, dropout, eval_interval, eval_windows, log_interval, save_interval, "
           "val_fraction, seed, tokenizer, tokenizer_vocab, tokenizer_min_frequency, tokenizer_alphabet)");
    }
  }
}

json train_settings_json(const TrainOptions& o) {
  json j = recipe_core_json(o);
  j.update(json{{"eval_interval", o.eval_interval}, {"eval_windows", o.eval_windows}, {"tokenizer", o.tokenizer_type}});
  if (o.steps > 0) j["steps"] = o.steps;
  else j["epochs"] = o.epochs;
  if (o.dropout >= 0) j["dropout"] = o.dropout;
  if (o.tokenizer_type != "byte") j["tokenizer_vocab"] = o.tokenizer_vocab;
  if (o.tokenizer_type == "byte-level-bpe") {
    j["tokenizer_min_frequency"] = o.tokenizer_min_frequency;
    j["tokenizer_alphabet"] = o.tokenizer_corpus_alphabet ? "corpus" : "bytes";
  }
  if (o.stop_epochs > 0) j["stop_epochs"] = o.stop_epochs;
  return j;
}

json SampleSettings::to_json() const {
  return {{"tokens", tokens}, {"temperature", temperature}, {"top_k", top_k}, {"top_p", top_p},
          {"untrained", untrained}};
}

}  // namespace hymba::ablate
