#include "ablate/seed_questions.h"

#include <algorithm>
#include <string>

namespace hymba::ablate {

namespace {

// "Little" in seed 001's "KV sharing costs little" and seed 003's "Mamba ≈
// Transformer": 0.02 nats of validation loss, 2 % of perplexity.
constexpr double kLittleLoss = 0.02;

Question better(std::string id, std::string text, std::string says, std::string a, std::string b,
                std::string metric = "best_val_loss") {
  return {std::move(id), std::move(text), std::move(says),   Claim::kBetter,
          std::move(a),  std::move(b),    std::move(metric), 0.0};
}

std::vector<Question> seed000() {
  return {
      better("hybrid-5050-vs-global", "Does Hybrid (50/50) beat Transformer (Global)?", "yes: PPL 5.20 vs 76.16",
             "seed000-hybrid-5050", "seed000-transformer-global"),
      better("hybrid-5050-vs-mamba", "Does Hybrid (50/50) beat Mamba-only?", "yes: PPL 5.20 vs 68.68",
             "seed000-hybrid-5050", "seed000-mamba"),
      better("hybrid-paper-vs-global", "Does Hybrid (Paper Setting) beat Transformer (Global)?",
             "yes: PPL 6.07 vs 76.16", "seed000-hybrid-paper", "seed000-transformer-global"),
      better("hybrid-paper-vs-mamba", "Does Hybrid (Paper Setting) beat Mamba-only?", "yes: PPL 6.07 vs 68.68",
             "seed000-hybrid-paper", "seed000-mamba"),
      better("local-vs-global", "Does local attention beat global attention (Transformer)?", "yes: PPL 12.72 vs 76.16",
             "seed000-transformer-local", "seed000-transformer-global"),
      better("mamba-vs-global", "Does Mamba-only beat Transformer (Global)?", "yes: PPL 68.68 vs 76.16",
             "seed000-mamba", "seed000-transformer-global"),
      better("5050-vs-paper", "Does Hybrid (50/50) beat Hybrid (Paper Setting)?", "yes: PPL 5.20 vs 6.07",
             "seed000-hybrid-5050", "seed000-hybrid-paper"),
  };
}

std::vector<Question> seed001() {
  Question kv{"kv-sharing-cost",
              "Does KV sharing cost little (Mine)?",
              "its summary prints the PPL change without KV sharing",
              Claim::kNoWorse,
              "hybrid-mine",
              "hybrid-nokvshare",
              "best_val_loss",
              kLittleLoss};
  return {
      better("meta-mine", "Do meta tokens help (Mine)?", "its summary prints the PPL change without meta tokens",
             "hybrid-mine", "hybrid-nometa"),
      better("meta-official", "Do meta tokens help (Official)?", "the same for the official-style layer",
             "hybrid-official", "official-nometa"),
      kv,
      better("official-vs-mine", "Does Hybrid-Official beat Hybrid-Mine?",
             "its summary names whichever is better (no fixed answer)", "hybrid-official", "hybrid-mine"),
      better("hybrid-vs-transformer", "Does the hybrid (Official) beat the Transformer (Global)?",
             "the study's premise (seed 000's table: yes)", "hybrid-official", "transformer-global"),
      better("hybrid-vs-mamba", "Does the hybrid (Official) beat Mamba-only?",
             "the study's premise (seed 000's table: yes)", "hybrid-official", "mamba-only"),
      better("local-vs-global", "Does local attention beat global (Transformer)?", "seed 000's table: yes",
             "transformer-local", "transformer-global"),
  };
}

// The paper's Table 1 (commonsense average), as seed 002 reproduces it.
std::vector<Question> seed002() {
  Question kv{"r9-vs-r8",
              "Does cross-layer KV sharing cost little (9 vs 8)?",
              "paper: 45.16 vs 44.56 (no cost)",
              Claim::kNoWorse,
              "roadmap-09",
              "roadmap-08",
              "best_val_loss",
              kLittleLoss};
  return {
      better("r2-vs-r1", "Do attention heads help Mamba (2 vs 1)?", "paper: 44.20 vs 42.98", "roadmap-02",
             "roadmap-01"),
      better("r3-vs-r2", "Do more attention heads help (3 vs 2)?", "paper: 44.95 vs 44.20", "roadmap-03", "roadmap-02"),
      better("r4-vs-r3", "Do more attention heads help (4 vs 3)?", "paper: 45.08 vs 44.95", "roadmap-04", "roadmap-03"),
      better("r4-vs-r6", "Does the hybrid beat attention alone (4 vs 6)?", "paper: 45.08 vs 44.08", "roadmap-04",
             "roadmap-06"),
      better("r8-vs-r7", "Do three full-attention layers help an all-SWA model (8 vs 7)?", "paper: 44.56 vs 44.42",
             "roadmap-08", "roadmap-07"),
      kv,
      better("r9-vs-r11", "Is mean fusion better than concat (9 vs 11)?", "paper: 45.16 vs 44.56", "roadmap-09",
             "roadmap-11"),
      better("r12-vs-r1", "Do meta tokens help Mamba (12 vs 1)?", "paper: 44.01 vs 42.98", "roadmap-12", "roadmap-01"),
      better("r13-vs-r9", "Do meta tokens help the hybrid (13 vs 9)?", "paper: 45.53 vs 45.16", "roadmap-13",
             "roadmap-09"),
      better("r13-vs-r6", "Does the final design beat Llama-style attention (13 vs 6)?", "paper: 45.53 vs 44.08",
             "roadmap-13", "roadmap-06"),
  };
}

std::vector<Question> seed003(const Suite& s) {
  const bool rope =
      std::any_of(s.rows.begin(), s.rows.end(), [](const SuiteRow& r) { return r.id == "compare-transformer"; });
  const std::string transformer = rope ? "compare-transformer" : "gpt-baseline";
  Question similar{"mamba-vs-transformer",
                   "Does Mamba match the Transformer?",
                   "yes: val loss 1.25 vs 1.26",
                   Claim::kSimilar,
                   "compare-mamba",
                   transformer,
                   "best_val_loss",
                   kLittleLoss};
  Question v1_mix{"v1-mixing",
                  "Does Hymba v1's learned mixing favour attention (share above 50 %)?",
                  "yes: about 62 % attention",
                  Claim::kAbove,
                  "hymba-v1",
                  "",
                  "attention_mixing",
                  0.5};
  Question v2_mix = v1_mix;
  v2_mix.id = "v2-mixing";
  v2_mix.text = "Does Hymba v2's learned mixing favour attention (share above 50 %)?";
  v2_mix.seed_says = "not measured (round 2 in progress); v1 had about 62 %";
  v2_mix.row_a = "hymba-v2";
  return {
      similar,
      better("mamba-vs-v1", "Does Mamba beat Hymba v1 (6 layers)?", "yes: val loss 1.25 vs 1.90", "compare-mamba",
             "hymba-v1"),
      better("transformer-vs-v1", "Does the Transformer beat Hymba v1 (6 layers)?", "yes: val loss 1.26 vs 1.90",
             transformer, "hymba-v1"),
      better("v2-vs-v1", "Does the matched Hymba v2 beat v1?", "expected (round 2: v1 was unfair)", "hymba-v2",
             "hymba-v1"),
      better("v2-vs-transformer", "Does the matched Hymba v2 beat the Transformer?", "open (round 2 in progress)",
             "hymba-v2", transformer),
      v1_mix,
      v2_mix,
  };
}

// Round 3 at the shortest and longest T the suite trains.
std::vector<Question> seed003_long(const Suite& s) {
  if (s.seq_lens.empty()) return {};
  const std::string lo = "-t" + std::to_string(s.seq_lens.front()), hi = "-t" + std::to_string(s.seq_lens.back());
  const std::string T = std::to_string(s.seq_lens.back());
  return {
      better("mamba-faster-long", "Does Mamba train faster than the Transformer at T " + T + "?",
             "expected: Transformer slows dramatically", "mamba" + hi, "transformer" + hi, "train_tok_s"),
      better("mamba-less-memory-long", "Does Mamba need less activation memory than the Transformer at T " + T + "?",
             "expected: ~4x growth for Mamba vs ~16x", "mamba" + hi, "transformer" + hi, "activation_peak_mb"),
      better("hymba-shifts-to-ssm",
             "Does Hymba's learned mixing shift toward the SSM at T " + T + " (vs T " +
                 std::to_string(s.seq_lens.front()) + ")?",
             "hoped: \"if Hymba is smart\"", "hymba-v2" + hi, "hymba-v2" + lo, "attention_mixing"),
      better("hymba-vs-transformer-long", "Does Hymba v2 beat the Transformer at T " + T + "?", "not measured",
             "hymba-v2" + hi, "transformer" + hi),
  };
}

// The README's main job: the study's premise at tiny scale.
std::vector<Question> demo() {
  return {
      better("hymba-vs-transformer", "Does Hymba beat the Transformer?", "seed 000's table: yes", "compare-hymba",
             "compare-transformer"),
      better("hymba-vs-mamba", "Does Hymba beat Mamba?", "seed 000's table: yes", "compare-hymba", "compare-mamba"),
      better("meta-tokens", "Do meta tokens help Hymba?", "seed 001 and the paper: yes", "compare-hymba",
             "compare-hymba-nometa"),
  };
}

}  // namespace

std::vector<Question> seed_questions(const Suite& suite) {
  std::vector<Question> qs;
  if (suite.seed == "000")
    qs = seed000();
  else if (suite.seed == "001")
    qs = seed001();
  else if (suite.seed == "002")
    qs = seed002();
  else if (suite.seed == "003")
    qs = seed003(suite);
  else if (suite.seed == "003-long")
    qs = seed003_long(suite);
  else if (suite.name == "demo")
    qs = demo();
  auto has = [&](const std::string& id) {
    return id.empty() ||
           std::any_of(suite.rows.begin(), suite.rows.end(), [&](const SuiteRow& r) { return r.id == id; });
  };
  std::erase_if(qs, [&](const Question& q) { return !has(q.row_a) || !has(q.row_b); });
  return qs;
}

}  // namespace hymba::ablate
