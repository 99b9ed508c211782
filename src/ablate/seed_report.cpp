#include "ablate/seed_report.h"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <tuple>

#include "ablate/seed_metrics.h"
#include "core/atomic_file.h"
#include "core/error.h"
#include "model/presets.h"
#include "model/summary.h"

namespace hymba::ablate {

using nlohmann::json;

namespace {

const RowResult* find_row(const std::vector<RowResult>& rows, const std::string& id) {
  for (const RowResult& r : rows)
    if (r.id == id) return &r;
  return nullptr;
}

std::optional<double> delta(const std::vector<RowResult>& rows, const std::string& a, const std::string& b) {
  const RowResult *ra = find_row(rows, a), *rb = find_row(rows, b);
  if (!ra || !rb) return std::nullopt;
  return ra->best_val_ppl - rb->best_val_ppl;
}

// 82534912 -> "82,534,912", as seed 000 prints parameter counts.
std::string thousands(int64_t v) {
  std::string digits = std::to_string(v < 0 ? -v : v), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return v < 0 ? "-" + out : out;
}

// Seed 003's sizes are at GPT-2's vocabulary (docs/ablation.md, Seed 003).
int64_t params_at_seed003_vocab(json config) {
  config["vocab_size"] = 50257;
  return summarize(ModelConfig::from_json(config, "seed 003 row"), 1).total_params;
}

std::string loss_ppl(double loss) { return fmt("%.4f", loss) + " (" + fmt("%.2f", std::exp(loss)) + ")"; }
std::string signed2(double v) { return fmt("%+.2f", v); }

// What the seeds reported (seed 000's report and seed 003's round 1), beside
// ours in the seed tables. Seeds 001 and 002 recorded no outputs.
struct Seed000Row {
  const char* id;
  const char* reported;
};
const std::vector<Seed000Row>& seed000_reported() {
  static const std::vector<Seed000Row> v = {
      {"seed000-mamba", "82,534,912; 1.00x; 4.2294 (68.68); 5.2923 (198.79); 62,260; 1.4 min; 86.1; 1.16 s"},
      {"seed000-transformer-global", "68,910,592; 1.00x; 4.3329 (76.16); 4.8500 (127.74); 53,617; 1.6 min; 56.0; 1.79 s"},
      {"seed000-transformer-local", "68,910,592; 1.88x; 2.5432 (12.72); 3.3789 (29.34); 16,064; 5.4 min; 15.2; 6.59 s"},
      {"seed000-hybrid-5050", "66,662,415; 1.67x; 1.6486 (5.20); 1.6511 (5.21); 14,812; 5.9 min; 14.5; 6.90 s"},
      {"seed000-hybrid-paper", "66,662,415; 1.67x; 1.8038 (6.07); 1.8040 (6.07); 14,779; 5.9 min; 14.6; 6.84 s"},
  };
  return v;
}
std::string seed003_reported(const std::string& id) {
  if (id == "compare-mamba") return "1.25; 27M; 8; 0.54 steps/s";
  if (id == "compare-transformer" || id == "gpt-baseline") return "1.26; 27M; 8; 0.59 steps/s";
  if (id == "hymba-v1") return "1.90; 30M; 6; 0.54 steps/s; mixing ~62% attention";
  if (id == "hymba-v2") return "TBD (round 2 was still training)";
  return "";
}

// Seed 002's SWA mode and the other roadmap switches, read from the config.
std::string swa_mode(const json& c) {
  if (c.value("sliding_window", int64_t{0}) <= 0) return "none";
  const json g = c.value("global_attn_idx", json::array());
  return g.empty() ? "all" : "default";
}
bool has_kv_share(const json& c) {
  const json g = c.value("kv_reuse_group", json::array());
  return g.is_string() || !g.empty();
}

std::string seed_steps(const std::string& seed, const json& settings) {
  const json t = settings.value("train", json::object());
  if (seed == "000") return "not stated (its notebook, seed 001: 25 epochs = 1,675 steps)";
  if (seed == "001") return "25 epochs of 67 batches = 1,675";
  if (seed == "002")
    return t.contains("stop_epochs") ? "epochs=1: ~33 of a 150-step schedule" : "150 (its code stops after epochs=1, ~33)";
  if (seed == "003") return "5,000";
  return "";
}

// How this run cut its data where the seed cut it otherwise (seeds 000/001:
// shuffled 256-token chunks 90/10, epochs with drop_last; 002: 512-token
// chunks 95/5, EOS as each chunk's last target, batches with drop_last).
std::vector<std::string> data_cut_differences(const std::string& seed, const json& t) {
  std::vector<std::string> d;
  if (seed != "000" && seed != "001" && seed != "002") return d;
  const std::string chunks = seed == "002" ? "5 % of shuffled 512-token chunks" : "10 % of shuffled 256-token chunks";
  if (t.value("data_split", std::string("blocks")) != "chunks-shuffled")
    d.push_back("validates on random 256-token blocks, not the seed's " + chunks + " (`data_split: chunks-shuffled`)");
  if (t.value("batching", std::string("random-windows")) != "epochs")
    d.push_back("draws random windows each step, not epochs of shuffled batches with drop_last (`batching: epochs`)");
  if (seed == "002" && t.value("chunk_last_target", std::string("next")) != "eos")
    d.push_back("each chunk's last target is the next token, not seed 002's EOS (`chunk_last_target: eos`)");
  return d;
}

std::string row_differences(const std::string& seed, const RowResult& r, const json& settings,
                            const std::string& scale) {
  std::vector<std::string> d = data_cut_differences(seed, settings.value("train", json::object()));
  const std::string theirs = seed == "000"   ? "not stated"
                             : seed == "001" ? "1,675"
                             : seed == "002" ? (settings.value("train", json::object()).contains("stop_epochs") ? "~33" : "150")
                                             : "5,000";
  d.push_back(std::to_string(r.steps) + " steps, seed " + theirs);
  if (scale != "seed") {
    std::string note = "scale " + scale;
    // A preset row at another scale: what it is at the seed's size.
    try {
      const ModelConfig full = preset_config(r.id, Scale::kSeed);
      note += " (seed scale: " + std::to_string(full.num_hidden_layers) + " layers";
      if (seed == "000") note += ", KV reduction " + fmt("%.2fx", seed000_kv_reduction(full));
      note += ")";
    } catch (const Error&) {
      // not a preset row: nothing to add
    }
    d.push_back(note);
  }
  if (seed == "000") d.push_back("widths inferred (the report has no config)");
  if (seed == "003" && (r.id == "compare-transformer"))
    d.push_back("RoPE + SwiGLU + RMSNorm, not GPT-style learned positions + GELU + LayerNorm (--transformer gpt)");
  if (seed == "003" && r.id == "gpt-baseline")
    d.push_back("GPT-style as the seed describes it; attention projections without GPT-2's biases");
  if (seed == "003" && r.id.starts_with("compare-mamba"))
    d.push_back("the engine's Mamba (selective scan on CPU), not mamba-ssm's CUDA kernels");
  if (seed == "003" && r.id.starts_with("hymba-v")) d.push_back("learned-beta fusion stands for its learned mixing");
  if (seed == "002" && r.id == "roadmap-10")
    d.push_back(has_kv_share(r.config) ? "GQA + SWA + KV sharing as the paper's row 10; seed 002's code applies GQA "
                                         "only (`--same-kv-compression gqa-only`)"
                                       : "GQA only, as seed 002's code runs its row 10 (`--same-kv-compression "
                                         "gqa-only`); the paper's adds SWA and KV sharing");
  const json kv_group = r.config.value("kv_reuse_group", json());
  if (seed == "002" && kv_group == "auto")
    d.push_back("K/V shared by consecutive local layers; seed 002 pairs every consecutive layer, global ones "
                "included (`--kv-reuse-all-pairs`), and its training forward never reads the shared K/V");
  if (seed == "002" && kv_group == "all_pairs")
    d.push_back("K/V shared by every consecutive pair of layers, as seed 002's owner map (`kv_reuse_group: "
                "all_pairs`); the engine shares them in training too, seed 002's forward only in its cache figure");
  if (seed == "002" && r.config.value("num_memory_tokens", 0) > 0)
    d.push_back(r.config.value("meta_tokens_see_all", false)
                    ? "meta tokens see every token, as seed 002's mask (`meta_tokens_see_all`: a leak)"
                    : "meta tokens causal (seed 002's mask lets them see every token: a leak; "
                      "`meta_tokens_see_all: true` reproduces it)");
  if (seed == "000" && swa_mode(r.config) != "none" && r.config.value("layer_types", json()) != "mamba")
    d.push_back(r.config.value("sliding_window_symmetric", false)
                    ? "local layers see |i - j| < w, future tokens included (`sliding_window_symmetric`: the leak "
                      "seed 000's numbers suggest)"
                    : "local layers causal (0 <= i - j < w); seed 000's numbers suggest a window that also sees "
                      "future tokens (`sliding_window_symmetric: true`)");
  if (seed == "001" && r.implementation == "Official" && r.config.value("attention_dropout", 0.0) != 0.1)
    d.push_back("attention dropout " + fmt("%g", r.config.value("attention_dropout", 0.0)) +
                ", seed 001's official rows 0.1 (`attention_dropout`)");
  std::string out;
  for (const std::string& s : d) out += (out.empty() ? "" : "; ") + s;
  return out;
}

std::string suite_differences(const std::string& seed, const json& settings) {
  const json t = settings.value("train", json::object());
  const std::string data = settings.value("data", std::string("default"));
  std::ostringstream s;
  s << "- **Data**: this run `" << data << "`";
  if (seed == "003") {
    s << "; seed 003: TinyStories.\n";
  } else {
    s << "; seed " << seed << ": Hugging Face `karpathy/tiny_shakespeare`, train split only (1,003,854 characters; "
      << "the shared file is the whole 1,115,394). The seed's split is the file's first 1,003,854 bytes: "
      << "`head -c 1003854 tinyshakespeare.txt > tinyshakespeare-train.txt`.";
    const bool chunked = t.value("data_split", std::string("blocks")) == "chunks-shuffled";
    const std::string held = fmt("%g %% of ", t.value("val_fraction", 0.1) * 100) +
                             (chunked ? "shuffled seq_len-token chunks (`data_split: chunks-shuffled`)"
                                      : "random 256-token blocks (`data_split: blocks`)");
    if (seed == "001" || seed == "000") s << " Seed 001 holds out 10 % of shuffled 256-token chunks; this run " << held << ".";
    if (seed == "002") s << " Seed 002 holds out 5 % of shuffled 512-token chunks; this run " << held << ".";
    s << "\n";
  }
  s << "- **Tokenizer**: this run " << t.value("tokenizer", std::string("?"));
  if (t.contains("tokenizer_vocab")) s << " " << t["tokenizer_vocab"].dump();
  if (t.contains("tokenizer_min_frequency")) s << ", min_frequency " << t["tokenizer_min_frequency"].dump();
  if (t.contains("tokenizer_alphabet")) s << ", alphabet " << t.value("tokenizer_alphabet", std::string("?"));
  const bool seed001_tokenizer = t.value("tokenizer", std::string()) == "byte-level-bpe" &&
                                 t.value("tokenizer_vocab", 0) == 4096 && t.value("tokenizer_min_frequency", 0) == 2 &&
                                 t.value("tokenizer_alphabet", std::string()) == "corpus";
  if ((seed == "000" || seed == "001") && seed001_tokenizer)
    s << "; seed 001 trains the same Hugging Face ByteLevel BPE (BpeTrainer: vocab 4,096, min_frequency 2, "
         "<unk> <pad> <bos> <eos>, the corpus's bytes as its alphabet), so on the seed's train split the vocabulary "
         "is the seed's and per-token PPL is comparable (the trainer is checked merge for merge against HF's; the "
         "tokenizer file adds a ByteLevel decoder the seed leaves out).\n";
  else if (seed == "000" || seed == "001")
    s << "; seed 001: Hugging Face ByteLevel BPE 4,096 (min_frequency 2, four special tokens, corpus alphabet; "
         "`tokenizer: byte-level-bpe`, the suite's default), so per-token PPL is not directly comparable.\n";
  else if (seed == "002" && t.value("tokenizer", std::string()) == "hf-unigram" && t.value("tokenizer_vocab", 0) == 32000)
    s << "; seed 002 trains the same Hugging Face Unigram (UnigramTrainer: vocab 32,000, <|pad|> <|bos|> <|eos|>, "
         "NFKC + lowercase, Whitespace pre-tokenizer), so on the seed's corpus the vocabulary is the seed's and "
         "per-token PPL is comparable (the trainer is checked piece for piece against HF's; like HF's it returns "
         "fewer pieces than asked when the corpus supports fewer: 5,917 tokens on the whole Tiny Shakespeare file).\n";
  else if (seed == "002")
    s << "; seed 002: Hugging Face Unigram 32,000 (fewer when the corpus supports fewer) with NFKC + lowercase and "
         "a Whitespace pre-tokenizer (`tokenizer: hf-unigram`, the suite's default), so per-token PPL is not "
         "directly comparable.\n";
  else
    s << "; seed 003: not stated; its Mamba's 27M implies GPT-2's 50,257 tokens (tied), the presets' vocabulary "
         "(docs/ablation.md, Seed 003), so parameter counts and per-token loss differ from the seed's at another "
         "vocabulary.\n";
  if (seed == "000" || seed == "001") {
    const bool all = t.value("weight_decay_scope", std::string("matrices")) == "all";
    s << "- **Weight decay**: this run decays " << (all ? "every parameter" : "weight matrices only (not norms, biases, "
                                                      "meta tokens, A_log, D, β)")
      << "; seed 001 passes every parameter to AdamW" << (all ? " (the same: `weight_decay_scope: all`)" : " (`weight_decay_scope: all` does the same)")
      << ".\n";
  }
  s << "- **Steps**: see each row; seed: " << seed_steps(seed, settings) << ".\n";
  s << "- **Hardware**: this run CPU, fp32; seed " << seed << ": "
    << (seed == "002" ? "A100 80GB with AMP (fp16)" : seed == "003" ? "Quadro T1000 4GB" : "a CUDA GPU") << ".\n";
  return s.str();
}

}  // namespace

Seed001Analysis analyse_seed001(const std::vector<RowResult>& rows) {
  Seed001Analysis a;
  double sum_m = 0, sum_o = 0;
  int n_m = 0, n_o = 0;
  const RowResult* best = nullptr;
  for (const RowResult& r : rows) {
    if (r.implementation == "Mine") sum_m += r.best_val_ppl, ++n_m;
    if (r.implementation == "Official") sum_o += r.best_val_ppl, ++n_o;
    if (!best || r.best_val_ppl < best->best_val_ppl) best = &r;
  }
  if (n_m) a.mean_ppl_mine = sum_m / n_m;
  if (n_o) a.mean_ppl_official = sum_o / n_o;
  if (best) {
    a.best_model = best->name;
    a.best_implementation = best->implementation;
    a.best_ppl = best->best_val_ppl;
  }
  a.delta_no_meta_mine = delta(rows, "hybrid-nometa", "hybrid-mine");
  a.delta_no_kv_share = delta(rows, "hybrid-nokvshare", "hybrid-mine");
  a.delta_no_meta_official = delta(rows, "official-nometa", "hybrid-official");
  a.mine_minus_official = delta(rows, "hybrid-mine", "hybrid-official");
  return a;
}

TextTable seed_table(const std::string& seed, const std::vector<RowResult>& rows, const json& settings) {
  TextTable t;
  (void)settings;
  if (seed == "000") {
    t.headers = {"Model", "Parameters", "KV Cache Reduction (layers/owners)", "Best Val Loss (PPL)",
                 "Final Val Loss (PPL)", "Train Speed (tok/s)", "Training Time", "Inference (tok/s)",
                 "Time per 100 tokens", "Seed 000 reported (same columns)"};
    for (const RowResult& r : rows) {
      std::string reported;
      for (const Seed000Row& s : seed000_reported())
        if (r.id == s.id) reported = s.reported;
      t.cells.push_back({r.name, thousands(r.params), fmt("%.2fx", r.kv_reduction_seed000),
                         loss_ppl(r.best_val_loss), loss_ppl(r.final_val_loss), fmt("%.0f", r.train_tokens_per_s),
                         fmt("%.1f min", r.train_seconds / 60.0), fmt("%.1f", r.decode_tokens_per_s),
                         fmt("%.2fs", seconds_per_100_tokens(r.decode_tokens_per_s)), reported});
    }
  } else if (seed == "001") {
    // The notebook's summary DataFrame, sorted by best PPL.
    t.headers = {"Model", "Implementation", "Params (M)", "Best PPL", "Final PPL", "Time (min)"};
    std::vector<const RowResult*> sorted;
    for (const RowResult& r : rows) sorted.push_back(&r);
    std::stable_sort(sorted.begin(), sorted.end(),
                     [](const RowResult* a, const RowResult* b) { return a->best_val_ppl < b->best_val_ppl; });
    for (const RowResult* r : sorted)
      t.cells.push_back({r->name, r->implementation.empty() ? "Mine" : r->implementation, fmt("%.2f", r->params / 1e6),
                         fmt("%.2f", r->best_val_ppl), fmt("%.2f", r->final_val_ppl),
                         fmt("%.1f", r->train_seconds / 60.0)});
  } else if (seed == "002") {
    // Seed 002's DataFrame: PPL and accuracy of the final model, Cache(MB) its way at 512 tokens.
    t.headers = {"ID",      "Configuration", "ParamRatio(Attn:Mamba)", "AttnShare(%)", "PPL(↓)", "Acc(↑)",
                 "Throughput(tokens/s)↑", "Cache(MB)↓ @512 (seed 002)", "Cache MB @512 (engine)", "Steps", "Fusion", "SWA", "Meta",
                 "KVshare"};
    int id = 0;
    for (const RowResult& r : rows) {
      ++id;
      const json& c = r.config;
      t.cells.push_back({std::to_string(id), r.name, r.dims_ratio, fmt("%.2f", 100.0 * r.dims_attention_share),
                         fmt("%.3f", r.final_val_ppl), fmt("%.4f", r.final_val_accuracy),
                         fmt("%.0f", r.train_tokens_per_s), fmt("%.2f", r.seed002_cache_mb), fmt("%.2f", r.engine_cache_mb_seed002),
                         std::to_string(r.steps),
                         c.value("fusion", std::string("norm_mean")), swa_mode(c),
                         c.value("num_memory_tokens", 0) > 0 ? "True" : "False", has_kv_share(c) ? "True" : "False"});
    }
  } else if (seed == "003") {
    t.headers = {"Model", "Val Loss", "Parameters", "Params at vocab 50,257", "Layers", "Architecture",
                 "Speed (steps/s)", "Attention mixing (learned β)", "Seed 003 reported"};
    for (const RowResult& r : rows) {
      const std::string lt = r.config.value("layer_types", json("hybrid")).is_string()
                                 ? r.config.value("layer_types", std::string("hybrid"))
                                 : std::string("mixed");
      const std::string arch = lt == "attention" ? "Pure Attention" : lt == "mamba" ? "Pure SSM" : "Hybrid Attn+SSM";
      const auto mix = r.mean_attention_mixing();
      t.cells.push_back({r.name, fmt("%.2f", r.best_val_loss), fmt("%.1fM", r.params / 1e6),
                         fmt("%.1fM", static_cast<double>(params_at_seed003_vocab(r.config)) / 1e6),
                         std::to_string(r.layers),
                         arch, fmt("%.2f", r.steps_per_s()),
                         mix ? fmt("%.0f%%", 100.0 * *mix) + " attention / " + fmt("%.0f%%", 100.0 * (1 - *mix)) + " SSM"
                             : std::string("n/a"),
                         seed003_reported(r.id)});
    }
  }
  return t;
}

namespace {

// Seed 003's learned β as training goes: per row with learned-beta fusion,
// the attention share of each layer at each evaluation (the mean over the
// repeats when there are several).
std::string mixing_against_steps(const std::vector<RowResult>& rows) {
  std::ostringstream md;
  for (const RowResult& r : rows) {
    std::vector<const CurvePoint*> points;
    for (const CurvePoint& p : r.curve)
      if (!p.attention_mixing.empty()) points.push_back(&p);
    if (points.empty()) continue;
    TextTable t;
    t.headers = {"Step"};
    for (size_t l = 0; l < points.front()->attention_mixing.size(); ++l) t.headers.push_back("Layer " + std::to_string(l));
    for (const CurvePoint* p : points) {
      std::vector<std::string> cells = {std::to_string(p->step)};
      for (double v : p->attention_mixing) cells.push_back(fmt("%.3f", v));
      cells.resize(t.headers.size(), "");
      t.cells.push_back(std::move(cells));
    }
    md << "Attention mixing (learned β) of " << r.name << " per layer against steps:\n\n" << markdown_table(t) << "\n";
  }
  return md.str();
}

// Seed 001's "KV Sharing Structure" printout, per row with attention, from
// the row's config as it trained.
std::string kv_sharing_section(const std::vector<RowResult>& rows) {
  std::ostringstream md;
  md << "### KV sharing structure\n\nAs seed 001 prints it (producers compute K/V, consumers reuse their "
        "producer's):\n\n";
  for (const RowResult& r : rows) {
    const std::string text = kv_sharing_text(kv_sharing_info(ModelConfig::from_json(r.config, r.name)));
    if (!text.empty()) md << "- " << r.name << ": " << text << "\n";
  }
  return md.str() + "\n";
}

}  // namespace

std::string seed_section(const std::string& seed, const std::vector<RowResult>& rows, const json& settings,
                         const std::string& scale) {
  if (seed.empty()) return "";
  std::ostringstream md;
  md << "## Seed " << seed << "'s table\n\nColumns as seed " << seed << " defines them";
  if (seed == "000") md << " (KV reduction = attention layers / layers that own a K/V cache, context-free)";
  if (seed == "002") md << " (ratio and share from the configured branch widths; Cache(MB) = 2 x KV heads x 512 x head "
                           "dim x 2 bytes x owners, every layer caching all 512 tokens, KV sharing pairing all layers)";
  if (seed == "003") md << " (steps/s over training-step time; mixing = mean|β_attn| / (mean|β_attn| + mean|β_mamba|) "
                           "of learned-β fusion, averaged over layers)";
  md << ".\n\n" << markdown_table(seed_table(seed, rows, settings)) << "\n";
  if (seed == "003") {
    for (const RowResult& r : rows) {
      if (r.attention_mixing.empty()) continue;
      md << "- " << r.name << " attention mixing per layer:";
      for (size_t i = 0; i < r.attention_mixing.size(); ++i) md << (i ? ", " : " ") << fmt("%.3f", r.attention_mixing[i]);
      md << "\n";
    }
    md << "\n" << mixing_against_steps(rows);
  }
  if (seed == "001") {
    const Seed001Analysis a = analyse_seed001(rows);
    md << "### Mine vs Official\n\n";
    if (a.mean_ppl_mine) md << "- Mean best PPL, Mine: " << fmt("%.2f", *a.mean_ppl_mine) << "\n";
    if (a.mean_ppl_official) md << "- Mean best PPL, Official: " << fmt("%.2f", *a.mean_ppl_official) << "\n";
    if (!a.best_model.empty())
      md << "- Best model: " << a.best_model << " (" << (a.best_implementation.empty() ? "—" : a.best_implementation)
         << ") - PPL: " << fmt("%.2f", a.best_ppl) << "\n";
    md << "\n### Conclusions (computed from the results)\n\n";
    if (a.mine_minus_official) {
      const double d = *a.mine_minus_official;
      md << "- Hybrid-Mine − Hybrid-Official: " << signed2(d) << " PPL ("
         << (d < 0 ? "Mine" : d > 0 ? "Official" : "neither") << " is better)\n";
    }
    if (a.delta_no_meta_mine) md << "- Without meta tokens (Mine): " << signed2(*a.delta_no_meta_mine) << " PPL\n";
    if (a.delta_no_kv_share) md << "- Without KV sharing (Mine): " << signed2(*a.delta_no_kv_share) << " PPL\n";
    if (a.delta_no_meta_official)
      md << "- Without meta tokens (Official): " << signed2(*a.delta_no_meta_official) << " PPL\n";
    md << "\n(Δ = ablated row's best PPL − full row's; positive = the component helps.)\n\n";
    md << kv_sharing_section(rows);
  }
  md << "## Differences from seed " << seed << "\n\n" << suite_differences(seed, settings) << "\nPer row:\n\n";
  for (const RowResult& r : rows) md << "- " << r.name << ": " << row_differences(seed, r, settings, scale) << "\n";
  md << "\n";
  return md.str();
}

namespace {

bool logs_mixing(const RowResult& r) {
  return std::any_of(r.curve.begin(), r.curve.end(), [](const CurvePoint& p) { return !p.attention_mixing.empty(); });
}

bool any_logs_mixing(const std::vector<RowResult>& rows) { return std::any_of(rows.begin(), rows.end(), logs_mixing); }

}  // namespace

std::vector<std::string> seed_chart_names(const std::string& seed, const std::vector<RowResult>& rows) {
  if (rows.empty()) return {};
  if (seed == "001") return {"seed001_ppl_bars", "seed001_val_ppl", "seed001_mine_vs_official", "seed001_params_vs_ppl"};
  if (seed == "003" && any_logs_mixing(rows)) return {"seed003_mixing"};
  return {};
}

std::vector<std::pair<std::string, std::string>> seed_charts(const std::string& seed, const std::vector<RowResult>& rows,
                                                             const std::vector<RowSpread>& spreads,
                                                             const std::string& dir) {
  if (rows.empty()) return {};
  if (seed == "001") return seed001_charts(rows, dir);
  if (seed == "003" && any_logs_mixing(rows)) return {seed003_mixing_chart(rows, spreads, dir)};
  return {};
}

// Seed 003's learned mixing against steps: per row that logs it, the share
// averaged over the layers, its mean over the repeats in their min-max band
// (one run: the line alone), beside an even split and the seed's ~62 %.
std::pair<std::string, std::string> seed003_mixing_chart(const std::vector<RowResult>& rows,
                                                         const std::vector<RowSpread>& spreads,
                                                         const std::string& dir) {
  std::ostringstream data, plot;
  int index = 0;
  for (const RowResult& r : rows) {
    if (!logs_mixing(r)) continue;
    const auto spread = std::find_if(spreads.begin(), spreads.end(), [&](const RowSpread& s) { return s.id == r.id; });
    // Without the row's spread, the row alone: its band is its own line.
    const std::vector<CurveBand> band =
        spread != spreads.end() && !spread->mixing_band.empty() ? spread->mixing_band : row_spread({r}).mixing_band;
    data << "# " << r.id << "\n";
    for (const CurveBand& b : band) data << b.step << " " << b.mean << " " << b.min << " " << b.max << "\n";
    data << "\n\n";
    const std::string lc = " lc " + std::to_string(index + 1);
    plot << (index ? ", " : "") << "'seed003_mixing.dat' index " << index << " using 1:3:4 with filledcurves" << lc
         << " notitle, '' index " << index << " using 1:2 with linespoints lw 2 pt 7 ps 0.5" << lc << " title "
         << gp_str(r.name);
    ++index;
  }
  write_text_atomic(dir + "/seed003_mixing.dat", data.str());
  return {"seed003_mixing",
          "set title 'Learned mixing: attention share against steps (mean over layers; band: min-max over repeats)'\n"
          "set xlabel 'step'\nset ylabel 'attention share'\nset key outside right\nset grid\nset xrange [0:*]\n"
          "set offsets 0, 0, graph 0.05, graph 0.05\nset style fill transparent solid 0.2 noborder\n"
          "plot " + plot.str() + ", 0.5 with lines dt 2 lc rgb 'gray' title 'even (50 %)', "
          "0.62 with lines dt 3 lc rgb 'black' title 'seed 003 v1 (about 62 %)'\n"};
}

std::vector<std::pair<std::string, std::string>> seed001_charts(const std::vector<RowResult>& rows,
                                                                const std::string& dir) {
  std::vector<std::pair<std::string, std::string>> charts;
  std::vector<const RowResult*> sorted;
  for (const RowResult& r : rows) sorted.push_back(&r);
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const RowResult* a, const RowResult* b) { return a->best_val_ppl < b->best_val_ppl; });
  auto official = [](const RowResult& r) { return r.implementation == "Official"; };

  // 1. Horizontal best-PPL bars, best on top, Official rows with a black border.
  std::ostringstream bars, ytics;
  for (size_t i = 0; i < sorted.size(); ++i) {
    bars << i << " " << sorted[i]->best_val_ppl << " " << (official(*sorted[i]) ? 1 : 0) << "\n";
    ytics << (i ? ", " : "") << gp_str(sorted[i]->name) << " " << i;
  }
  write_text_atomic(dir + "/seed001_ppl_bars.dat", bars.str());
  charts.emplace_back(
      "seed001_ppl_bars",
      "set title 'Model Performance (Black border = Official)'\nset xlabel 'Best Validation PPL (lower is better)'\n"
      "set ytics (" + ytics.str() + ")\nset yrange [" + std::to_string(sorted.size()) + "-0.5:-0.5]\nset xrange [0:*]\n"
      "set key off\nset grid xtics\nset offsets 0, graph 0.1, 0, 0\n"
      "plot 'seed001_ppl_bars.dat' using ($3==0?$2/2:NaN):1:($2/2):(0.35) with boxxyerrorbars fs solid 0.8 noborder "
      "lc rgb '#45B7D1', '' using ($3==1?$2/2:NaN):1:($2/2):(0.35) with boxxyerrorbars fs solid 0.8 border lc rgb "
      "'black' lw 2 fc rgb '#6B5B95', '' using 2:1:(sprintf(' %.1f', $2)) with labels left notitle\n");

  // 2. Validation PPL curves, Official dashed.
  std::ostringstream curves, plot;
  for (size_t i = 0; i < rows.size(); ++i) {
    curves << "# " << rows[i].id << "\n";
    for (const CurvePoint& p : rows[i].curve) curves << p.step << " " << p.val_ppl << "\n";
    if (rows[i].curve.empty()) curves << "0 NaN\n";
    curves << "\n\n";
    plot << (i ? ", " : "") << "'seed001_val_ppl.dat' index " << i << " using 1:2 with lines lw "
         << (official(rows[i]) ? "2.5 dt 2" : "2 dt 1") << " title " << gp_str(rows[i].name);
  }
  write_text_atomic(dir + "/seed001_val_ppl.dat", curves.str());
  charts.emplace_back("seed001_val_ppl",
                      "set title 'Training Curves (Dashed = Official)'\nset xlabel 'Steps'\nset ylabel 'Validation PPL'\n"
                      "set key top right font ',8'\nset grid\nset yrange [0:500<*]\nplot " + plot.str() + "\n");

  // 3. Mine vs Official grouped bars (Full Hybrid, No Meta).
  std::ostringstream pairs;
  int n = 0;
  for (const auto& [mine, off, label] : std::vector<std::tuple<std::string, std::string, std::string>>{
           {"hybrid-mine", "hybrid-official", "Full Hybrid"}, {"hybrid-nometa", "official-nometa", "No Meta"}}) {
    const RowResult *m = find_row(rows, mine), *o = find_row(rows, off);
    pairs << n++ << " " << gp_data_str(label) << " " << (m ? m->best_val_ppl : 0.0) << " " << (o ? o->best_val_ppl : 0.0)
          << "\n";
  }
  write_text_atomic(dir + "/seed001_mine_vs_official.dat", pairs.str());
  charts.emplace_back(
      "seed001_mine_vs_official",
      "set title 'Mine vs Official'\nset ylabel 'Best PPL'\nset style fill solid 0.8\nset boxwidth 0.35\n"
      "set xrange [-0.6:1.6]\nset yrange [0:*]\nset offsets 0, 0, graph 0.1, 0\nset grid ytics\nset key top right\n"
      "set xtics ('Full Hybrid' 0, 'No Meta' 1)\n"
      "plot 'seed001_mine_vs_official.dat' using ($1-0.175):3 with boxes lc rgb '#45B7D1' title 'Mine', "
      "'' using ($1+0.175):4 with boxes lc rgb '#6B5B95' title 'Official', "
      "'' using ($1-0.175):3:(sprintf('%.1f', $3)) with labels offset 0,0.8 notitle, "
      "'' using ($1+0.175):4:(sprintf('%.1f', $4)) with labels offset 0,0.8 notitle\n");

  // 4. Parameters vs PPL, square = Official, circle = Mine.
  std::ostringstream pts;
  for (const RowResult& r : rows)
    pts << r.params / 1e6 << " " << r.best_val_ppl << " " << (official(r) ? 1 : 0) << " " << gp_data_str(r.name) << "\n";
  write_text_atomic(dir + "/seed001_params_vs_ppl.dat", pts.str());
  charts.emplace_back(
      "seed001_params_vs_ppl",
      "set title 'Parameters vs Performance (Square = Official)'\nset xlabel 'Parameters (M)'\nset ylabel 'Best PPL'\n"
      "set grid\nset key top right\nset offsets graph 0.1, graph 0.1, graph 0.1, graph 0.1\n"
      "plot 'seed001_params_vs_ppl.dat' using ($3==0?$1:NaN):2 with points pt 7 ps 2 lc rgb '#45B7D1' title 'Mine', "
      "'' using ($3==1?$1:NaN):2 with points pt 5 ps 2 lc rgb '#6B5B95' title 'Official', "
      "'' using 1:2:4 with labels offset 0,1.2 font ',8' notitle\n");
  return charts;
}

}  // namespace hymba::ablate
