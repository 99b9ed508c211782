// The GGUF container (llama.cpp's file format, version 2 and 3, little
// endian): a header of typed key/value metadata and tensor descriptions,
// then the tensors' bytes, each at an offset aligned to general.alignment
// (default 32). This file reads and writes the container only; the model
// and tokenizer mappings are formats/gguf_model.h and gguf_tokenizer.h.
//
// The reader parses untrusted input (docs/security.md): every count, length,
// dimension and offset is checked against the bytes actually present before
// anything is allocated, so a hostile file gives one line naming the key or
// tensor, never a crash, a hang or a huge allocation.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace hymba::gguf {

enum class ValueType : uint32_t {
  kU8 = 0, kI8 = 1, kU16 = 2, kI16 = 3, kU32 = 4, kI32 = 5, kF32 = 6, kBool = 7,
  kString = 8, kArray = 9, kU64 = 10, kI64 = 11, kF64 = 12,
};
const char* to_string(ValueType t);

// The tensor types the engine reads and writes (ggml_type numbers).
enum class TensorType : uint32_t { kF32 = 0, kF16 = 1, kQ4_0 = 2, kQ8_0 = 8, kBF16 = 30 };
inline constexpr const char* kSupportedTensorTypes = "F32, F16, BF16, Q8_0, Q4_0";
// "F32", "Q8_0", ...; for numbers the engine does not read, the ggml name
// (e.g. "Q4_K") so refusals can say which type a file uses.
std::string tensor_type_name(uint32_t type);
// Elements per block (1 for float types) and bytes per block.
int64_t block_elements(TensorType t);
int64_t block_bytes(TensorType t);
// Bytes of a row of `n` elements (n a multiple of block_elements).
int64_t row_bytes(TensorType t, int64_t n);

// One metadata value: a scalar, a string or an array of one scalar type or
// of strings (arrays of arrays are refused, as llama.cpp does).
struct Value {
  ValueType type = ValueType::kU32;
  ValueType element_type = ValueType::kU32;  // arrays only
  uint64_t u = 0;    // unsigned integers and bool
  int64_t i = 0;     // signed integers
  double f = 0;      // f32 / f64
  std::string s;     // strings
  std::vector<double> numbers;        // numeric arrays (every 32-bit value exactly)
  std::vector<std::string> strings;   // string arrays

  static Value u32(uint32_t v);
  static Value i32(int32_t v);
  static Value u64(uint64_t v);
  static Value f32(float v);
  static Value boolean(bool v);
  static Value str(std::string v);
  static Value array(ValueType element, std::vector<double> v);
  static Value string_array(std::vector<std::string> v);
};

struct TensorInfo {
  std::string name;
  std::vector<int64_t> dims;  // ggml order: dims[0] is the innermost (row length)
  TensorType type = TensorType::kF32;
  uint64_t offset = 0;  // from the start of the data section
  int64_t numel() const;
  int64_t bytes() const;
};

// A parsed GGUF file, its bytes kept mapped (or borrowed, for a buffer).
class File {
 public:
  // Maps and parses `path`; errors name the file.
  static File open(const std::string& path);
  // Parses bytes in memory (they must outlive the File); `source` names them in errors.
  static File parse(const uint8_t* data, size_t size, const std::string& source);

  const std::string& source() const { return source_; }
  uint32_t version() const { return version_; }
  const std::vector<std::string>& keys() const { return key_order_; }
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo* find_tensor(std::string_view name) const;
  // The bytes of a tensor (checked at parse to lie inside the file).
  const uint8_t* tensor_data(const TensorInfo& t) const { return data_ + data_offset_ + t.offset; }
  // The mapping that keeps tensor_data() alive (null for a borrowed buffer).
  std::shared_ptr<const void> mapping() const { return mapping_; }

  bool has(std::string_view key) const { return values_.count(std::string(key)) != 0; }
  const Value* find(std::string_view key) const;
  // Typed getters: a missing key or a value of another kind is an error naming the key.
  const Value& get(std::string_view key) const;
  uint64_t get_uint(std::string_view key) const;  // any non-negative integer type
  double get_float(std::string_view key) const;   // f32 / f64 (or an integer)
  bool get_bool(std::string_view key) const;
  const std::string& get_string(std::string_view key) const;
  const std::vector<std::string>& get_strings(std::string_view key) const;
  const std::vector<double>& get_numbers(std::string_view key) const;
  // Optional forms: `def` when the key is absent.
  uint64_t get_uint_or(std::string_view key, uint64_t def) const { return has(key) ? get_uint(key) : def; }
  double get_float_or(std::string_view key, double def) const { return has(key) ? get_float(key) : def; }
  bool get_bool_or(std::string_view key, bool def) const { return has(key) ? get_bool(key) : def; }

 private:
  std::string source_;
  std::shared_ptr<void> mapping_;  // owns the mapped file (empty for a borrowed buffer)
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  uint32_t version_ = 0;
  uint64_t data_offset_ = 0;
  std::map<std::string, Value, std::less<>> values_;
  std::vector<std::string> key_order_;
  std::vector<TensorInfo> tensors_;
  std::map<std::string, size_t, std::less<>> tensor_index_;
};

// Collects metadata and tensors, then writes a version 3 file atomically
// (alignment 32). Tensor bytes are produced one tensor at a time by a
// callback, so a model larger than memory's spare room can be written.
class Writer {
 public:
  void set(const std::string& key, Value v);
  bool has(const std::string& key) const;
  // `bytes` fills exactly TensorInfo::bytes() bytes when called.
  using Producer = std::function<void(std::vector<uint8_t>& out)>;
  void add_tensor(const std::string& name, std::vector<int64_t> dims, TensorType type, Producer bytes);
  void write(const std::string& path) const;

 private:
  std::vector<std::pair<std::string, Value>> values_;
  struct Pending {
    TensorInfo info;
    Producer produce;
  };
  std::vector<Pending> tensors_;
};

inline constexpr uint32_t kAlignment = 32;

}  // namespace hymba::gguf
