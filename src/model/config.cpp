#include "model/config.h"
#include "model/limits.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "core/atomic_file.h"
#include "core/checked.h"
#include "core/error.h"
#include "core/json_io.h"

namespace hymba {

using nlohmann::json;

namespace {

// Each enum's names, both ways: to_string() and the config's fields read
// through the same table.
template <typename E>
struct Named {
  E value;
  const char* name;
};
constexpr Named<MixerKind> kMixerNames[] = {
    {MixerKind::kAttention, "attention"}, {MixerKind::kMamba, "mamba"}, {MixerKind::kHybrid, "hybrid"}};
constexpr Named<ProjStyle> kProjStyleNames[] = {{ProjStyle::kFused, "fused"}, {ProjStyle::kSeparate, "separate"}};
constexpr Named<Fusion> kFusionNames[] = {{Fusion::kNormMean, "norm_mean"},
                                          {Fusion::kLearnedBeta, "learned_beta"},
                                          {Fusion::kMean, "mean"},
                                          {Fusion::kConcat, "concat"}};
constexpr Named<BlockLink> kBlockLinkNames[] = {
    {BlockLink::kNull, "null"}, {BlockLink::kResidual, "residual"}, {BlockLink::kGated, "gated"}};
constexpr Named<InitScheme> kInitSchemeTable[] = {
    {InitScheme::kNormal, "normal"}, {InitScheme::kTorch, "torch"}, {InitScheme::kMambaSsm, "mamba_ssm"}};
constexpr Named<NormKind> kNormNames[] = {{NormKind::kRmsNorm, "rmsnorm"}, {NormKind::kLayerNorm, "layernorm"}};
constexpr Named<MlpActivation> kActivationNames[] = {
    {MlpActivation::kSwiGlu, "swiglu"}, {MlpActivation::kGelu, "gelu"}, {MlpActivation::kGeluErf, "gelu_erf"}};
constexpr Named<PositionEmbedding> kPositionNames[] = {{PositionEmbedding::kRope, "rope"},
                                                       {PositionEmbedding::kLearned, "learned"},
                                                       {PositionEmbedding::kNone, "none"}};
constexpr Named<AttentionScale> kScaleNames[] = {{AttentionScale::kInvSqrtD, "inv_sqrt_d"},
                                                 {AttentionScale::kNone, "none"}};

template <typename E, size_t N>
const char* name_in(const Named<E> (&table)[N], E v) {
  for (const Named<E>& e : table)
    if (e.value == v) return e.name;
  return "?";
}

template <typename E, size_t N>
bool value_named(const Named<E> (&table)[N], const std::string& name, E& out) {
  for (const Named<E>& e : table)
    if (name == e.name) {
      out = e.value;
      return true;
    }
  return false;
}

// "a, b, c": the names a field takes, for its error.
template <typename E, size_t N>
std::string names_in(const Named<E> (&table)[N]) {
  std::string s;
  for (const Named<E>& e : table) s += (s.empty() ? "" : ", ") + std::string(e.name);
  return s;
}

}  // namespace

const char* to_string(MixerKind k) { return name_in(kMixerNames, k); }
const char* to_string(ProjStyle s) { return name_in(kProjStyleNames, s); }
const char* to_string(Fusion f) { return name_in(kFusionNames, f); }
const char* to_string(BlockLink l) { return name_in(kBlockLinkNames, l); }
const char* to_string(InitScheme s) { return name_in(kInitSchemeTable, s); }
const char* to_string(NormKind k) { return name_in(kNormNames, k); }
const char* to_string(MlpActivation a) { return name_in(kActivationNames, a); }
const char* to_string(PositionEmbedding p) { return name_in(kPositionNames, p); }
const char* to_string(AttentionScale s) { return name_in(kScaleNames, s); }

bool parse_init_scheme(const std::string& name, InitScheme& out) { return value_named(kInitSchemeTable, name, out); }

namespace {

// Reads JSON fields by name, with one-line errors naming the field, and
// remembers which fields were consumed so leftovers can be reported.
class FieldReader {
 public:
  FieldReader(const json& j, const std::string& source) : j_(j), source_(source) {
    HYMBA_CHECK(j.is_object(), source, ": expected a JSON object");
  }
  bool has(const char* name) const { return j_.contains(name) && !j_.at(name).is_null(); }
  const json& at(const char* name) {
    seen_.insert(name);
    return j_.at(name);
  }
  [[noreturn]] void type_error(const char* name, const char* expected) const {
    fail(source_, ": field '", name, "' must be ", expected, " (got ", json_excerpt(j_.at(name)), ")");
  }
  void get(const char* name, int64_t& out) {
    if (!has(name)) return;
    const json& v = at(name);
    if (!v.is_number_integer() || (v.is_number_unsigned() && v.get<uint64_t>() > INT64_MAX))
      type_error(name, "an integer (at most 2^63 - 1)");
    out = v.get<int64_t>();
  }
  void get(const char* name, double& out) {
    if (!has(name)) return;
    const json& v = at(name);
    if (!v.is_number()) type_error(name, "a number");
    out = v.get<double>();
  }
  void get(const char* name, bool& out) {
    if (!has(name)) return;
    const json& v = at(name);
    if (!v.is_boolean()) type_error(name, "true or false");
    out = v.get<bool>();
  }
  void get(const char* name, std::vector<int64_t>& out) {
    if (!has(name)) return;
    const json& v = at(name);
    if (!v.is_array()) type_error(name, "a list of integers");
    out.clear();
    for (const json& e : v) {
      if (!e.is_number_integer() || (e.is_number_unsigned() && e.get<uint64_t>() > INT64_MAX))
        type_error(name, "a list of integers");
      out.push_back(e.get<int64_t>());
    }
  }
  std::string get_string(const char* name, const std::string& fallback) {
    if (!has(name)) return fallback;
    const json& v = at(name);
    if (!v.is_string()) type_error(name, "a string");
    return v.get<std::string>();
  }
  // A name from `table`; absent, `out` keeps its value (the default).
  template <typename E, size_t N>
  void get_enum(const char* name, const Named<E> (&table)[N], E& out) {
    const std::string given = get_string(name, name_in(table, out));
    if (!value_named(table, given, out))
      fail(source_, ": field '", name, "' must be one of ", names_in(table), " (got \"", excerpt(given), "\")");
  }
  void mark_seen(const char* name) { seen_.insert(name); }
  void reject_unknown() const {
    for (auto it = j_.begin(); it != j_.end(); ++it)
      HYMBA_CHECK(seen_.count(it.key()) != 0, source_, ": unknown field '", excerpt(it.key()), "'");
  }
  const std::string& source() const { return source_; }

 private:
  const json& j_;
  std::string source_;
  std::set<std::string> seen_;
};

MixerKind parse_mixer(const std::string& s, const std::string& where) {
  MixerKind k{};
  if (!value_named(kMixerNames, s, k)) fail(where, ": layer type '", excerpt(s), "' is not one of ", names_in(kMixerNames));
  return k;
}

// Seed 002's dims_from_ratio, with the attention share rounded to a multiple of
// 2 * heads so every head gets an equal, even (RoPE) width. Safe for any
// input (it runs before validate() rejects a bad ratio or head count): huge
// ratios ([1e308, 1e308]), NaN and head counts near 2^63 neither overflow nor
// reach an undefined conversion.
void dims_from_ratio(int64_t d_model, double ra, double rm, int64_t heads, int64_t& attn, int64_t& mamba) {
  if (!(std::isfinite(ra) && std::isfinite(rm) && ra >= 0 && rm >= 0 && d_model >= 0)) {
    attn = 0;  // validate() names the field
    mamba = d_model;
    return;
  }
  if (ra == 0.0) {
    attn = 0;
  } else if (rm == 0.0) {
    attn = d_model;
  } else {
    int64_t unit = 0;
    if (__builtin_mul_overflow(int64_t{2}, std::max<int64_t>(heads, 1), &unit)) unit = INT64_MAX;
    const double dm = static_cast<double>(d_model);
    // The seed's expression where it is finite; the share first where
    // d_model x ra or ra + rm would overflow to infinity.
    const double sum = ra + rm;
    const double share = std::isfinite(dm * ra) && std::isfinite(sum) ? dm * ra / sum : dm * (1.0 / (1.0 + rm / ra));
    const double units = share / static_cast<double>(unit);
    int64_t n = 0;
    if (units < 0.5) n = 0;
    else if (units >= dm + 1.0) n = d_model;  // clamped below in any case
    else n = static_cast<int64_t>(std::llround(units));
    if (__builtin_mul_overflow(n, unit, &attn)) attn = d_model;
    attn = std::clamp<int64_t>(attn, 0, d_model);
  }
  mamba = d_model - attn;
  if (rm == 0.0) mamba = 0;
  if (ra == 0.0) mamba = d_model;
}

// Refuses sizes whose products overflow 64-bit integers: a wrapped product
// would size a tensor too small (a crash) or empty (silent garbage). Each
// message names the fields multiplied.
void check_sizes(const ModelConfig& c, bool any_attn, bool any_mamba) {
  const int64_t d = c.hidden_size;
  checked_mul(c.vocab_size, d, "config: fields vocab_size x hidden_size");
  checked_mul(c.num_memory_tokens, d, "config: fields num_memory_tokens x hidden_size");
  if (c.position_embedding == PositionEmbedding::kLearned)
    checked_mul(c.max_position_embeddings, d, "config: fields max_position_embeddings x hidden_size");
  checked_product({3, c.intermediate_size, d}, "config: fields 3 x intermediate_size x hidden_size");
  int64_t inner = 0;
  if (any_mamba) {
    inner = checked_mul(c.mamba_expand, c.mamba_width(), "config: fields mamba_expand x hidden_size");
    checked_product({2, inner, d}, "config: fields 2 x mamba_expand x hidden_size x hidden_size");
    const int64_t x_proj_out =
        checked_add(c.mamba_dt_rank, checked_mul(2, c.mamba_d_state, "config: fields 2 x mamba_d_state"),
                    "config: fields mamba_dt_rank + 2 x mamba_d_state");
    checked_mul(x_proj_out, inner, "config: fields (mamba_dt_rank + 2 x mamba_d_state) x mamba_expand x hidden_size");
    checked_mul(inner, std::max(c.mamba_d_state, c.mamba_d_conv),
                "config: fields mamba_expand x hidden_size x max(mamba_d_state, mamba_d_conv)");
  }
  if (any_attn) {
    const char* rows_what = "config: fields num_attention_heads x qk_head_dim + 2 x num_key_value_heads x head dims";
    const int64_t q = checked_mul(c.num_attention_heads, c.qk_head_dim, "config: fields num_attention_heads x qk_head_dim");
    const int64_t k = checked_mul(c.num_key_value_heads, c.qk_head_dim, "config: fields num_key_value_heads x qk_head_dim");
    const int64_t v = checked_mul(c.num_key_value_heads, c.v_head_dim, "config: fields num_key_value_heads x v_head_dim");
    const int64_t out = checked_mul(c.num_attention_heads, c.v_head_dim, "config: fields num_attention_heads x v_head_dim");
    int64_t rows = checked_add(checked_add(q, k, rows_what), v, rows_what);
    rows = checked_add(rows, checked_mul(2, inner, "config: fields 2 x mamba_expand x hidden_size"), rows_what);
    checked_mul(rows, d, "config: fields (attention heads x head dims + 2 x mamba_expand x hidden_size) x hidden_size");
    checked_mul(checked_add(out, inner, "config: fields num_attention_heads x v_head_dim + mamba_expand x hidden_size"),
                d, "config: fields (num_attention_heads x v_head_dim + mamba_expand x hidden_size) x hidden_size");
  }
}

}  // namespace

ModelConfig ModelConfig::from_json(const json& j, const std::string& source) {
  ModelConfig c;
  FieldReader r(j, source);
  r.get("vocab_size", c.vocab_size);
  r.get("hidden_size", c.hidden_size);
  r.get("num_hidden_layers", c.num_hidden_layers);
  r.get("rms_norm_eps", c.rms_norm_eps);
  r.get("tie_word_embeddings", c.tie_word_embeddings);
  r.get("dropout", c.dropout);
  r.get("initializer_range", c.initializer_range);
  r.get_enum("init_scheme", kInitSchemeTable, c.init_scheme);
  r.get("num_attention_heads", c.num_attention_heads);
  r.get("num_key_value_heads", c.num_key_value_heads);
  r.get("qk_head_dim", c.qk_head_dim);
  r.get("v_head_dim", c.v_head_dim);
  r.get("rope_theta", c.rope_theta);
  const bool rope_given = r.has("rope");
  r.get("rope", c.rope);
  c.position_embedding = c.rope ? PositionEmbedding::kRope : PositionEmbedding::kNone;
  r.get_enum("position_embedding", kPositionNames, c.position_embedding);
  HYMBA_CHECK(!rope_given || c.rope == (c.position_embedding == PositionEmbedding::kRope), source, ": field 'rope' (",
              c.rope ? "true" : "false", ") contradicts position_embedding \"", to_string(c.position_embedding), "\"");
  c.rope = c.position_embedding == PositionEmbedding::kRope;
  const std::string rope_type = r.get_string("rope_type", "default");
  if (rope_type == "ntk") c.rope_ntk = true;
  else if (rope_type != "default")
    fail(source, ": field 'rope_type' must be \"default\" or \"ntk\" (got \"", excerpt(rope_type), "\")");
  r.get("max_position_embeddings", c.max_position_embeddings);
  r.get("orig_max_position_embeddings", c.orig_max_position_embeddings);
  r.get("sliding_window_inclusive", c.sliding_window_inclusive);
  r.get("global_attn_idx", c.global_attn_idx);
  r.get("sliding_window", c.sliding_window);
  r.get("num_memory_tokens", c.num_memory_tokens);
  r.get("sliding_window_symmetric", c.sliding_window_symmetric);
  r.get("meta_tokens_see_all", c.meta_tokens_see_all);
  r.get("attention_dropout", c.attention_dropout);
  r.get("attention_out_bias", c.attention_out_bias);
  r.get("attention_qkv_bias", c.attention_qkv_bias);
  r.get_enum("attention_scale", kScaleNames, c.attention_scale);
  r.get("mamba_d_state", c.mamba_d_state);
  r.get("mamba_d_conv", c.mamba_d_conv);
  r.get("mamba_expand", c.mamba_expand);
  r.get("mamba_conv_bias", c.mamba_conv_bias);
  r.get("mamba_inner_layernorms", c.mamba_inner_layernorms);
  r.get("mamba_dt_min", c.mamba_dt_min);
  r.get("mamba_dt_max", c.mamba_dt_max);
  r.get("intermediate_size", c.intermediate_size);
  r.get_enum("mlp_activation", kActivationNames, c.mlp_activation);
  r.get("mlp_bias", c.mlp_bias);
  r.get_enum("norm", kNormNames, c.norm);
  r.get("layer_norm_eps", c.layer_norm_eps);
  r.get("block_layers", c.block_layers);
  r.get_enum("block_link", kBlockLinkNames, c.block_link);

  if (r.has("mamba_dt_rank")) {
    const json& v = r.at("mamba_dt_rank");
    if (v.is_string() && v.get<std::string>() == "auto") {
      c.mamba_dt_rank = 0;
    } else if (v.is_number_integer()) {
      c.mamba_dt_rank = v.get<int64_t>();
      HYMBA_CHECK(c.mamba_dt_rank >= 1, source, ": field 'mamba_dt_rank' must be >= 1 or \"auto\"");
    } else {
      r.type_error("mamba_dt_rank", "an integer or \"auto\"");
    }
  }

  // Checked before num_hidden_layers sizes the layer_types list below.
  HYMBA_CHECK(c.num_hidden_layers <= kMaxLayers, source, ": field 'num_hidden_layers' must be <= ", kMaxLayers,
              " (got ", c.num_hidden_layers, ")");
  // layer_types: one string for every layer, or one per layer.
  std::vector<MixerKind> kinds;
  if (r.has("layer_types")) {
    const json& v = r.at("layer_types");
    if (v.is_string()) {
      kinds.assign(static_cast<size_t>(std::max<int64_t>(c.num_hidden_layers, 0)),
                   parse_mixer(v.get<std::string>(), source + ": field 'layer_types'"));
    } else if (v.is_array()) {
      for (const json& e : v) {
        if (!e.is_string()) r.type_error("layer_types", "a string or a list of strings");
        kinds.push_back(parse_mixer(e.get<std::string>(), source + ": field 'layer_types'"));
      }
    } else {
      r.type_error("layer_types", "a string or a list of strings");
    }
  } else {
    kinds.assign(static_cast<size_t>(std::max<int64_t>(c.num_hidden_layers, 0)), MixerKind::kHybrid);
  }
  c.layer_types = kinds;

  if (r.has("kv_reuse_group")) {
    const json& v = r.at("kv_reuse_group");
    if (v.is_string()) {
      HYMBA_CHECK(v.get<std::string>() == "auto" || v.get<std::string>() == "all_pairs", source,
                  ": field 'kv_reuse_group' must be a list of layer lists, \"auto\" or \"all_pairs\"");
      c.kv_reuse_auto = v.get<std::string>() == "auto";
      c.kv_reuse_all_pairs = !c.kv_reuse_auto;
    } else if (v.is_array()) {
      for (const json& g : v) {
        if (!g.is_array()) r.type_error("kv_reuse_group", "a list of layer lists or \"auto\"");
        std::vector<int64_t> group;
        for (const json& e : g) {
          if (!e.is_number_integer()) r.type_error("kv_reuse_group", "a list of layer lists or \"auto\"");
          group.push_back(e.get<int64_t>());
        }
        c.kv_reuse_group.push_back(group);
      }
    } else {
      r.type_error("kv_reuse_group", "a list of layer lists or \"auto\"");
    }
  }

  r.get_enum("proj_style", kProjStyleNames, c.proj_style);

  r.get_enum("fusion", kFusionNames, c.fusion);

  if (r.has("attn_mamba_ratio")) {
    const json& v = r.at("attn_mamba_ratio");
    if (!v.is_array() || v.size() != 2 || !v[0].is_number() || !v[1].is_number())
      r.type_error("attn_mamba_ratio", "a pair of numbers [attention, mamba]");
    c.attn_mamba_ratio = {v[0].get<double>(), v[1].get<double>()};
  }
  // Informational fields written by to_json(); accepted and ignored on read.
  r.mark_seen("model_type");
  r.mark_seen("derived");
  r.reject_unknown();

  if (static_cast<int64_t>(c.layer_types.size()) != c.num_hidden_layers)
    fail(source, ": field 'layer_types' has ", c.layer_types.size(), " entries but num_hidden_layers is ",
         c.num_hidden_layers);
  try {
    c.resolve();
  } catch (const Error& e) {
    // Rules are checked in resolve(); name the file rather than "config".
    std::string msg = e.what();
    if (msg.rfind("config: ", 0) == 0) msg = source + ": " + msg.substr(8);
    throw Error(msg);
  }
  return c;
}

bool ModelConfig::has_attention(int64_t layer) const {
  MixerKind k = layer_types[static_cast<size_t>(layer)];
  return k == MixerKind::kAttention || k == MixerKind::kHybrid;
}
bool ModelConfig::has_mamba(int64_t layer) const {
  MixerKind k = layer_types[static_cast<size_t>(layer)];
  return k == MixerKind::kMamba || k == MixerKind::kHybrid;
}
bool ModelConfig::is_global(int64_t layer) const {
  return sliding_window <= 0 ||
         std::find(global_attn_idx.begin(), global_attn_idx.end(), layer) != global_attn_idx.end();
}
int64_t ModelConfig::window_of(int64_t layer) const {
  if (is_global(layer)) return 0;
  return sliding_window_inclusive ? sliding_window + 1 : sliding_window;
}
const char* ModelConfig::future_leak() const {
  bool local = false, attention = false;
  for (int64_t l = 0; l < num_hidden_layers; ++l) {
    attention |= has_attention(l);
    local |= has_attention(l) && window_of(l) > 0;
  }
  if (sliding_window_symmetric && local) return "sliding_window_symmetric";
  if (meta_tokens_see_all && attention && num_memory_tokens > 0) return "meta_tokens_see_all";
  return nullptr;
}
std::string ModelConfig::decode_refusal() const {
  if (const char* leak = future_leak())
    return std::string("config field '") + leak +
           "' lets queries read later tokens (a leak); such a model can be trained and evaluated, not decoded";
  for (const auto& g : kv_reuse_group)
    for (int64_t l : g)
      if (window_of(l) != window_of(g.front()))
        return "kv_reuse_group pairs layers " + std::to_string(g.front()) + " and " + std::to_string(l) +
               " of different windows (\"all_pairs\"); the decoder's K/V caches keep one window per owner, so "
               "such a model can be trained and evaluated, not decoded";
  return "";
}
double ModelConfig::rope_base() const {
  if (!rope_ntk) return rope_theta;
  const double D = static_cast<double>(qk_head_dim);
  const double factor = 2.0;  // fixed in the released modeling_hymba.py
  return rope_theta * std::pow(factor * static_cast<double>(max_position_embeddings) /
                                       static_cast<double>(orig_max_position_embeddings) -
                                   (factor - 1.0),
                               D / (D - 2.0));
}
int64_t ModelConfig::kv_producer(int64_t layer) const {
  return producer_.empty() ? layer : producer_[static_cast<size_t>(layer)];
}
int64_t ModelConfig::attn_dim_in() const { return hidden_size; }
double ModelConfig::query_prescale() const {
  return attention_scale == AttentionScale::kNone ? std::sqrt(static_cast<double>(qk_head_dim)) : 1.0;
}

int64_t ModelConfig::mamba_width() const {
  if (attn_mamba_ratio.size() == 2) {
    int64_t a, m;
    dims_from_ratio(hidden_size, attn_mamba_ratio[0], attn_mamba_ratio[1], num_attention_heads, a, m);
    return m;
  }
  return hidden_size;
}

void ModelConfig::resolve() {
  HYMBA_CHECK(hidden_size >= 1, "config: field 'hidden_size' must be >= 1 (got ", hidden_size, ")");
  HYMBA_CHECK(num_hidden_layers >= 1, "config: field 'num_hidden_layers' must be >= 1 (got ", num_hidden_layers, ")");
  HYMBA_CHECK(static_cast<int64_t>(layer_types.size()) == num_hidden_layers, "config: field 'layer_types' has ",
              layer_types.size(), " entries but num_hidden_layers is ", num_hidden_layers);
  HYMBA_CHECK(num_hidden_layers <= kMaxLayers, "config: field 'num_hidden_layers' must be <= ", kMaxLayers, " (got ",
              num_hidden_layers, ")");
  // Layer lists are walked once per layer below: longer than the model they
  // cannot be valid (their entries must be distinct layers), so refuse them
  // before a hostile list makes that walk quadratic.
  HYMBA_CHECK(static_cast<int64_t>(global_attn_idx.size()) <= num_hidden_layers, "config: field 'global_attn_idx' lists ",
              global_attn_idx.size(), " layers but the model has ", num_hidden_layers);
  if (mamba_dt_rank == 0) mamba_dt_rank = hidden_size / 16 + (hidden_size % 16 != 0);  // ceil, without overflow
  // `rope` and position_embedding say the same thing (from_json refuses a
  // contradiction); code that sets only one of them gets the other to match.
  if (position_embedding != PositionEmbedding::kRope) rope = false;
  else if (!rope) position_embedding = PositionEmbedding::kNone;
  bool any_attn = false;
  for (int64_t l = 0; l < num_hidden_layers; ++l) any_attn |= has_attention(l);
  if (any_attn && num_attention_heads >= 1) {
    if (attn_mamba_ratio.size() == 2) {
      int64_t a, m;
      dims_from_ratio(hidden_size, attn_mamba_ratio[0], attn_mamba_ratio[1], num_attention_heads, a, m);
      if (qk_head_dim == 0 && a > 0) qk_head_dim = a / num_attention_heads;
      if (v_head_dim == 0 && a > 0) v_head_dim = a / num_attention_heads;
    }
    if (qk_head_dim == 0 && hidden_size % num_attention_heads == 0) qk_head_dim = hidden_size / num_attention_heads;
    if (v_head_dim == 0) {
      bool fused_norm_mean = proj_style == ProjStyle::kFused && fusion == Fusion::kNormMean;
      bool any_hybrid = std::count(layer_types.begin(), layer_types.end(), MixerKind::kHybrid) > 0;
      // d_inner is only derived from when it is positive and fits: validate()
      // names the field at fault otherwise.
      int64_t inner = 0;
      const bool inner_ok = !__builtin_mul_overflow(mamba_expand, mamba_width(), &inner) && inner > 0;
      if (fused_norm_mean && any_hybrid && inner_ok && inner % num_attention_heads == 0)
        v_head_dim = inner / num_attention_heads;  // attention output must match the SSM width
      else
        v_head_dim = qk_head_dim;
    }
  }
  if (kv_reuse_auto) {
    // Consecutive pairs of local attention layers: [l, l+1] when both are
    // local attention layers, scanning left to right (official config).
    kv_reuse_group.clear();
    for (int64_t l = 0; l + 1 < num_hidden_layers; ++l) {
      bool a = has_attention(l) && !is_global(l), b = has_attention(l + 1) && !is_global(l + 1);
      if (a && b) {
        kv_reuse_group.push_back({l, l + 1});
        ++l;
      }
    }
  }
  if (kv_reuse_all_pairs) {
    // Seed 002's owner map (owner[a + 1] = a for a = 0, 2, 4, ...), on the
    // pairs whose two layers both have attention.
    kv_reuse_group.clear();
    for (int64_t l = 0; l + 1 < num_hidden_layers; l += 2)
      if (has_attention(l) && has_attention(l + 1)) kv_reuse_group.push_back({l, l + 1});
  }
  validate();
  producer_.assign(static_cast<size_t>(num_hidden_layers), 0);
  for (int64_t l = 0; l < num_hidden_layers; ++l) producer_[static_cast<size_t>(l)] = l;
  for (const auto& g : kv_reuse_group)
    for (size_t i = 1; i < g.size(); ++i) producer_[static_cast<size_t>(g[i])] = g[0];
}

void ModelConfig::validate() const {
  auto positive = [](const char* name, int64_t v) {
    HYMBA_CHECK(v >= 1, "config: field '", name, "' must be >= 1 (got ", v, ")");
  };
  positive("vocab_size", vocab_size);
  positive("hidden_size", hidden_size);
  positive("num_hidden_layers", num_hidden_layers);
  // Bounds first (config.h): every size below is then far from overflowing.
  auto at_most = [](const char* name, int64_t v, int64_t limit) {
    HYMBA_CHECK(v <= limit, "config: field '", name, "' must be <= ", limit, " (got ", v, ")");
  };
  at_most("vocab_size", vocab_size, kMaxVocab);
  at_most("hidden_size", hidden_size, kMaxWidth);
  at_most("num_hidden_layers", num_hidden_layers, kMaxLayers);
  at_most("intermediate_size", intermediate_size, kMaxWidth);
  at_most("block_layers", block_layers, kMaxLayers);
  at_most("num_memory_tokens", num_memory_tokens, kMaxMemoryTokens);
  at_most("sliding_window", sliding_window, kMaxPositions);
  at_most("max_position_embeddings", max_position_embeddings, kMaxPositions);
  at_most("orig_max_position_embeddings", orig_max_position_embeddings, kMaxPositions);
  at_most("num_attention_heads", num_attention_heads, kMaxHeads);
  at_most("num_key_value_heads", num_key_value_heads, kMaxHeads);
  at_most("qk_head_dim", qk_head_dim, kMaxWidth);
  at_most("v_head_dim", v_head_dim, kMaxWidth);
  at_most("mamba_d_state", mamba_d_state, kMaxMambaState);
  at_most("mamba_d_conv", mamba_d_conv, kMaxConvWidth);
  at_most("mamba_expand", mamba_expand, kMaxExpand);
  at_most("mamba_dt_rank", mamba_dt_rank, kMaxWidth);
  HYMBA_CHECK(std::isfinite(rms_norm_eps) && std::isfinite(initializer_range) && std::isfinite(rope_theta) &&
                  std::isfinite(mamba_dt_min) && std::isfinite(mamba_dt_max),
              "config: fields rms_norm_eps, initializer_range, rope_theta, mamba_dt_min and mamba_dt_max must be finite");
  HYMBA_CHECK(rms_norm_eps > 0, "config: field 'rms_norm_eps' must be > 0");
  HYMBA_CHECK(layer_norm_eps > 0, "config: field 'layer_norm_eps' must be > 0");
  HYMBA_CHECK(!rope_ntk || rope, "config: field 'rope_type' \"ntk\" needs position_embedding \"rope\" (got \"",
              to_string(position_embedding), "\")");
  if (position_embedding == PositionEmbedding::kLearned) {
    HYMBA_CHECK(max_position_embeddings >= 1,
                "config: field 'max_position_embeddings' must be >= 1 with position_embedding \"learned\" (got ",
                max_position_embeddings, ")");
    HYMBA_CHECK(num_memory_tokens < max_position_embeddings, "config: field 'max_position_embeddings' (",
                max_position_embeddings, ") must exceed num_memory_tokens (", num_memory_tokens,
                "): meta tokens take the first learned positions");
  }
  HYMBA_CHECK(!mlp_bias || mlp_activation != MlpActivation::kSwiGlu,
              "config: field 'mlp_bias' needs mlp_activation \"gelu\" or \"gelu_erf\" (SwiGLU has no biases)");
  HYMBA_CHECK(dropout >= 0 && dropout < 1, "config: field 'dropout' must be in [0, 1) (got ", dropout, ")");
  HYMBA_CHECK(attention_dropout >= 0 && attention_dropout < 1,
              "config: field 'attention_dropout' must be in [0, 1) (got ", attention_dropout, ")");
  HYMBA_CHECK(initializer_range > 0, "config: field 'initializer_range' must be > 0");
  HYMBA_CHECK(intermediate_size >= 0, "config: field 'intermediate_size' must be >= 0 (0 = no FFN)");
  HYMBA_CHECK(block_layers >= 0, "config: field 'block_layers' must be >= 0 (0 = no blocks; got ", block_layers, ")");
  HYMBA_CHECK(block_layers == 0 || num_hidden_layers % block_layers == 0, "config: field 'block_layers' (",
              block_layers, ") must divide num_hidden_layers (", num_hidden_layers, ")");
  HYMBA_CHECK(block_link == BlockLink::kNull || block_layers > 0, "config: field 'block_link' \"",
              to_string(block_link), "\" needs block_layers >= 1");
  HYMBA_CHECK(num_memory_tokens >= 0, "config: field 'num_memory_tokens' must be >= 0");
  HYMBA_CHECK(sliding_window >= 0, "config: field 'sliding_window' must be >= 1, or 0 for all-global attention (got ",
              sliding_window, ")");

  bool any_attn = false, any_mamba = false, any_hybrid = false;
  for (int64_t l = 0; l < num_hidden_layers; ++l) {
    any_attn |= has_attention(l);
    any_mamba |= has_mamba(l);
    any_hybrid |= layer_types[static_cast<size_t>(l)] == MixerKind::kHybrid;
  }

  if (attn_mamba_ratio.size() == 2) {
    const double ra = attn_mamba_ratio[0], rm = attn_mamba_ratio[1];
    HYMBA_CHECK(ra >= 0 && rm >= 0 && ra + rm > 0,
                "config: field 'attn_mamba_ratio' needs two non-negative numbers, not both zero");
    HYMBA_CHECK(proj_style == ProjStyle::kSeparate,
                "config: field 'attn_mamba_ratio' needs proj_style \"separate\" (the fused in_proj fixes both widths)");
    int64_t a, m;
    dims_from_ratio(hidden_size, ra, rm, num_attention_heads, a, m);
    HYMBA_CHECK(!(any_attn && a == 0), "config: field 'attn_mamba_ratio' leaves the attention branch empty while "
                "layer_types asks for attention (use layer_types \"mamba\" and num_attention_heads 0)");
    HYMBA_CHECK(!(any_mamba && m == 0), "config: field 'attn_mamba_ratio' leaves the Mamba branch empty while "
                "layer_types asks for mamba (use layer_types \"attention\")");
  }

  // Mamba fields first: the attention widths of a fused hybrid are derived
  // from them, and the error must name the field the user wrote.
  if (any_mamba) {
    positive("mamba_d_state", mamba_d_state);
    positive("mamba_d_conv", mamba_d_conv);
    positive("mamba_expand", mamba_expand);
    positive("mamba_dt_rank", mamba_dt_rank);
    HYMBA_CHECK(mamba_dt_min > 0 && mamba_dt_max >= mamba_dt_min,
                "config: fields 'mamba_dt_min'/'mamba_dt_max' need 0 < dt_min <= dt_max");
  }

  if (any_attn) {
    positive("num_attention_heads", num_attention_heads);
    positive("num_key_value_heads", num_key_value_heads);
    HYMBA_CHECK(num_attention_heads % num_key_value_heads == 0, "config: field 'num_key_value_heads' (",
                num_key_value_heads, ") must divide num_attention_heads (", num_attention_heads, ")");
    HYMBA_CHECK(qk_head_dim >= 1, "config: field 'num_attention_heads' (", num_attention_heads,
                ") must divide hidden_size (", hidden_size, "), or set qk_head_dim");
    HYMBA_CHECK(qk_head_dim % 2 == 0, "config: field 'qk_head_dim' must be even for RoPE (got ", qk_head_dim, ")");
    positive("v_head_dim", v_head_dim);
    HYMBA_CHECK(rope_theta > 0, "config: field 'rope_theta' must be > 0");
    if (rope && rope_ntk) {
      HYMBA_CHECK(qk_head_dim > 2, "config: field 'rope_type' \"ntk\" needs qk_head_dim > 2 (got ", qk_head_dim, ")");
      HYMBA_CHECK(orig_max_position_embeddings >= 1,
                  "config: field 'orig_max_position_embeddings' must be >= 1 with rope_type \"ntk\"");
      HYMBA_CHECK(max_position_embeddings >= orig_max_position_embeddings,
                  "config: field 'max_position_embeddings' must be >= orig_max_position_embeddings (",
                  orig_max_position_embeddings, ") with rope_type \"ntk\"");
    }
    for (int64_t l = 0; l < num_hidden_layers && attention_out_bias; ++l)
      HYMBA_CHECK(!(has_attention(l) && has_mamba(l)) || (proj_style == ProjStyle::kSeparate &&
                                                           (fusion == Fusion::kMean || fusion == Fusion::kLearnedBeta)),
                  "config: field 'attention_out_bias' needs every attention layer to own an o_proj (hybrid layer ", l,
                  " has fusion \"", to_string(fusion), "\"; use attention layers, or fusion mean or learned_beta)");
    for (int64_t l = 0; l < num_hidden_layers && attention_qkv_bias; ++l)
      HYMBA_CHECK(!(has_attention(l) && has_mamba(l)) || proj_style == ProjStyle::kSeparate,
                  "config: field 'attention_qkv_bias' needs separate q/k/v projections (hybrid layer ", l,
                  " has proj_style \"fused\"; use attention layers, or proj_style separate)");
  } else {
    HYMBA_CHECK(global_attn_idx.empty(), "config: field 'global_attn_idx' is set but no layer has attention");
    HYMBA_CHECK(!attention_out_bias, "config: field 'attention_out_bias' is set but no layer has attention");
    HYMBA_CHECK(!attention_qkv_bias, "config: field 'attention_qkv_bias' is set but no layer has attention");
    HYMBA_CHECK(attention_scale == AttentionScale::kInvSqrtD,
                "config: field 'attention_scale' is set but no layer has attention");
  }

  std::set<int64_t> globals;
  for (int64_t g : global_attn_idx) {
    HYMBA_CHECK(g >= 0 && g < num_hidden_layers, "config: field 'global_attn_idx' has layer ", g,
                " outside 0..", num_hidden_layers - 1);
    HYMBA_CHECK(globals.insert(g).second, "config: field 'global_attn_idx' lists layer ", g, " twice");
    HYMBA_CHECK(has_attention(g), "config: field 'global_attn_idx' lists layer ", g, " which has no attention (",
                to_string(layer_types[static_cast<size_t>(g)]), ")");
  }
  bool any_local = false;
  for (int64_t l = 0; l < num_hidden_layers; ++l) any_local |= has_attention(l) && !globals.count(l);
  HYMBA_CHECK(!(any_local && !global_attn_idx.empty() && sliding_window < 1),
              "config: field 'sliding_window' must be >= 1 when some attention layers are not in global_attn_idx");

  std::set<int64_t> grouped;
  for (const auto& g : kv_reuse_group) {
    HYMBA_CHECK(g.size() >= 2, "config: field 'kv_reuse_group' has a group with fewer than 2 layers");
    for (size_t i = 0; i < g.size(); ++i) {
      const int64_t l = g[i];
      HYMBA_CHECK(l >= 0 && l < num_hidden_layers, "config: field 'kv_reuse_group' has layer ", l, " outside 0..",
                  num_hidden_layers - 1);
      HYMBA_CHECK(grouped.insert(l).second, "config: field 'kv_reuse_group' lists layer ", l, " more than once");
      HYMBA_CHECK(has_attention(l), "config: field 'kv_reuse_group' has layer ", l, " which has no attention (",
                  to_string(layer_types[static_cast<size_t>(l)]), ")");
      HYMBA_CHECK(kv_reuse_all_pairs || !is_global(l), "config: field 'kv_reuse_group' has global layer ", l,
                  " (global layers share K/V only under \"all_pairs\")");
      HYMBA_CHECK(i == 0 || l > g[i - 1], "config: field 'kv_reuse_group' group must list layers in increasing order");
    }
  }

  check_sizes(*this, any_attn, any_mamba);

  if (any_hybrid) {
    if (proj_style == ProjStyle::kFused) {
      HYMBA_CHECK(fusion == Fusion::kNormMean || fusion == Fusion::kConcat, "config: field 'fusion' \"",
                  to_string(fusion), "\" needs proj_style \"separate\" (fused supports norm_mean and concat)");
    }
    if (fusion == Fusion::kNormMean) {
      HYMBA_CHECK(attn_out_width() == d_inner(), "config: fusion norm_mean averages the two branches, so "
                  "num_attention_heads x v_head_dim (", attn_out_width(), ") must equal the Mamba inner width (",
                  d_inner(), ")");
    }
  }
}

json ModelConfig::to_json() const {
  json j;
  j["model_type"] = "hymba";
  j["vocab_size"] = vocab_size;
  j["hidden_size"] = hidden_size;
  j["num_hidden_layers"] = num_hidden_layers;
  j["rms_norm_eps"] = rms_norm_eps;
  j["tie_word_embeddings"] = tie_word_embeddings;
  j["dropout"] = dropout;
  j["initializer_range"] = initializer_range;
  // Written only when not the default, so existing configs (and the ablate
  // rows compared against them) stay as they were.
  if (init_scheme != InitScheme::kNormal) j["init_scheme"] = to_string(init_scheme);
  json types = json::array();
  for (MixerKind k : layer_types) types.push_back(to_string(k));
  j["layer_types"] = types;
  j["num_attention_heads"] = num_attention_heads;
  j["num_key_value_heads"] = num_key_value_heads;
  j["qk_head_dim"] = qk_head_dim;
  j["v_head_dim"] = v_head_dim;
  j["rope_theta"] = rope_theta;
  // Written only when set, so configs of models without them stay as they were.
  if (!rope) j["rope"] = false;
  if (position_embedding != PositionEmbedding::kRope) j["position_embedding"] = to_string(position_embedding);
  if (norm != NormKind::kRmsNorm) {
    j["norm"] = to_string(norm);
    j["layer_norm_eps"] = layer_norm_eps;
  }
  if (rope_ntk) j["rope_type"] = "ntk";
  if (max_position_embeddings > 0) j["max_position_embeddings"] = max_position_embeddings;
  if (orig_max_position_embeddings > 0) j["orig_max_position_embeddings"] = orig_max_position_embeddings;
  if (sliding_window_inclusive) j["sliding_window_inclusive"] = true;
  j["global_attn_idx"] = global_attn_idx;
  j["sliding_window"] = sliding_window;
  j["num_memory_tokens"] = num_memory_tokens;
  if (sliding_window_symmetric) j["sliding_window_symmetric"] = true;
  if (meta_tokens_see_all) j["meta_tokens_see_all"] = true;
  if (attention_dropout > 0) j["attention_dropout"] = attention_dropout;
  if (attention_out_bias) j["attention_out_bias"] = true;
  if (attention_qkv_bias) j["attention_qkv_bias"] = true;
  if (attention_scale != AttentionScale::kInvSqrtD) j["attention_scale"] = to_string(attention_scale);
  if (kv_reuse_all_pairs) j["kv_reuse_group"] = "all_pairs";  // its groups may hold global layers
  else j["kv_reuse_group"] = kv_reuse_group;
  j["mamba_d_state"] = mamba_d_state;
  j["mamba_d_conv"] = mamba_d_conv;
  j["mamba_expand"] = mamba_expand;
  j["mamba_dt_rank"] = mamba_dt_rank;
  j["mamba_conv_bias"] = mamba_conv_bias;
  j["mamba_inner_layernorms"] = mamba_inner_layernorms;
  j["mamba_dt_min"] = mamba_dt_min;
  j["mamba_dt_max"] = mamba_dt_max;
  j["proj_style"] = to_string(proj_style);
  j["fusion"] = to_string(fusion);
  if (!attn_mamba_ratio.empty()) j["attn_mamba_ratio"] = attn_mamba_ratio;
  j["intermediate_size"] = intermediate_size;
  if (mlp_activation != MlpActivation::kSwiGlu) j["mlp_activation"] = to_string(mlp_activation);
  if (mlp_bias) j["mlp_bias"] = true;
  if (block_layers > 0) {  // only sequential-block models carry these
    j["block_layers"] = block_layers;
    j["block_link"] = to_string(block_link);
  }
  return j;
}

}  // namespace hymba
