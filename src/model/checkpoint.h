// A model checkpoint directory: config.json + model.safetensors (names in
// docs/checkpoint-format.md). Training adds its own files beside them.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "model/model.h"

namespace hymba {

inline constexpr const char* kConfigFile = "config.json";
inline constexpr const char* kWeightsFile = "model.safetensors";

// Writes config.json and model.safetensors atomically, creating dir if needed.
void save_model(const std::string& dir, const Model& model, const std::map<std::string, std::string>& metadata = {});

// Builds a model from dir/config.json and loads dir/model.safetensors,
// checking every tensor's name, shape and dtype.
std::unique_ptr<Model> load_model(const std::string& dir, bool training);

}  // namespace hymba
