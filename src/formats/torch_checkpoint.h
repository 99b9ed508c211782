// PyTorch `torch.save` checkpoints (pytorch_model.bin: the zip format of
// torch >= 1.6), read WITHOUT running the pickle: a small pickle machine
// accepts only the objects a state_dict is made of (dicts, tuples, numbers,
// strings, OrderedDict, tensor rebuilds and storage references) and refuses
// anything else in one line naming the file. Tensor data is read from the
// zip's stored (uncompressed) storage entries with pread, on demand.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/safetensors.h"

namespace hymba {

class TorchCheckpoint {
 public:
  static TorchCheckpoint open(const std::string& path);
  TorchCheckpoint(TorchCheckpoint&& other) noexcept;
  TorchCheckpoint& operator=(TorchCheckpoint&&) = delete;
  TorchCheckpoint(const TorchCheckpoint&) = delete;
  ~TorchCheckpoint();

  const std::string& path() const { return path_; }
  // One entry per tensor: dtype as safetensors names it ("F32", "BF16", "F16",
  // "F64"), shape, and [begin, end) as absolute byte offsets in the file.
  const std::vector<SafetensorsEntry>& entries() const { return entries_; }
  const SafetensorsEntry* find(const std::string& name) const;
  // The tensor as float32; n must equal its element count.
  void read_into(const std::string& name, float* dst, int64_t n) const;
  std::vector<float> read_f32(const std::string& name) const;

 private:
  TorchCheckpoint() = default;
  std::string path_;
  int fd_ = -1;
  std::vector<SafetensorsEntry> entries_;
  std::map<std::string, size_t> index_;
};

}  // namespace hymba
