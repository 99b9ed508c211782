// Built-in model presets: the seed notebooks' experiments, the Hymba paper's
// design roadmap and its released model shapes. Each preset is a config JSON;
// a scale (tiny / small / seed) shrinks width and depth uniformly for CPU runs
// while keeping the pattern (global layers, KV groups, meta tokens).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/config.h"

namespace hymba {

struct Preset {
  std::string name;         // lookup key, e.g. "hybrid-official"
  std::string title;        // as the seed or paper names it
  std::string family;       // "seed-001", "roadmap", "seed-003", "paper"
  std::string description;
  nlohmann::json config;    // at seed scale, unresolved
};

enum class Scale { kTiny, kSmall, kSeed };
Scale parse_scale(const std::string& s);  // throws naming --scale
const char* to_string(Scale s);

const std::vector<Preset>& all_presets();
// Case-insensitive lookup; the error lists the closest names.
const Preset& find_preset(const std::string& name);

// The preset's config JSON at the given scale (still unresolved).
nlohmann::json scaled_config_json(const Preset& p, Scale scale);
ModelConfig preset_config(const std::string& name, Scale scale = Scale::kSeed);

}  // namespace hymba
