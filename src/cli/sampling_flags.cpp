// The sampling flags beyond temperature, top-k and top-p that `generate` and
// `chat` share: min-p, the penalties and logit biases (infer/sampler.h).
#include <string>

#include "cli/commands.h"
#include "core/error.h"
#include "infer/sampler.h"

namespace hymba::cli {

namespace {

// "ID=BIAS" -> (ID, BIAS), or "" and why not.
std::string parse_bias(const std::string& text, std::pair<int32_t, float>* out) {
  const size_t eq = text.find('=');
  const std::string id = text.substr(0, eq), bias = eq == std::string::npos ? "" : text.substr(eq + 1);
  const bool digits = !id.empty() && id.size() <= 9 && id.find_first_not_of("0123456789") == std::string::npos;
  if (!digits || bias.empty()) return "'" + text + "' is not TOKEN_ID=BIAS (e.g. 15043=-100)";
  size_t used = 0;
  double b = 0;
  try {
    b = std::stod(bias, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != bias.size() || !(b >= -100.0 && b <= 100.0)) return "the bias in '" + text + "' must be in [-100, 100]";
  if (out != nullptr) *out = {std::stoi(id), static_cast<float>(b)};
  return {};
}

}  // namespace

void add_sampling_extras(CLI::App* cmd, infer::SamplingOptions& s) {
  cmd->add_option("--min-p", s.min_p, "Drop tokens less likely than this share of the most likely one (0 = off)")
      ->check(range(0.0, 1.0))->capture_default_str();
  cmd->add_option("--presence-penalty", s.presence_penalty,
                  "Subtract from the logit of every token already generated (OpenAI's presence_penalty)")
      ->check(range(-2.0, 2.0))->capture_default_str();
  cmd->add_option("--frequency-penalty", s.frequency_penalty,
                  "Subtract this times its count from the logit of every token already generated")
      ->check(range(-2.0, 2.0))->capture_default_str();
  cmd->add_option("--repetition-penalty", s.repetition_penalty,
                  "Divide positive (multiply negative) logits of prompt and generated tokens by this (1 = off)")
      ->check(range(1e-3, 100.0))->capture_default_str();
  cmd->add_option_function<std::vector<std::string>>(
         "--logit-bias",
         [&s](const std::vector<std::string>& values) {
           for (const std::string& v : values) {
             std::pair<int32_t, float> bias;
             parse_bias(v, &bias);
             s.logit_bias.push_back(bias);
           }
         },
         "TOKEN_ID=BIAS added to that token's logit (repeatable; -100 bans it)")
      ->check(CLI::Validator([](std::string& v) { return parse_bias(v, nullptr); }, "ID=BIAS", "logit bias"))
      ->allow_extra_args(false);
}

void check_logit_bias(const infer::SamplingOptions& s, int64_t vocab_size) {
  for (const auto& [id, bias] : s.logit_bias)
    HYMBA_USAGE_CHECK(id < vocab_size, "--logit-bias: token id ", id, " is outside the vocabulary (0..", vocab_size - 1, ")");
}

}  // namespace hymba::cli
