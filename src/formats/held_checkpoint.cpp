#include "formats/held_checkpoint.h"

#include <cstring>
#include <set>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/excerpt.h"

namespace hymba {

const std::string& param_name_at(const Model& model, int64_t offset) {
  for (const ParamInfo& p : model.params().rows())
    if (p.offset == offset) return p.name;
  fail("no parameter at offset ", offset);
}

void save_held_params(const std::string& path, const Model& model, const std::map<std::string, std::string>& metadata) {
  const ParamTable& t = model.params();
  nlohmann::json blocks = nlohmann::json::object();
  std::vector<NamedTensor> tensors;
  for (const ParamInfo& p : t.rows()) {
    const auto it = model.held().find(p.name);
    if (it == model.held().end()) {
      tensors.push_back({p.name, p.shape, t.values_block() + p.offset, nullptr});
      continue;
    }
    const HeldMatrix& m = it->second;
    blocks[p.name] = stored_name(m.format);
    if (m.format == BlockFormat::kBF16)  // a plain BF16 tensor of the parameter's shape
      tensors.push_back({p.name, p.shape, nullptr, nullptr, m.bf16()});
    else
      tensors.push_back({p.name, Shape({m.rows, block_row_bytes(m.format, m.cols)}), nullptr,
                         static_cast<const uint8_t*>(m.blocks)});
  }
  std::map<std::string, std::string> meta = metadata;
  meta[kBlocksMetadataKey] = blocks.dump();
  // Data on a page boundary: the first tensor, the float32 embedding, lies in
  // the file as in the parameter block, and loads as file pages (below).
  save_safetensors(path, tensors, meta, FloatFormat::kF32, kMappableDataAlignment);
}

std::string load_held_params(const SafetensorsFile& file, Model& model, bool keep_blocks) {
  const std::string& path = file.path();
  const nlohmann::json blocks = nlohmann::json::parse(file.metadata().at(kBlocksMetadataKey), nullptr, false);
  HYMBA_CHECK(blocks.is_object(), path, ": metadata '", kBlocksMetadataKey,
              "' is not a JSON object of tensor names and block formats");
  std::vector<int64_t> holdable = held_weight_offsets(model.plan());
  const std::set<int64_t> held_offsets(holdable.begin(), holdable.end());
  std::set<std::string> names;
  std::vector<std::pair<std::string, HeldMatrix>> held;
  for (const auto& [name, value] : blocks.items()) {
    HYMBA_CHECK(value.is_string(), path, ": metadata '", kBlocksMetadataKey, "': tensor '", excerpt(name),
                "' has a non-string format");
    const std::optional<BlockFormat> format = parse_stored_block_format(value.get<std::string>());
    HYMBA_CHECK(format.has_value(), path, ": tensor '", excerpt(name), "' has block format '",
                excerpt(value.get<std::string>()), "' (q8_0, q4_0 or bf16)");
    HYMBA_CHECK(model.params().contains(name), path, ": unexpected tensor '", excerpt(name),
                "' (not a parameter of this model)");
    const ParamInfo& info = model.params().info(name);
    HYMBA_CHECK(held_offsets.count(info.offset) != 0 && info.shape.rank == 2, path, ": tensor '", name,
                "' is stored in blocks but is not the embedding, the head or a weight matrix of a linear layer");
    const SafetensorsEntry* e = file.find(name);
    HYMBA_CHECK(e != nullptr, path, ": tensor '", name, "' is missing");
    const int64_t rows = info.shape[0], cols = info.shape[1], row_bytes = block_row_bytes(*format, cols);
    if (*format == BlockFormat::kBF16)
      HYMBA_CHECK(e->dtype == "BF16" && e->shape.size() == 2 && e->shape[0] == rows && e->shape[1] == cols, path,
                  ": tensor '", name, "' has dtype ", e->dtype, " and shape ", excerpt(e->shape_str()),
                  ", expected BF16 ", info.shape.str());
    else
      HYMBA_CHECK(e->dtype == "U8" && e->shape.size() == 2 && e->shape[0] == rows && e->shape[1] == row_bytes, path,
                  ": tensor '", name, "' has dtype ", e->dtype, " and shape ", excerpt(e->shape_str()),
                  ", expected U8 [", rows, ",", row_bytes, "] (", stored_name(*format), " blocks of ",
                  info.shape.str(), ")");
    HeldMatrix m;
    m.format = *format;
    m.rows = rows;
    m.cols = cols;
    std::shared_ptr<const uint8_t> mapped = file.map_bytes(name);
    if (reinterpret_cast<uintptr_t>(mapped.get()) % alignof(uint16_t) != 0) {
      // Not written by hymba: copy to an aligned buffer for the kernels.
      auto copy = std::make_shared<std::vector<uint16_t>>(static_cast<size_t>((rows * row_bytes + 1) / 2));
      std::memcpy(copy->data(), mapped.get(), static_cast<size_t>(rows * row_bytes));
      m.blocks = copy->data();
      m.owner = copy;
    } else {
      m.blocks = mapped.get();
      m.owner = mapped;
      m.mapped = true;
    }
    const int64_t bad = first_nonfinite_scale(m);
    HYMBA_CHECK(bad < 0, path, ": tensor '", name, "' ", *format == BlockFormat::kBF16 ? "value " : "block ", bad,
                *format == BlockFormat::kBF16 ? " is NaN or infinite" : " has a NaN or infinite scale",
                "; the checkpoint is corrupt");
    names.insert(name);
    held.emplace_back(name, std::move(m));
  }
  load_params(file, model.params(), names);
  if (keep_blocks) {
    // Large float32 rows (hymba-1.5b's embedding: 205 MB) become copy-on-write
    // pages of the file where it lies as the block does (files this version
    // writes), not resident until read: the decoder reads a few rows per
    // token, and drops the pages again once its head copy is made.
    constexpr int64_t kShareFloats = int64_t{1} << 18;
    for (const ParamInfo& p : model.params().rows()) {
      if (names.count(p.name) != 0 || p.shape.numel() < kShareFloats) continue;
      const SafetensorsEntry* e = file.find(p.name);
      if (e->dtype == "F32" &&
          file.share_pages_with_file(e->begin, model.params().values_block() + p.offset, p.shape.numel()) > 0)
        model.params().note_file_pages(p.offset, p.shape.numel());
    }
    for (auto& [name, m] : held) model.hold(name, std::move(m));
    return "";
  }
  for (const auto& [name, m] : held) dequantize_matrix(m, model.params().value(name).data);
  return std::to_string(held.size()) + " matrices of " + path + " stored in " +
         (held.empty() ? "q8" : to_string(held.front().second.format)) +
         " were widened to float32 (this command needs float32 weights)";
}

int64_t hold_quantized(Model& model, BlockFormat format) {
  model.require_float_weights("quantizing");
  int64_t n = 0;
  for (int64_t offset : linear_weight_offsets(model.plan())) {
    const std::string& name = param_name_at(model, offset);
    const ParamInfo& info = model.params().info(name);
    model.hold(name, quantize_matrix(format, model.params().values_block() + offset, info.shape[0], info.shape[1]));
    ++n;
  }
  return n;
}

}  // namespace hymba
