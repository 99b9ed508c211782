// Checkpoints in the safetensors format (huggingface/safetensors), so files
// move freely between this engine and PyTorch / transformers:
//
//   u64 little-endian N | N bytes of JSON header | data buffer
//
// The header maps each tensor name to {"dtype", "shape", "data_offsets":
// [begin, end]} (byte offsets relative to the data buffer) plus an optional
// "__metadata__" object of string -> string. We write F32 (or BF16 / F16,
// rounded to nearest even), with the header padded with spaces to a multiple
// of 8 as the reference writer does; we read F32, BF16 and F16, converting to
// float32 (core/float_formats.h).
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/aligned.h"
#include "core/float_formats.h"
#include "core/tensor.h"

namespace hymba {

class ParamTable;

struct SafetensorsEntry {
  std::string name;
  std::string dtype;  // "F32", "BF16", "F16", "I64", ... (any safetensors dtype)
  std::vector<int64_t> shape;
  uint64_t begin = 0;  // byte offsets into the data buffer, end exclusive
  uint64_t end = 0;

  int64_t numel() const;
  bool is_float() const { return dtype == "F32" || dtype == "BF16" || dtype == "F16"; }
  std::string shape_str() const;  // "[8,16]", as Shape::str()
};

// An open, validated safetensors file. The header is parsed and checked on
// open (every entry's dtype, shape and offsets against the real file size), so
// later reads cannot go out of bounds; tensor data is read on demand with
// pread, never the whole file at once. Reads are safe from several threads.
class SafetensorsFile {
 public:
  static SafetensorsFile open(const std::string& path);

  SafetensorsFile(SafetensorsFile&& other) noexcept;
  SafetensorsFile& operator=(SafetensorsFile&& other) noexcept;
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;
  ~SafetensorsFile();

  const std::string& path() const { return path_; }
  const std::vector<SafetensorsEntry>& entries() const { return entries_; }  // in data order
  const SafetensorsEntry* find(const std::string& name) const;               // null if absent
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

  // Tensor as float32 (F32 as is, BF16/F16 converted). Throws hymba::Error
  // naming the file and tensor when it is absent or not a float dtype.
  std::vector<float> read_f32(const std::string& name) const;
  // Same into caller memory; n must equal the tensor's element count.
  void read_into(const std::string& name, float* dst, int64_t n) const;
  // A tensor's bytes in a read-only mapping of the file (mapped on first
  // use, shared by every tensor; the pointer keeps it alive): weights stored
  // in the format they are computed in load without a copy.
  std::shared_ptr<const uint8_t> map_bytes(const std::string& name) const;
  // `bytes` of the data buffer from `begin` mapped copy-on-write (MAP_PRIVATE,
  // readable and writable: writes never reach the file) as floats; null when
  // the range does not start on a page boundary of the file or runs past its
  // end.
  AlignedFloats map_private_floats(uint64_t begin, uint64_t bytes) const;
  // dest holds n floats read from the data buffer at `begin` (read_into).
  // Where the file and dest are page-aligned alike, dest's whole pages are
  // replaced by copy-on-write pages of the file (the range as one does in
  // map_private_floats), a slice at a time and only where the file still
  // holds what dest holds, then dropped from the resident set: values read
  // back from the file until written. Returns the bytes replaced (0 when the
  // alignments differ).
  int64_t share_pages_with_file(uint64_t begin, float* dest, int64_t n) const;

 private:
  SafetensorsFile() = default;
  const SafetensorsEntry& entry(const std::string& name) const;

  std::string path_;
  int fd_ = -1;
  uint64_t data_start_ = 0;  // 8 + header length
  std::vector<SafetensorsEntry> entries_;
  std::unordered_map<std::string, std::size_t> index_;
  std::map<std::string, std::string> metadata_;
  uint64_t file_size_ = 0;
  mutable std::shared_ptr<const uint8_t> mapping_;
};

// A float32 tensor to write: a name, a shape and its contiguous data.
struct NamedTensor {
  std::string name;
  Shape shape;
  const float* data = nullptr;
  // Or raw bytes, stored as dtype U8 of `shape` (numel bytes): weights in a
  // block format (model/held_weights.h).
  const uint8_t* bytes = nullptr;
  // Or bfloat16 values already rounded, stored as dtype BF16 of `shape`
  // (weights a model holds in bf16, model/held_weights.h).
  const uint16_t* bf16 = nullptr;
};

// Writes the tensors (in the order given, stored as `format`) and metadata
// atomically. Narrowing to BF16 / F16 rounds to nearest even; a finite value
// that the format cannot hold (it would round to infinity) is an error naming
// the file, tensor, index and value, raised before anything is written.
// data_alignment: the data buffer starts at a multiple of it in the file
// (the header is padded with spaces, as the reference pads to 8).
void save_safetensors(const std::string& path, const std::vector<NamedTensor>& tensors,
                      const std::map<std::string, std::string>& metadata = {},
                      FloatFormat format = FloatFormat::kF32, uint64_t data_alignment = 8);

// Prefix of the zero F32 tensors save_params_mappable writes where the
// table pads a row (docs/checkpoint-format.md); readers skip them.
inline constexpr const char* kPaddingTensorPrefix = "hymba.padding.";

// Writes every row of an allocated table under its name, in table order.
void save_params(const std::string& path, const ParamTable& table,
                 const std::map<std::string, std::string>& metadata = {},
                 FloatFormat format = FloatFormat::kF32);

// The data alignment of files whose float32 rows are mapped as parameter
// memory (save_params_mappable; held checkpoints' embedding): a page.
inline constexpr uint64_t kMappableDataAlignment = 4096;

// save_params as F32 laid out for map_params: the data buffer starts on a
// 4 KiB boundary of the file and is the table's value block byte for byte,
// each row followed by a zero tensor "hymba.padding.<n>" where the table
// pads it (safetensors allows no gaps between tensors).
void save_params_mappable(const std::string& path, const ParamTable& table,
                          const std::map<std::string, std::string>& metadata = {});

// Loads the table by mapping the file copy-on-write as its value block, no
// copy made, when the file is laid out so (save_params_mappable); returns
// false, the table untouched, when it is not (any other writer's file: then
// use load_params). The file is checked as load_params checks it.
bool map_params(const SafetensorsFile& file, ParamTable& table);

// Fills every row of an allocated table from the file. All names, dtypes and
// shapes are checked before any value is written, and the file must hold no
// tensor the table lacks; the first problem (in table order, then extras in
// file order) is reported in one line naming the file and the tensor. Values
// must be finite (check_finite).
void load_params(const std::string& path, ParamTable& table);
// The same from an open file, leaving the rows named in `elsewhere` (their
// tensors may have any dtype) to the caller.
void load_params(const SafetensorsFile& file, ParamTable& table, const std::set<std::string>& elsewhere);

// hymba::Error naming the file, tensor and first index when `data` holds a NaN
// or an infinity (weights and optimizer moments must be finite to be used).
// data holds the tensor's elements from index `first` on (the error names the tensor's index).
void check_finite(const std::string& path, const std::string& name, const float* data, int64_t n, int64_t first = 0);

}  // namespace hymba
