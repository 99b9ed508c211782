#include "serve/logprobs.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

namespace hymba::serve {

using nlohmann::json;

namespace {

// The k likeliest ids a tokenizer can decode, with their log-probabilities
// under the softmax of the whole row (as token_logprobs normalizes).
json top_logprobs(const float* row, int64_t model_vocab, int64_t decodable, int64_t k, const Tokenizer& tokenizer) {
  const double top = *std::max_element(row, row + model_vocab);
  double sum = 0.0;
  for (int64_t v = 0; v < model_vocab; ++v) sum += std::exp(static_cast<double>(row[v]) - top);
  const double log_sum = std::log(sum);
  std::vector<int32_t> order(static_cast<size_t>(decodable));
  std::iota(order.begin(), order.end(), 0);
  const auto kk = static_cast<size_t>(std::min<int64_t>(k, decodable));
  std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(kk), order.end(),
                    [&](int32_t a, int32_t b) { return row[a] > row[b] || (row[a] == row[b] && a < b); });
  json out = json::object();
  for (size_t j = 0; j < kk; ++j) {
    // Two ids may decode to one text (OpenAI keys by text): the likelier stays.
    out.emplace(tokenizer.decode({order[j]}), static_cast<double>(row[order[j]]) - top - log_sum);
  }
  return out;
}

}  // namespace

json logprobs_object(LanguageModel& lm, const std::vector<int32_t>& ids, size_t first, int64_t k) {
  const Tokenizer& tokenizer = lm.tokenizer();
  std::vector<double> chosen;
  if (ids.size() >= 2) chosen = lm.token_logprobs(ids);  // leaves row t's logits (predicting ids[t + 1]) in the model
  const int64_t model_vocab = lm.config().vocab_size;
  const int64_t decodable = std::min<int64_t>(model_vocab, tokenizer.vocab_size());
  json tokens = json::array(), token_logprobs = json::array(), tops = json::array(), offsets = json::array();
  size_t offset = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    const std::string text = tokenizer.decode({ids[i]});
    if (i >= first) {
      tokens.push_back(text);
      offsets.push_back(offset);
      if (i == 0) {
        token_logprobs.push_back(nullptr);
        tops.push_back(nullptr);
      } else {
        token_logprobs.push_back(chosen[i - 1]);
        const float* row = lm.model().logits() + static_cast<int64_t>(i - 1) * model_vocab;
        tops.push_back(k > 0 ? top_logprobs(row, model_vocab, decodable, k, tokenizer) : json(nullptr));
      }
    }
    offset += text.size();
  }
  return {{"tokens", tokens}, {"token_logprobs", token_logprobs}, {"top_logprobs", tops}, {"text_offset", offsets}};
}

namespace {

json utf8_bytes(const std::string& text) {
  json out = json::array();
  for (const char c : text) out.push_back(static_cast<int>(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

json chat_logprobs_object(LanguageModel& lm, const std::vector<int32_t>& prompt, const std::vector<int32_t>& tokens,
                          int64_t k) {
  std::vector<int32_t> ids = prompt;
  ids.insert(ids.end(), tokens.begin(), tokens.end());
  const json completion = logprobs_object(lm, ids, prompt.size(), k);
  json content = json::array();
  for (size_t i = 0; i < tokens.size(); ++i) {
    const std::string token = completion["tokens"][i];
    json alternatives = json::array();
    if (const json& top = completion["top_logprobs"][i]; top.is_object())
      for (auto it = top.begin(); it != top.end(); ++it)
        alternatives.push_back({{"token", it.key()}, {"logprob", it.value()}, {"bytes", utf8_bytes(it.key())}});
    std::sort(alternatives.begin(), alternatives.end(),
              [](const json& a, const json& b) { return a["logprob"].get<double>() > b["logprob"].get<double>(); });
    content.push_back({{"token", token},
                       {"logprob", completion["token_logprobs"][i]},
                       {"bytes", utf8_bytes(token)},
                       {"top_logprobs", alternatives}});
  }
  return {{"content", content}};
}

}  // namespace hymba::serve
