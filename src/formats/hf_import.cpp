#include "formats/hf_import.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <vector>

#include "core/atomic_file.h"
#include "core/checked.h"
#include "core/error.h"
#include "core/json_io.h"
#include "core/safetensors.h"
#include "model/layout.h"
#include "model/limits.h"
#include "formats/torch_checkpoint.h"

namespace hymba {

using nlohmann::json;
namespace fs = std::filesystem;

const char* to_string(CheckpointLayout layout) {
  switch (layout) {
    case CheckpointLayout::kNative: return "hymba.cpp";
    case CheckpointLayout::kHfHymba: return "HF HymbaForCausalLM";
    case CheckpointLayout::kHfMamba: return "HF MambaForCausalLM";
    case CheckpointLayout::kStateSpacesMamba: return "state-spaces Mamba";
    case CheckpointLayout::kHfGptNeo: return "HF GPTNeoForCausalLM";
    case CheckpointLayout::kHfQwen2: return "HF Qwen2ForCausalLM";
  }
  return "?";
}

namespace {

bool lists_architecture(const json& j, const char* name) {
  if (!j.contains("architectures") || !j["architectures"].is_array()) return false;
  for (const json& a : j["architectures"])
    if (a.is_string() && a.get<std::string>() == name) return true;
  return false;
}

// Reads the keys of a published config: a key that is absent or null takes the
// published class's default; every key must be read, checked or explicitly
// ignored, so a key we do not know is an error naming it.
class PublishedFields {
 public:
  PublishedFields(const json& j, json defaults, std::string source)
      : j_(j), defaults_(std::move(defaults)), source_(std::move(source)) {
    HYMBA_CHECK(j.is_object(), source_, ": expected a JSON object");
  }

  // The value of a key (its default when absent or null); null when neither.
  const json& value(const char* name) {
    seen_.insert(name);
    if (j_.contains(name) && !j_.at(name).is_null()) return j_.at(name);
    if (defaults_.contains(name)) return defaults_.at(name);
    return null_;
  }
  bool given(const char* name) const { return j_.contains(name) && !j_.at(name).is_null(); }
  // A key written as null: some published code reads null as "feature off", not "default".
  bool written_null(const char* name) const { return j_.contains(name) && j_.at(name).is_null(); }

  int64_t integer(const char* name) {
    const json& v = value(name);
    if (!v.is_number_integer() || (v.is_number_unsigned() && v.get<uint64_t>() > INT64_MAX))
      wrong(name, "an integer (at most 2^63 - 1)", v);
    return v.get<int64_t>();
  }
  double number(const char* name) {
    const json& v = value(name);
    if (!v.is_number()) wrong(name, "a number", v);
    return v.get<double>();
  }
  bool flag(const char* name) {
    const json& v = value(name);
    if (!v.is_boolean()) wrong(name, "true or false", v);
    return v.get<bool>();
  }
  std::string text(const char* name) {
    const json& v = value(name);
    if (!v.is_string()) wrong(name, "a string", v);
    return v.get<std::string>();
  }
  std::vector<int64_t> integers(const char* name) {
    const json& v = value(name);
    std::vector<int64_t> out;
    if (v.is_null()) return out;
    if (!v.is_array()) wrong(name, "a list of integers", v);
    for (const json& e : v) {
      if (!e.is_number_integer() || (e.is_number_unsigned() && e.get<uint64_t>() > INT64_MAX))
        wrong(name, "a list of integers", v);
      out.push_back(e.get<int64_t>());
    }
    return out;
  }
  // A Mamba dt rank: an integer >= 1, or "auto" (0 here: ceil(hidden / 16)).
  int64_t dt_rank(const char* name) {
    const json& v = value(name);
    if (v.is_string() && v.get<std::string>() == "auto") return 0;
    const bool in_range = v.is_number_unsigned() ? v.get<uint64_t>() >= 1 && v.get<uint64_t>() <= INT64_MAX
                          : v.is_number_integer() && v.get<int64_t>() >= 1;
    if (!in_range) wrong(name, "an integer >= 1 or \"auto\"", v);
    return v.get<int64_t>();
  }
  // A key whose value must be `expected` (the only one the engine computes).
  void require(const char* name, const json& expected, const char* why) {
    const json& v = value(name);
    if (v.is_null() || v == expected) return;
    fail(source_, ": field '", name, "' is ", json_excerpt(v), "; only ", expected.dump(), " is supported (", why, ")");
  }
  // Keys that do not change the numbers a forward pass computes.
  void ignore(std::initializer_list<const char*> names) {
    for (const char* n : names) seen_.insert(n);
  }
  [[noreturn]] void wrong(const char* name, const char* expected, const json& got) const {
    fail(source_, ": field '", name, "' must be ", expected, " (got ", json_excerpt(got), ")");
  }
  [[noreturn]] void bad(const char* name, const std::string& why) const {
    fail(source_, ": field '", name, "' ", why);
  }
  void reject_unknown() const {
    for (auto it = j_.begin(); it != j_.end(); ++it)
      HYMBA_CHECK(seen_.count(it.key()) != 0, source_, ": unknown field '", excerpt(it.key()), "' for a ", layout_name_,
                  " config");
  }
  void set_layout_name(const char* n) { layout_name_ = n; }
  const std::string& source() const { return source_; }

 private:
  const json& j_;
  json defaults_;
  std::string source_;
  std::set<std::string> seen_;
  json null_;
  const char* layout_name_ = "";
};

// Keys every transformers PretrainedConfig may write; none changes the forward.
void ignore_generic_hf_keys(PublishedFields& f) {
  f.ignore({"_name_or_path", "architectures", "auto_map", "model_type", "torch_dtype", "transformers_version",
            "use_cache", "bos_token_id", "eos_token_id", "pad_token_id", "return_dict", "output_hidden_states",
            "output_attentions", "torchscript", "_attn_implementation_autoset", "initializer_range"});
}

// Turns an error thrown by ModelConfig::resolve ("config: ...") into one that
// names the published file.
ModelConfig resolved(ModelConfig c, const std::string& source) {
  try {
    c.resolve();
  } catch (const Error& e) {
    std::string msg = e.what();
    if (msg.rfind("config: ", 0) == 0) msg = source + ": " + msg.substr(8);
    throw Error(msg + " (after mapping the published config)");
  }
  return c;
}

// HymbaConfig's defaults (configuration_hymba.py of the released model).
json hymba_defaults() {
  return {{"vocab_size", 50304}, {"tie_word_embeddings", true}, {"hidden_size", 768},
          {"intermediate_size", 768 * 3}, {"num_hidden_layers", 12}, {"num_attention_heads", 12},
          {"hidden_act", "silu"}, {"rms_norm_eps", 1e-6}, {"sliding_window", 1024},
          {"max_position_embeddings", 8192}, {"orig_max_position_embeddings", 2048}, {"num_experts_per_tok", 1},
          {"num_experts", 1}, {"mamba_d_state", 16}, {"mamba_d_conv", 4}, {"mamba_expand", 2},
          {"mamba_dt_rank", "auto"}, {"mamba_conv_bias", true}, {"mamba_proj_bias", false},
          {"mamba_inner_layernorms", true}, {"kv_reuse_every_i_layer", -1}, {"kv_weight_reuse", false},
          {"global_attn_idx", {0, 15, 31}}, {"num_mamba", 1}, {"attn_hidden_size", -1}, {"kq_head_dim", -1},
          {"v_head_dim", 128}, {"kq_norm", "none"}, {"rope", true}, {"rope_theta", 10000.0},
          {"num_memory_tokens", 128}, {"memory_tokens_interspersed_every", 0}, {"mlp_hidden_act", "silu"},
          {"kv_reuse_group", {{1, 2}, {3, 4}, {5, 6}, {7, 8}, {9, 10}, {11, 12}}}};
}

ModelConfig hymba_config(const json& j, const std::string& source) {
  PublishedFields f(j, hymba_defaults(), source);
  f.set_layout_name("HymbaForCausalLM");
  ignore_generic_hf_keys(f);
  // Training, kernel and serving choices of the released code.
  f.ignore({"attention_dropout", "attn_implementation", "attn_implementation_new", "calc_logits_for_entire_prompt",
            "output_router_logits", "router_aux_loss_coef", "seq_length", "use_mamba_kernels"});
  if (f.given("model_type")) f.require("model_type", "hymba", "a Hymba config");

  ModelConfig c;
  c.vocab_size = f.integer("vocab_size");
  c.hidden_size = f.integer("hidden_size");
  c.num_hidden_layers = f.integer("num_hidden_layers");
  c.num_attention_heads = f.integer("num_attention_heads");
  // HymbaConfig: num_key_value_heads None means one KV head per query head.
  c.num_key_value_heads = f.given("num_key_value_heads") ? f.integer("num_key_value_heads") : c.num_attention_heads;
  f.value("num_key_value_heads");
  c.intermediate_size = f.integer("intermediate_size");
  c.rms_norm_eps = f.number("rms_norm_eps");
  c.tie_word_embeddings = f.flag("tie_word_embeddings");
  c.dropout = 0.0;
  if (f.given("initializer_range")) c.initializer_range = f.number("initializer_range");
  HYMBA_CHECK(c.num_hidden_layers >= 1 && c.num_hidden_layers <= 4096, source,
              ": field 'num_hidden_layers' must be in 1..4096 (got ", c.num_hidden_layers, ")");
  HYMBA_CHECK(c.num_attention_heads >= 1, source, ": field 'num_attention_heads' must be >= 1");

  // Layer kinds: "h" is the hybrid head block; the released model has only those.
  const json& types = f.value("layer_type");
  if (types.is_null()) {
    c.layer_types.assign(static_cast<size_t>(c.num_hidden_layers), MixerKind::kHybrid);
  } else {
    if (!types.is_array()) f.wrong("layer_type", "a list of strings", types);
    HYMBA_CHECK(static_cast<int64_t>(types.size()) == c.num_hidden_layers, source, ": field 'layer_type' has ",
                types.size(), " entries but num_hidden_layers is ", c.num_hidden_layers);
    for (size_t i = 0; i < types.size(); ++i) {
      HYMBA_CHECK(types[i] == "h", source, ": field 'layer_type' entry ", i, " is ", json_excerpt(types[i]),
                  "; only \"h\" (hybrid attention + Mamba heads) is supported");
      c.layer_types.push_back(MixerKind::kHybrid);
    }
  }
  f.require("hidden_act", "silu", "the FFN is SwiGLU");
  f.require("mlp_hidden_act", "silu", "the FFN is SwiGLU");
  f.require("num_experts", 1, "the FFN is one expert");
  f.require("num_experts_per_tok", 1, "the FFN is one expert");
  f.require("num_mamba", 1, "one Mamba head group per layer");
  f.require("kq_norm", "none", "no Q/K normalisation");
  f.require("kv_weight_reuse", false, "K/V sharing reuses the cache, not the weights");
  f.require("mamba_proj_bias", false, "in_proj and out_proj have no bias");
  f.require("memory_tokens_interspersed_every", 0, "meta tokens are a prefix");
  if (f.integer("kv_reuse_every_i_layer") > 0)
    f.bad("kv_reuse_every_i_layer", "> 0 is not supported; list the groups in kv_reuse_group");

  const int64_t attn_hidden = f.integer("attn_hidden_size");
  HYMBA_CHECK(attn_hidden <= 0 || attn_hidden == c.hidden_size, source, ": field 'attn_hidden_size' is ",
              attn_hidden, "; only -1 or hidden_size (", c.hidden_size, ") is supported");
  HYMBA_CHECK(c.hidden_size % c.num_attention_heads == 0, source, ": field 'num_attention_heads' (",
              c.num_attention_heads, ") must divide hidden_size (", c.hidden_size, ")");
  const int64_t head_dim = c.hidden_size / c.num_attention_heads;
  const int64_t kq = f.integer("kq_head_dim"), v = f.integer("v_head_dim");
  c.qk_head_dim = kq > 0 ? kq : head_dim;
  c.v_head_dim = v > 0 ? v : head_dim;

  c.rope = f.flag("rope");
  c.rope_theta = f.number("rope_theta");
  // The released code treats a missing/null rope_type as plain RoPE.
  const std::string rope_type = f.given("rope_type") ? f.text("rope_type") : "default";
  f.ignore({"rope_type"});
  if (rope_type == "ntk") c.rope_ntk = true;
  else if (rope_type != "default")
    f.bad("rope_type", "\"" + excerpt(rope_type) + "\" is not supported (\"default\" or \"ntk\")");
  c.max_position_embeddings = f.integer("max_position_embeddings");
  c.orig_max_position_embeddings = f.integer("orig_max_position_embeddings");

  // The released forward lets a local query see W + 1 keys (q - k <= W).
  // The released code reads sliding_window None as "no window" (every layer global) and
  // global_attn_idx None as "no layer singled out as global"; only an absent key takes the default.
  const bool no_window = f.written_null("sliding_window");
  c.sliding_window = no_window ? 0 : f.integer("sliding_window");
  f.value("sliding_window");
  HYMBA_CHECK(c.sliding_window >= 0, source, ": field 'sliding_window' must be >= 0");
  c.sliding_window_inclusive = true;
  c.global_attn_idx = f.written_null("global_attn_idx") ? std::vector<int64_t>{} : f.integers("global_attn_idx");
  f.value("global_attn_idx");
  if (no_window) c.global_attn_idx.clear();  // without a window every layer is global already
  c.num_memory_tokens = f.integer("num_memory_tokens");
  // kv_reuse_group None: no layer reuses another's K/V (the released code), not the default groups.
  const bool no_groups = f.written_null("kv_reuse_group");
  const json& groups = f.value("kv_reuse_group");
  if (!no_groups && !groups.is_null()) {
    if (!groups.is_array()) f.wrong("kv_reuse_group", "a list of layer lists", groups);
    for (const json& g : groups) {
      if (!g.is_array()) f.wrong("kv_reuse_group", "a list of layer lists", groups);
      std::vector<int64_t> group;
      for (const json& e : g) {
        if (!e.is_number_integer()) f.wrong("kv_reuse_group", "a list of layer lists", groups);
        group.push_back(e.get<int64_t>());
      }
      c.kv_reuse_group.push_back(group);
    }
  }

  c.mamba_d_state = f.integer("mamba_d_state");
  c.mamba_d_conv = f.integer("mamba_d_conv");
  c.mamba_expand = f.integer("mamba_expand");
  c.mamba_dt_rank = f.dt_rank("mamba_dt_rank");
  c.mamba_conv_bias = f.flag("mamba_conv_bias");
  c.mamba_inner_layernorms = f.flag("mamba_inner_layernorms");

  // conv_dim: every layer's conv width, which must be the Mamba inner width.
  const json& conv = f.value("conv_dim");
  if (!conv.is_null()) {
    if (!conv.is_object() && !conv.is_array()) f.wrong("conv_dim", "an object of layer -> width", conv);
    const int64_t inner = checked_mul(c.mamba_expand, c.hidden_size, source + ": fields mamba_expand x hidden_size");
    for (auto it = conv.begin(); it != conv.end(); ++it) {
      if (!it->is_number_integer() || (it->is_number_unsigned() && it->get<uint64_t>() > INT64_MAX))
        f.wrong("conv_dim", "an object of layer -> width", conv);
      HYMBA_CHECK(it->get<int64_t>() == inner, source, ": field 'conv_dim' has width ", it->get<int64_t>(),
                  "; only mamba_expand x hidden_size (", inner, ") is supported");
    }
  }
  c.proj_style = ProjStyle::kFused;
  c.fusion = Fusion::kNormMean;
  f.reject_unknown();
  return resolved(c, source);
}

// mamba_ssm's ssm_cfg (Mamba1 block arguments) into the engine config.
void read_ssm_cfg(const json& ssm, ModelConfig& c, const std::string& source) {
  if (ssm.is_null()) return;
  HYMBA_CHECK(ssm.is_object(), source, ": field 'ssm_cfg' must be an object");
  const std::string where = source + ": field 'ssm_cfg'";
  PublishedFields f(ssm, json::object(), where);
  f.set_layout_name("ssm_cfg");
  if (f.given("layer")) f.require("layer", "Mamba1", "the engine runs Mamba1 blocks");
  if (f.given("d_state")) c.mamba_d_state = f.integer("d_state");
  if (f.given("d_conv")) c.mamba_d_conv = f.integer("d_conv");
  if (f.given("expand")) c.mamba_expand = f.integer("expand");
  if (f.given("dt_rank")) c.mamba_dt_rank = f.dt_rank("dt_rank");
  if (f.given("dt_min")) c.mamba_dt_min = f.number("dt_min");
  if (f.given("dt_max")) c.mamba_dt_max = f.number("dt_max");
  if (f.given("conv_bias")) c.mamba_conv_bias = f.flag("conv_bias");
  if (f.given("bias")) f.require("bias", false, "in_proj and out_proj have no bias");
  f.ignore({"dt_init", "dt_scale", "dt_init_floor", "use_fast_path", "layer_idx"});
  f.reject_unknown();
}

ModelConfig pure_mamba_base() {
  ModelConfig c;
  c.num_attention_heads = 0;
  c.num_key_value_heads = 0;
  c.intermediate_size = 0;
  c.num_memory_tokens = 0;
  c.mamba_inner_layernorms = false;
  c.sliding_window = 0;
  c.rms_norm_eps = 1e-5;  // mamba_ssm's RMSNorm default
  return c;
}

// transformers' MambaConfig defaults.
json hf_mamba_defaults() {
  return {{"vocab_size", 50280}, {"hidden_size", 768}, {"state_size", 16}, {"num_hidden_layers", 32},
          {"layer_norm_epsilon", 1e-5}, {"expand", 2}, {"conv_kernel", 4}, {"use_bias", false},
          {"use_conv_bias", true}, {"hidden_act", "silu"}, {"time_step_rank", "auto"}, {"time_step_min", 0.001},
          {"time_step_max", 0.1}, {"tie_word_embeddings", true}, {"rms_norm", true}};
}

ModelConfig hf_mamba_config(const json& j, const std::string& source) {
  PublishedFields f(j, hf_mamba_defaults(), source);
  f.set_layout_name("MambaForCausalLM");
  ignore_generic_hf_keys(f);
  // Initialisation, kernel and precision choices: no effect on a float32 forward.
  f.ignore({"residual_in_fp32", "rescale_prenorm_residual", "time_step_scale", "time_step_init_scheme",
            "time_step_floor", "use_mambapy", "use_associative_scan", "fused_add_norm", "pad_vocab_size_multiple"});
  if (f.given("model_type")) f.require("model_type", "mamba", "a Mamba config");
  ModelConfig c = pure_mamba_base();
  c.vocab_size = f.integer("vocab_size");
  c.hidden_size = f.integer("hidden_size");
  c.num_hidden_layers = f.integer("num_hidden_layers");
  HYMBA_CHECK(c.num_hidden_layers >= 1 && c.num_hidden_layers <= 4096, source,
              ": field 'num_hidden_layers' must be in 1..4096 (got ", c.num_hidden_layers, ")");
  c.layer_types.assign(static_cast<size_t>(c.num_hidden_layers), MixerKind::kMamba);
  c.mamba_d_state = f.integer("state_size");
  c.mamba_d_conv = f.integer("conv_kernel");
  c.mamba_expand = f.integer("expand");
  c.rms_norm_eps = f.number("layer_norm_epsilon");
  c.mamba_conv_bias = f.flag("use_conv_bias");
  c.tie_word_embeddings = f.flag("tie_word_embeddings");
  c.mamba_dt_min = f.number("time_step_min");
  c.mamba_dt_max = f.number("time_step_max");
  c.mamba_dt_rank = f.dt_rank("time_step_rank");
  f.require("use_bias", false, "in_proj and out_proj have no bias");
  f.require("hidden_act", "silu", "the Mamba block uses SiLU");
  f.require("rms_norm", true, "norms are RMSNorm");
  // Legacy keys of the converted repos, which must agree with the HF ones.
  auto agree = [&](const char* name, int64_t expected, const char* with) {
    if (!f.given(name)) {
      f.ignore({name});
      return;
    }
    const int64_t got = f.integer(name);
    HYMBA_CHECK(got == expected, source, ": field '", name, "' (", got, ") disagrees with ", with, " (", expected, ")");
  };
  agree("d_model", c.hidden_size, "hidden_size");
  agree("n_layer", c.num_hidden_layers, "num_hidden_layers");
  if (f.given("intermediate_size") || f.given("d_inner")) {
    const int64_t inner = checked_mul(c.mamba_expand, c.hidden_size, source + ": fields expand x hidden_size");
    agree("intermediate_size", inner, "expand x hidden_size");
    agree("d_inner", inner, "expand x hidden_size");
  } else {
    f.ignore({"intermediate_size", "d_inner"});
  }
  const json& ssm = f.value("ssm_cfg");
  HYMBA_CHECK(ssm.is_null() || (ssm.is_object() && ssm.empty()), source,
              ": field 'ssm_cfg' must be empty in a MambaForCausalLM config (its values are in the HF keys)");
  f.reject_unknown();
  return resolved(c, source);
}

ModelConfig state_spaces_config(const json& j, const std::string& source) {
  const json defaults = {{"d_intermediate", 0}, {"vocab_size", 50277}, {"rms_norm", true},
                         {"pad_vocab_size_multiple", 8}, {"tie_embeddings", true}};
  PublishedFields f(j, defaults, source);
  f.set_layout_name("state-spaces Mamba");
  f.ignore({"residual_in_fp32", "fused_add_norm", "attn_cfg"});
  ModelConfig c = pure_mamba_base();
  c.hidden_size = f.integer("d_model");
  c.num_hidden_layers = f.integer("n_layer");
  HYMBA_CHECK(c.num_hidden_layers >= 1 && c.num_hidden_layers <= 4096, source,
              ": field 'n_layer' must be in 1..4096 (got ", c.num_hidden_layers, ")");
  c.layer_types.assign(static_cast<size_t>(c.num_hidden_layers), MixerKind::kMamba);
  // The embedding has vocab_size rounded up to a multiple of pad_vocab_size_multiple rows.
  const int64_t vocab = f.integer("vocab_size"), multiple = f.integer("pad_vocab_size_multiple");
  HYMBA_CHECK(vocab >= 1, source, ": field 'vocab_size' must be >= 1");
  HYMBA_CHECK(multiple >= 1, source, ": field 'pad_vocab_size_multiple' must be >= 1");
  HYMBA_CHECK(vocab <= kMaxVocab && multiple <= kMaxVocab, source, ": fields 'vocab_size' (", vocab,
              ") and 'pad_vocab_size_multiple' (", multiple, ") must be <= ", kMaxVocab);
  c.vocab_size = (vocab + multiple - 1) / multiple * multiple;  // < 2^25: no overflow
  c.tie_word_embeddings = f.flag("tie_embeddings");
  f.require("rms_norm", true, "norms are RMSNorm");
  if (f.integer("d_intermediate") != 0) f.bad("d_intermediate", "must be 0 (Mamba blocks with an MLP are not supported)");
  if (!f.integers("attn_layer_idx").empty())
    f.bad("attn_layer_idx", "must be empty (attention layers inside a state-spaces Mamba are not supported)");
  read_ssm_cfg(f.value("ssm_cfg"), c, source);
  f.reject_unknown();
  return resolved(c, source);
}

// transformers' GPTNeoConfig defaults.
json gpt_neo_defaults() {
  return {{"vocab_size", 50257}, {"max_position_embeddings", 2048}, {"hidden_size", 2048}, {"num_layers", 24},
          {"attention_types", {{{"global", "local"}, 12}}}, {"num_heads", 16}, {"window_size", 256},
          {"activation_function", "gelu_new"}, {"layer_norm_epsilon", 1e-5}, {"tie_word_embeddings", true},
          {"vocab_parallel_embedding", false}};
}

// attention_types [[["global", "local"], n], ...] expanded as GPTNeoConfig
// does: each pattern repeated n times, in order.
std::vector<std::string> expand_attention_types(PublishedFields& f, int64_t layers) {
  const json& types = f.value("attention_types");
  const char* shape = "a list of [[\"global\" | \"local\", ...], count] pairs";
  if (!types.is_array()) f.wrong("attention_types", shape, types);
  std::vector<std::string> out;
  for (const json& item : types) {
    if (!item.is_array() || item.size() != 2 || !item[0].is_array() || item[0].empty() ||
        !item[1].is_number_integer())
      f.wrong("attention_types", shape, types);
    const int64_t repeat = item[1].get<int64_t>();
    if (repeat < 0 || checked_mul(repeat, static_cast<int64_t>(item[0].size()), f.source() + ": field 'attention_types'") >
                          layers - static_cast<int64_t>(out.size()))
      f.bad("attention_types", "lists more layers than num_layers (" + std::to_string(layers) + ")");
    for (int64_t r = 0; r < repeat; ++r)
      for (const json& kind : item[0]) {
        if (!kind.is_string() || (kind != "global" && kind != "local"))
          f.bad("attention_types", "has layer type " + json_excerpt(kind) + "; only \"global\" and \"local\" exist");
        out.push_back(kind.get<std::string>());
      }
  }
  return out;
}

ModelConfig gpt_neo_config(const json& j, const std::string& source) {
  PublishedFields f(j, gpt_neo_defaults(), source);
  f.set_layout_name("GPTNeoForCausalLM");
  ignore_generic_hf_keys(f);
  // Dropout (inference: off), the sequence-summary head of GPTNeoForSequenceClassification's
  // siblings, and training switches: none changes the causal-LM forward.
  f.ignore({"attention_dropout", "embed_dropout", "resid_dropout", "classifier_dropout", "gradient_checkpointing",
            "summary_type", "summary_use_proj", "summary_activation", "summary_proj_to_labels",
            "summary_first_dropout", "make_vocab_size_divisible_by", "type_vocab_size"});
  if (f.given("model_type")) f.require("model_type", "gpt_neo", "a GPT-Neo config");
  // The HF model ignores it (no vocab-parallel embedding in GPTNeoModel); true would mean another layout.
  f.require("vocab_parallel_embedding", false, "the embedding is one table of vocab_size rows");

  ModelConfig c;
  c.vocab_size = f.integer("vocab_size");
  c.hidden_size = f.integer("hidden_size");
  c.num_hidden_layers = f.integer("num_layers");
  HYMBA_CHECK(c.num_hidden_layers >= 1 && c.num_hidden_layers <= kMaxLayers, source,
              ": field 'num_layers' must be in 1..", kMaxLayers, " (got ", c.num_hidden_layers, ")");
  c.layer_types.assign(static_cast<size_t>(c.num_hidden_layers), MixerKind::kAttention);
  c.num_attention_heads = f.integer("num_heads");
  HYMBA_CHECK(c.num_attention_heads >= 1 && c.hidden_size >= 1 && c.hidden_size % c.num_attention_heads == 0, source,
              ": field 'num_heads' (", c.num_attention_heads, ") must divide hidden_size (", c.hidden_size, ")");
  c.num_key_value_heads = c.num_attention_heads;
  c.qk_head_dim = c.v_head_dim = c.hidden_size / c.num_attention_heads;
  // GPTNeoBlock: intermediate_size None means 4 x hidden_size.
  c.intermediate_size = f.given("intermediate_size")
                            ? f.integer("intermediate_size")
                            : checked_mul(4, c.hidden_size, source + ": field 'intermediate_size' (4 x hidden_size)");
  f.value("intermediate_size");
  HYMBA_CHECK(c.intermediate_size >= 1, source, ": field 'intermediate_size' must be >= 1 (got ", c.intermediate_size,
              ")");
  const std::string act = f.text("activation_function");
  if (act == "gelu_new" || act == "gelu_pytorch_tanh") c.mlp_activation = MlpActivation::kGelu;
  else if (act == "gelu") c.mlp_activation = MlpActivation::kGeluErf;
  else f.bad("activation_function", "\"" + excerpt(act) + "\" is not supported (gelu_new, gelu_pytorch_tanh or gelu)");
  c.mlp_bias = true;
  c.norm = NormKind::kLayerNorm;
  c.layer_norm_eps = f.number("layer_norm_epsilon");
  HYMBA_CHECK(c.layer_norm_eps > 0, source, ": field 'layer_norm_epsilon' must be > 0");
  c.position_embedding = PositionEmbedding::kLearned;
  c.rope = false;
  c.max_position_embeddings = f.integer("max_position_embeddings");
  c.tie_word_embeddings = f.flag("tie_word_embeddings");
  c.attention_out_bias = true;                    // out_proj has a bias; q/k/v have none
  c.attention_scale = AttentionScale::kNone;      // GPTNeoSelfAttention never divides by sqrt(head_dim)
  c.sliding_window_inclusive = false;             // local: 0 <= q - k < window_size
  c.dropout = 0.0;
  if (f.given("initializer_range")) c.initializer_range = f.number("initializer_range");

  const std::vector<std::string> kinds = expand_attention_types(f, c.num_hidden_layers);
  HYMBA_CHECK(static_cast<int64_t>(kinds.size()) == c.num_hidden_layers, source, ": field 'attention_types' gives ",
              kinds.size(), " layer types but num_layers is ", c.num_hidden_layers);
  if (f.given("attention_layers")) {
    const json& listed = f.value("attention_layers");
    HYMBA_CHECK(listed == json(kinds), source,
                ": field 'attention_layers' disagrees with attention_types (expanded: ", json_excerpt(json(kinds)), ")");
  } else {
    f.ignore({"attention_layers"});
  }
  bool any_local = false;
  for (size_t l = 0; l < kinds.size(); ++l) {
    if (kinds[l] == "global") c.global_attn_idx.push_back(static_cast<int64_t>(l));
    else any_local = true;
  }
  const int64_t window = f.integer("window_size");
  HYMBA_CHECK(!any_local || window >= 1, source, ": field 'window_size' must be >= 1 with local layers (got ", window,
              ")");
  c.sliding_window = any_local ? window : 0;
  if (!any_local) c.global_attn_idx.clear();  // all global: no window at all
  f.reject_unknown();
  return resolved(c, source);
}

// transformers' Qwen2Config defaults.
json qwen2_defaults() {
  return {{"vocab_size", 151936}, {"hidden_size", 4096}, {"intermediate_size", 22016}, {"num_hidden_layers", 32},
          {"num_attention_heads", 32}, {"num_key_value_heads", 32}, {"hidden_act", "silu"},
          {"max_position_embeddings", 32768}, {"rms_norm_eps", 1e-6}, {"tie_word_embeddings", false},
          {"rope_theta", 10000.0}, {"use_sliding_window", false}, {"attention_dropout", 0.0}};
}

// Qwen2ForCausalLM as modeling_qwen2.py computes it: RMSNorm, RoPE on all of
// each head (rotate-half), q/k/v projections with biases and o_proj without,
// grouped K/V heads, a SwiGLU MLP without biases.
ModelConfig qwen2_config(const json& j, const std::string& source) {
  PublishedFields f(j, qwen2_defaults(), source);
  f.set_layout_name("Qwen2ForCausalLM");
  ignore_generic_hf_keys(f);
  // Inference: dropout off; max_window_layers and sliding_window only act with use_sliding_window.
  f.ignore({"attention_dropout", "max_window_layers", "sliding_window", "use_mrope", "layer_types"});
  if (f.given("model_type")) f.require("model_type", "qwen2", "a Qwen2 config");
  f.require("hidden_act", "silu", "the MLP is SwiGLU");
  f.require("use_sliding_window", false, "every layer attends to the whole sequence");
  if (f.given("layer_types")) {
    for (const json& t : j["layer_types"])
      HYMBA_CHECK(t == "full_attention", source, ": field 'layer_types' has ", json_excerpt(t),
                  "; only \"full_attention\" layers are supported");
  }
  if (f.given("rope_scaling")) f.bad("rope_scaling", "is set; the engine supports unscaled RoPE only");
  f.value("rope_scaling");
  ModelConfig c;
  c.vocab_size = f.integer("vocab_size");
  c.hidden_size = f.integer("hidden_size");
  c.num_hidden_layers = f.integer("num_hidden_layers");
  HYMBA_CHECK(c.num_hidden_layers >= 1 && c.num_hidden_layers <= kMaxLayers, source,
              ": field 'num_hidden_layers' must be in 1..", kMaxLayers, " (got ", c.num_hidden_layers, ")");
  c.layer_types.assign(static_cast<size_t>(c.num_hidden_layers), MixerKind::kAttention);
  c.num_attention_heads = f.integer("num_attention_heads");
  HYMBA_CHECK(c.num_attention_heads >= 1 && c.hidden_size >= 1 && c.hidden_size % c.num_attention_heads == 0, source,
              ": field 'num_attention_heads' (", c.num_attention_heads, ") must divide hidden_size (", c.hidden_size,
              ")");
  c.num_key_value_heads = f.integer("num_key_value_heads");
  c.qk_head_dim = c.v_head_dim = c.hidden_size / c.num_attention_heads;
  c.intermediate_size = f.integer("intermediate_size");
  c.mlp_activation = MlpActivation::kSwiGlu;
  c.mlp_bias = false;
  c.norm = NormKind::kRmsNorm;
  c.rms_norm_eps = f.number("rms_norm_eps");
  c.rope = true;
  c.rope_theta = f.number("rope_theta");
  c.max_position_embeddings = f.integer("max_position_embeddings");
  c.tie_word_embeddings = f.flag("tie_word_embeddings");
  c.attention_qkv_bias = true;
  c.attention_out_bias = false;
  c.dropout = 0.0;
  if (f.given("initializer_range")) c.initializer_range = f.number("initializer_range");
  f.reject_unknown();
  return resolved(c, source);
}

}  // namespace

CheckpointLayout detect_layout(const json& j, const std::string& source) {
  if (!j.is_object()) return CheckpointLayout::kNative;  // from_json reports it
  if (lists_architecture(j, "HymbaForCausalLM")) return CheckpointLayout::kHfHymba;
  if (lists_architecture(j, "MambaForCausalLM")) return CheckpointLayout::kHfMamba;
  if (lists_architecture(j, "GPTNeoForCausalLM")) return CheckpointLayout::kHfGptNeo;
  if (lists_architecture(j, "Qwen2ForCausalLM")) return CheckpointLayout::kHfQwen2;
  if (j.contains("architectures")) {
    const json& a = j["architectures"];
    fail(source, ": field 'architectures' is ", json_excerpt(a),
         "; supported: HymbaForCausalLM, MambaForCausalLM, GPTNeoForCausalLM, Qwen2ForCausalLM (or a state-spaces Mamba "
         "config)");
  }
  const std::string type = j.contains("model_type") && j["model_type"].is_string() ? j["model_type"].get<std::string>()
                                                                                   : "";
  if (type == "mamba") return CheckpointLayout::kHfMamba;
  if (type == "gpt_neo") return CheckpointLayout::kHfGptNeo;
  if (type == "qwen2") return CheckpointLayout::kHfQwen2;
  // Our own configs also say "hymba"; the released one has keys ours never write.
  if (type == "hymba" && (j.contains("layer_type") || j.contains("kq_head_dim") || j.contains("conv_dim") ||
                          j.contains("attn_hidden_size")))
    return CheckpointLayout::kHfHymba;
  if (j.contains("d_model") && j.contains("n_layer") && !j.contains("hidden_size"))
    return CheckpointLayout::kStateSpacesMamba;
  return CheckpointLayout::kNative;
}

ModelConfig config_from_published(const json& j, CheckpointLayout layout, const std::string& source) {
  switch (layout) {
    case CheckpointLayout::kHfHymba: return hymba_config(j, source);
    case CheckpointLayout::kHfMamba: return hf_mamba_config(j, source);
    case CheckpointLayout::kStateSpacesMamba: return state_spaces_config(j, source);
    case CheckpointLayout::kHfGptNeo: return gpt_neo_config(j, source);
    case CheckpointLayout::kHfQwen2: return qwen2_config(j, source);
    case CheckpointLayout::kNative: break;
  }
  return ModelConfig::from_json(j, source);
}

namespace {

// One weights file: safetensors, or a torch.save zip (formats/torch_checkpoint.h).
class WeightFile {
 public:
  explicit WeightFile(const std::string& path) {
    if (path.size() >= 12 && path.compare(path.size() - 12, 12, ".safetensors") == 0)
      st_ = std::make_unique<SafetensorsFile>(SafetensorsFile::open(path));
    else
      pt_ = std::make_unique<TorchCheckpoint>(TorchCheckpoint::open(path));
  }
  const std::string& path() const { return st_ ? st_->path() : pt_->path(); }
  const std::vector<SafetensorsEntry>& entries() const { return st_ ? st_->entries() : pt_->entries(); }
  const SafetensorsEntry* find(const std::string& name) const { return st_ ? st_->find(name) : pt_->find(name); }
  void read_into(const std::string& name, float* dst, int64_t n) const {
    if (st_) st_->read_into(name, dst, n);
    else pt_->read_into(name, dst, n);
  }
  std::vector<float> read_f32(const std::string& name) const {
    return st_ ? st_->read_f32(name) : pt_->read_f32(name);
  }

 private:
  std::unique_ptr<SafetensorsFile> st_;
  std::unique_ptr<TorchCheckpoint> pt_;
};

// The tensors of a checkpoint directory, over one file or the shards of an
// index: safetensors first, else PyTorch's pytorch_model.bin.
class WeightFiles {
 public:
  explicit WeightFiles(const std::string& dir) {
    const fs::path d(dir);
    std::error_code ec;
    for (const char* stem : {"model.safetensors", "pytorch_model.bin"}) {
      const fs::path index = d / (std::string(stem) + ".index.json"), single = d / stem;
      if (fs::exists(index, ec)) {
        index_ = index.string();
        open_index();
        return;
      }
      if (fs::exists(single, ec)) {
        files_.push_back(std::make_unique<WeightFile>(single.string()));
        for (const SafetensorsEntry& e : files_[0]->entries()) listed_[e.name] = 0;
        return;
      }
    }
    fail(dir, ": no model.safetensors, pytorch_model.bin or their .index.json");
  }

  const SafetensorsEntry* find(const std::string& name, const WeightFile** file) const {
    auto it = listed_.find(name);
    if (it == listed_.end()) return nullptr;
    *file = files_[it->second].get();
    return files_[it->second]->find(name);
  }
  const std::map<std::string, size_t>& listed() const { return listed_; }
  const WeightFile& file_of(const std::string& name) const { return *files_[listed_.at(name)]; }
  // For messages about a tensor that is absent: the one file, or the index.
  std::string where() const { return index_.empty() ? files_[0]->path() : index_; }

 private:
  void open_index() {
    const json j = read_json_file(index_);
    HYMBA_CHECK(j.is_object() && j.contains("weight_map") && j["weight_map"].is_object(), index_,
                ": field 'weight_map' must be an object of tensor name -> file");
    const fs::path d = fs::path(index_).parent_path();
    std::map<std::string, size_t> opened;
    for (auto it = j["weight_map"].begin(); it != j["weight_map"].end(); ++it) {
      HYMBA_CHECK(it->is_string(), index_, ": field 'weight_map' entry '", excerpt(it.key()),
                  "' must be a file name");
      const std::string shard = it->get<std::string>();
      // NAME_MAX: a longer name cannot exist (and std::filesystem would throw).
      HYMBA_CHECK(!shard.empty() && shard.size() <= 255 && shard.find('/') == std::string::npos && shard != "." &&
                      shard != ".." && shard.find('\0') == std::string::npos,
                  index_, ": field 'weight_map' entry '", excerpt(it.key()), "' names '", excerpt(shard),
                  "', not a file beside the index");
      auto found = opened.find(shard);
      if (found == opened.end()) {
        const fs::path p = d / shard;
        std::error_code ec;
        HYMBA_CHECK(fs::is_regular_file(p, ec), excerpt(p.string(), 300), ": missing or not a file (listed in ",
                    index_, ")");
        files_.push_back(std::make_unique<WeightFile>(p.string()));
        found = opened.emplace(shard, files_.size() - 1).first;
      }
      listed_[it.key()] = found->second;
    }
    HYMBA_CHECK(!files_.empty(), index_, ": field 'weight_map' lists no tensors");
    for (const auto& [name, fi] : listed_)
      HYMBA_CHECK(files_[fi]->find(name) != nullptr, files_[fi]->path(), ": tensor '", excerpt(name),
                  "' is missing (listed in ", index_, ")");
    for (size_t fi = 0; fi < files_.size(); ++fi)
      for (const SafetensorsEntry& e : files_[fi]->entries()) {
        auto it = listed_.find(e.name);
        HYMBA_CHECK(it != listed_.end() && it->second == fi, files_[fi]->path(), ": tensor '", excerpt(e.name),
                    "' is not listed for this file in ", index_);
      }
  }

  std::string index_;
  std::vector<std::unique_ptr<WeightFile>> files_;
  std::map<std::string, size_t> listed_;  // tensor -> index into files_
};

// GPT-Neo's names for the engine's tensors (GPTNeoForCausalLM's state dict).
std::map<std::string, std::string> gpt_neo_names(const ModelConfig& cfg) {
  const ModelTensorNames n = tensor_names(cfg);
  std::map<std::string, std::string> m = {{n.embed, "transformer.wte.weight"},
                                          {n.position_embed, "transformer.wpe.weight"},
                                          {n.final_norm, "transformer.ln_f.weight"},
                                          {n.final_norm_bias, "transformer.ln_f.bias"}};
  if (!n.lm_head.empty()) m[n.lm_head] = "lm_head.weight";
  for (size_t l = 0; l < n.layers.size(); ++l) {
    const LayerTensorNames& t = n.layers[l];
    const std::string h = "transformer.h." + std::to_string(l) + ".", a = h + "attn.attention.";
    const std::vector<std::pair<std::string, std::string>> pairs = {
         {t.input_norm, h + "ln_1.weight"}, {t.input_norm_bias, h + "ln_1.bias"},
          {t.q_proj, a + "q_proj.weight"}, {t.k_proj, a + "k_proj.weight"}, {t.v_proj, a + "v_proj.weight"},
          {t.o_proj, a + "out_proj.weight"}, {t.o_proj_bias, a + "out_proj.bias"},
          {t.ffn_norm, h + "ln_2.weight"}, {t.ffn_norm_bias, h + "ln_2.bias"}, {t.ffn_up, h + "mlp.c_fc.weight"},
          {t.ffn_up_bias, h + "mlp.c_fc.bias"}, {t.ffn_down, h + "mlp.c_proj.weight"},
          {t.ffn_down_bias, h + "mlp.c_proj.bias"}};
    for (const auto& [engine, published] : pairs)
      if (!engine.empty()) m[engine] = published;
  }
  m.erase("");
  return m;
}

// Qwen2's (and Llama's) names for the engine's tensors.
std::map<std::string, std::string> qwen2_names(const ModelConfig& cfg) {
  const ModelTensorNames n = tensor_names(cfg);
  std::map<std::string, std::string> m = {{n.final_norm, "model.norm.weight"}};
  for (size_t l = 0; l < n.layers.size(); ++l) {
    const LayerTensorNames& t = n.layers[l];
    const std::string p = "model.layers." + std::to_string(l) + ".";
    m[t.ffn_norm] = p + "post_attention_layernorm.weight";
    m[t.ffn_gate] = p + "mlp.gate_proj.weight";
    m[t.ffn_up] = p + "mlp.up_proj.weight";
    m[t.ffn_down] = p + "mlp.down_proj.weight";
  }
  m.erase("");
  return m;
}

// GPT-Neo checkpoints saved before transformers 4.x stopped saving them keep
// each layer's causal-mask buffers (attn.attention.bias, .masked_bias):
// constants the forward recomputes, which transformers skips on load too.
bool is_gpt_neo_mask_buffer(const std::string& name) {
  const std::string prefix = "transformer.h.";
  if (name.compare(0, prefix.size(), prefix) != 0) return false;
  size_t i = prefix.size();
  const size_t digits = i;
  while (i < name.size() && name[i] >= '0' && name[i] <= '9') ++i;
  if (i == digits) return false;
  const std::string rest = name.substr(i);
  return rest == ".attn.attention.bias" || rest == ".attn.attention.masked_bias";
}

// Name in the published file of each engine tensor.
class PublishedNames {
 public:
  PublishedNames(const ModelConfig& cfg, CheckpointLayout layout) : layout_(layout) {
    if (layout == CheckpointLayout::kHfGptNeo) map_ = gpt_neo_names(cfg);
    if (layout == CheckpointLayout::kHfQwen2) map_ = qwen2_names(cfg);
  }
  std::string operator()(const std::string& engine_name) const {
    if (layout_ == CheckpointLayout::kStateSpacesMamba && engine_name == "backbone.embeddings.weight")
      return "backbone.embedding.weight";
    auto it = map_.find(engine_name);
    return it == map_.end() ? engine_name : it->second;
  }

 private:
  CheckpointLayout layout_;
  std::map<std::string, std::string> map_;
};

}  // namespace

void load_checkpoint_weights(const std::string& dir, CheckpointLayout layout, const ModelConfig& cfg,
                             ParamTable& table) {
  HYMBA_CHECK(table.values_block() != nullptr || table.rows().empty(), dir,
              ": cannot load parameters before they are allocated");
  const WeightFiles files(dir);
  const std::string where = files.where();
  const ModelTensorNames names = tensor_names(cfg);
  const PublishedNames published_name(cfg, layout);

  std::map<std::string, std::string> source_of;  // engine name -> published name
  std::set<std::string> used;
  for (const ParamInfo& p : table.rows()) {
    const std::string name = published_name(p.name);
    const WeightFile* file = nullptr;
    const SafetensorsEntry* e = files.find(name, &file);
    HYMBA_CHECK(e != nullptr, where, ": tensor '", name, "' is missing",
                p.name == names.lm_head ? " (the config says tie_word_embeddings false)" : "");
    HYMBA_CHECK(e->is_float(), file->path(), ": tensor '", name, "' has dtype ", e->dtype,
                ", expected F32, BF16 or F16");
    bool same = static_cast<int>(e->shape.size()) == p.shape.rank;
    for (int i = 0; same && i < p.shape.rank; ++i) same = e->shape[static_cast<size_t>(i)] == p.shape[i];
    HYMBA_CHECK(same, file->path(), ": tensor '", name, "' has shape ", excerpt(e->shape_str()), ", expected ",
                p.shape.str(), " from the config");
    source_of[p.name] = name;
    used.insert(name);
  }
  // A tied lm_head may still be stored (torch.save keeps both names): it must
  // then be the embedding; anything else the model lacks is an error.
  std::string tied_head;
  for (const auto& [name, fi] : files.listed()) {
    if (used.count(name)) continue;
    const WeightFile& file = files.file_of(name);
    if (name == "lm_head.weight" && cfg.tie_word_embeddings) {
      const SafetensorsEntry* e = file.find(name);
      const WeightFile* efile = nullptr;
      const SafetensorsEntry* emb = files.find(published_name(names.embed), &efile);
      HYMBA_CHECK(e->is_float() && emb != nullptr && e->shape == emb->shape, file.path(),
                  ": tensor 'lm_head.weight' has shape ", excerpt(e->shape_str()),
                  " but the embeddings are tied (tie_word_embeddings true), so it must equal the embedding");
      tied_head = name;
      continue;
    }
    if (layout == CheckpointLayout::kHfGptNeo && is_gpt_neo_mask_buffer(name)) continue;
    fail(file.path(), ": unexpected tensor '", excerpt(name), "' (not a parameter of this ", to_string(layout),
         " model)");
  }

  table.for_each([&](ParamSlot& slot) {
    const std::string& name = source_of.at(slot.info.name);
    const WeightFile& file = files.file_of(name);
    file.read_into(name, slot.value, slot.numel());
    check_finite(file.path(), name, slot.value, slot.numel());
  });
  if (!tied_head.empty()) {
    const std::vector<float> head = files.file_of(tied_head).read_f32(tied_head);
    const Tensor emb = table.value(names.embed);
    for (size_t i = 0; i < head.size(); ++i)
      HYMBA_CHECK(head[i] == emb.data[i] || (std::isnan(head[i]) && std::isnan(emb.data[i])),
                  files.file_of(tied_head).path(), ": tensor 'lm_head.weight' differs from the embedding at element ",
                  i, " but the config ties them (tie_word_embeddings true)");
  }
}

}  // namespace hymba
