#include "formats/gguf.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>

#include "core/atomic_file.h"
#include "core/checked.h"
#include "core/error.h"
#include "core/excerpt.h"

namespace hymba::gguf {

static_assert(std::endian::native == std::endian::little, "GGUF I/O assumes a little-endian host");

namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" read as a little-endian u32
// ggml's GGML_MAX_DIMS; names longer than ggml's 64 bytes are refused too.
constexpr uint32_t kMaxDims = 4;
constexpr uint64_t kMaxNameBytes = 64;
// Keys and strings in metadata: a tokenizer's merges are short, a chat
// template a few kB; 16 MiB bounds a single string far above both.
constexpr uint64_t kMaxStringBytes = uint64_t{16} << 20;

const char* ggml_type_name(uint32_t t) {
  static const char* const names[] = {"F32",  "F16",  "Q4_0", "Q4_1", "Q4_2 (removed)", "Q4_3 (removed)",
                                      "Q5_0", "Q5_1", "Q8_0", "Q8_1", "Q2_K",           "Q3_K",
                                      "Q4_K", "Q5_K", "Q6_K", "Q8_K", "IQ2_XXS",        "IQ2_XS",
                                      "IQ3_XXS", "IQ1_S", "IQ4_NL", "IQ3_S", "IQ2_S",   "IQ4_XS",
                                      "I8",   "I16",  "I32",  "I64",  "F64",            "IQ1_M",
                                      "BF16", "Q4_0_4_4", "Q4_0_4_8", "Q4_0_8_8", "TQ1_0", "TQ2_0",
                                      "IQ4_NL_4_4", "IQ4_NL_4_8", "IQ4_NL_8_8", "MXFP4"};
  return t < std::size(names) ? names[t] : nullptr;
}

bool is_supported(uint32_t t) {
  return t == 0 || t == 1 || t == 2 || t == 8 || t == 30;
}

// Reads little-endian values from [data, data + size), each read checked
// against what is left; errors name the source and what was being read.
class Cursor {
 public:
  Cursor(const uint8_t* data, size_t size, const std::string& source) : data_(data), size_(size), source_(source) {}
  uint64_t pos() const { return pos_; }
  uint64_t left() const { return size_ - pos_; }

  void need(uint64_t bytes, const std::string& what) const {
    HYMBA_CHECK(bytes <= left(), source_, ": truncated header: ", what, " needs ", bytes, " bytes at offset ", pos_,
                " but the file has ", left(), " left");
  }
  template <typename T>
  T read(const std::string& what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, data_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  std::string read_string(const std::string& what, uint64_t max_bytes = kMaxStringBytes) {
    const uint64_t n = read<uint64_t>(what + " length");
    HYMBA_CHECK(n <= max_bytes, source_, ": ", what, " is ", n, " bytes long (at most ", max_bytes, ")");
    need(n, what);
    std::string s(reinterpret_cast<const char*>(data_ + pos_), static_cast<size_t>(n));
    pos_ += n;
    return s;
  }

 private:
  const uint8_t* data_;
  uint64_t size_;
  uint64_t pos_ = 0;
  const std::string& source_;
};

int scalar_size(ValueType t) {
  switch (t) {
    case ValueType::kU8: case ValueType::kI8: case ValueType::kBool: return 1;
    case ValueType::kU16: case ValueType::kI16: return 2;
    case ValueType::kU32: case ValueType::kI32: case ValueType::kF32: return 4;
    case ValueType::kU64: case ValueType::kI64: case ValueType::kF64: return 8;
    default: return 0;
  }
}

bool valid_type(uint32_t t) { return t <= static_cast<uint32_t>(ValueType::kF64); }

// One scalar of type t into v (v.u, v.i or v.f).
void read_scalar(Cursor& c, ValueType t, Value& v, const std::string& what, const std::string& source) {
  switch (t) {
    case ValueType::kU8: v.u = c.read<uint8_t>(what); break;
    case ValueType::kI8: v.i = c.read<int8_t>(what); break;
    case ValueType::kU16: v.u = c.read<uint16_t>(what); break;
    case ValueType::kI16: v.i = c.read<int16_t>(what); break;
    case ValueType::kU32: v.u = c.read<uint32_t>(what); break;
    case ValueType::kI32: v.i = c.read<int32_t>(what); break;
    case ValueType::kU64: v.u = c.read<uint64_t>(what); break;
    case ValueType::kI64: v.i = c.read<int64_t>(what); break;
    case ValueType::kF32: v.f = c.read<float>(what); break;
    case ValueType::kF64: v.f = c.read<double>(what); break;
    case ValueType::kBool: {
      const uint8_t b = c.read<uint8_t>(what);
      HYMBA_CHECK(b <= 1, source, ": ", what, " is a bool of value ", int{b}, " (0 or 1)");
      v.u = b;
      break;
    }
    default: fail(source, ": ", what, " has no scalar type");
  }
}

double as_number(ValueType t, const Value& v) {
  switch (t) {
    case ValueType::kF32: case ValueType::kF64: return v.f;
    case ValueType::kI8: case ValueType::kI16: case ValueType::kI32: case ValueType::kI64:
      return static_cast<double>(v.i);
    default: return static_cast<double>(v.u);
  }
}

Value read_value(Cursor& c, ValueType t, const std::string& key, const std::string& source) {
  Value v;
  v.type = t;
  const std::string what = "value of key '" + excerpt(key, 80) + "'";
  if (t == ValueType::kString) {
    v.s = c.read_string(what);
  } else if (t == ValueType::kArray) {
    const uint32_t et = c.read<uint32_t>(what + " element type");
    HYMBA_CHECK(valid_type(et), source, ": key '", excerpt(key, 80), "' has an array of unknown type ", et);
    v.element_type = static_cast<ValueType>(et);
    HYMBA_CHECK(v.element_type != ValueType::kArray, source, ": key '", excerpt(key, 80),
                "' holds an array of arrays, which GGUF readers do not support");
    const uint64_t n = c.read<uint64_t>(what + " count");
    // Every element takes at least this many bytes: a count past the file is refused before allocating.
    const uint64_t min_bytes = v.element_type == ValueType::kString ? 8 : scalar_size(v.element_type);
    HYMBA_CHECK(n <= c.left() / min_bytes, source, ": key '", excerpt(key, 80), "' claims ", n,
                " array elements but only ", c.left(), " bytes are left in the file");
    if (v.element_type == ValueType::kString) {
      v.strings.reserve(static_cast<size_t>(n));
      for (uint64_t k = 0; k < n; ++k) v.strings.push_back(c.read_string(what + " element " + std::to_string(k)));
    } else {
      v.numbers.reserve(static_cast<size_t>(n));
      Value e;
      for (uint64_t k = 0; k < n; ++k) {
        read_scalar(c, v.element_type, e, what, source);
        v.numbers.push_back(as_number(v.element_type, e));
      }
    }
  } else {
    read_scalar(c, t, v, what, source);
  }
  return v;
}

bool is_integer(ValueType t) {
  return t == ValueType::kU8 || t == ValueType::kI8 || t == ValueType::kU16 || t == ValueType::kI16 ||
         t == ValueType::kU32 || t == ValueType::kI32 || t == ValueType::kU64 || t == ValueType::kI64;
}

uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

}  // namespace

const char* to_string(ValueType t) {
  static const char* const names[] = {"u8", "i8",     "u16",   "i16", "u32", "i32", "f32",
                                      "bool", "string", "array", "u64", "i64", "f64"};
  const auto i = static_cast<uint32_t>(t);
  return i < std::size(names) ? names[i] : "unknown";
}

std::string tensor_type_name(uint32_t type) {
  const char* n = ggml_type_name(type);
  return n != nullptr ? n : "type " + std::to_string(type);
}

int64_t block_elements(TensorType t) { return t == TensorType::kQ4_0 || t == TensorType::kQ8_0 ? 32 : 1; }

int64_t block_bytes(TensorType t) {
  switch (t) {
    case TensorType::kF32: return 4;
    case TensorType::kF16: case TensorType::kBF16: return 2;
    case TensorType::kQ4_0: return 18;
    case TensorType::kQ8_0: return 34;
  }
  return 0;
}

int64_t row_bytes(TensorType t, int64_t n) { return n / block_elements(t) * block_bytes(t); }

Value Value::u32(uint32_t v) { Value x; x.type = ValueType::kU32; x.u = v; return x; }
Value Value::i32(int32_t v) { Value x; x.type = ValueType::kI32; x.i = v; return x; }
Value Value::u64(uint64_t v) { Value x; x.type = ValueType::kU64; x.u = v; return x; }
Value Value::f32(float v) { Value x; x.type = ValueType::kF32; x.f = v; return x; }
Value Value::boolean(bool v) { Value x; x.type = ValueType::kBool; x.u = v ? 1 : 0; return x; }
Value Value::str(std::string v) { Value x; x.type = ValueType::kString; x.s = std::move(v); return x; }
Value Value::array(ValueType element, std::vector<double> v) {
  Value x;
  x.type = ValueType::kArray;
  x.element_type = element;
  x.numbers = std::move(v);
  return x;
}
Value Value::string_array(std::vector<std::string> v) {
  Value x;
  x.type = ValueType::kArray;
  x.element_type = ValueType::kString;
  x.strings = std::move(v);
  return x;
}

int64_t TensorInfo::numel() const {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;  // checked at parse
  return n;
}
int64_t TensorInfo::bytes() const { return numel() / block_elements(type) * block_bytes(type); }

File File::open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  HYMBA_CHECK(fd >= 0, excerpt(path, 300), ": cannot open (", std::strerror(errno), ")");
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    fail(excerpt(path, 300), ": not a regular file");
  }
  const auto size = static_cast<size_t>(st.st_size);
  if (size == 0) {
    ::close(fd);
    fail(excerpt(path, 300), ": empty file, not GGUF");
  }
  void* p = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  HYMBA_CHECK(p != MAP_FAILED, excerpt(path, 300), ": cannot map (", std::strerror(errno), ")");
  std::shared_ptr<void> mapping(p, [size](void* q) { ::munmap(q, size); });
  File f = parse(static_cast<const uint8_t*>(p), size, path);
  f.mapping_ = std::move(mapping);
  return f;
}

File File::parse(const uint8_t* data, size_t size, const std::string& source) {
  File f;
  f.source_ = source;
  f.data_ = data;
  f.size_ = size;
  Cursor c(data, size, f.source_);
  const std::string& src = f.source_;
  HYMBA_CHECK(size >= 4 && c.read<uint32_t>("magic") == kMagic, src, ": not a GGUF file (the magic is not \"GGUF\")");
  f.version_ = c.read<uint32_t>("version");
  HYMBA_CHECK(f.version_ == 2 || f.version_ == 3, src, ": GGUF version ", f.version_,
              " is not supported (2 or 3; version 1 files predate 64-bit counts, a byte-swapped version means a "
              "big-endian file)");
  const uint64_t n_tensors = c.read<uint64_t>("tensor count");
  const uint64_t n_kv = c.read<uint64_t>("metadata count");
  // A key/value takes at least 13 bytes (length, type, one byte) and a tensor 32.
  HYMBA_CHECK(n_kv <= c.left() / 13, src, ": claims ", n_kv, " metadata entries but only ", c.left(),
              " bytes follow");
  HYMBA_CHECK(n_tensors <= c.left() / 32, src, ": claims ", n_tensors, " tensors but only ", c.left(),
              " bytes follow");
  for (uint64_t k = 0; k < n_kv; ++k) {
    std::string key = c.read_string("metadata key " + std::to_string(k), 65535);
    HYMBA_CHECK(!key.empty(), src, ": metadata key ", k, " is empty");
    const uint32_t t = c.read<uint32_t>("type of key '" + excerpt(key, 80) + "'");
    HYMBA_CHECK(valid_type(t), src, ": key '", excerpt(key, 80), "' has unknown value type ", t);
    HYMBA_CHECK(f.values_.count(key) == 0, src, ": duplicate metadata key '", excerpt(key, 80), "'");
    Value v = read_value(c, static_cast<ValueType>(t), key, src);
    f.key_order_.push_back(key);
    f.values_.emplace(std::move(key), std::move(v));
  }
  uint64_t alignment = kAlignment;
  if (const Value* a = f.find("general.alignment")) {
    HYMBA_CHECK(a->type == ValueType::kU32 && a->u > 0 && (a->u & (a->u - 1)) == 0, src,
                ": key 'general.alignment' must be a u32 power of two");
    alignment = a->u;
  }
  f.tensors_.reserve(static_cast<size_t>(n_tensors));
  for (uint64_t k = 0; k < n_tensors; ++k) {
    TensorInfo t;
    t.name = c.read_string("name of tensor " + std::to_string(k), kMaxNameBytes);
    const std::string tn = "tensor '" + excerpt(t.name, 80) + "'";
    HYMBA_CHECK(!t.name.empty(), src, ": tensor ", k, " has an empty name");
    HYMBA_CHECK(f.tensor_index_.count(t.name) == 0, src, ": duplicate ", tn);
    const uint32_t nd = c.read<uint32_t>("dimension count of " + tn);
    HYMBA_CHECK(nd >= 1 && nd <= kMaxDims, src, ": ", tn, " has ", nd, " dimensions (1 to ", kMaxDims, ")");
    int64_t numel = 1;
    for (uint32_t d = 0; d < nd; ++d) {
      const uint64_t n = c.read<uint64_t>("dimension of " + tn);
      HYMBA_CHECK(n >= 1 && n <= (uint64_t{1} << 40), src, ": ", tn, " has dimension ", d, " of size ", n);
      t.dims.push_back(static_cast<int64_t>(n));
      numel = checked_mul(numel, static_cast<int64_t>(n), src + ": " + tn + " element count");
    }
    const uint32_t type = c.read<uint32_t>("type of " + tn);
    HYMBA_CHECK(is_supported(type), src, ": ", tn, " has type ", tensor_type_name(type),
                ", which the engine does not read (supported: ", kSupportedTensorTypes, ")");
    t.type = static_cast<TensorType>(type);
    HYMBA_CHECK(t.dims[0] % block_elements(t.type) == 0, src, ": ", tn, " is ", tensor_type_name(type),
                " but its rows of ", t.dims[0], " elements are not whole blocks of ", block_elements(t.type));
    checked_mul(numel / block_elements(t.type), block_bytes(t.type), src + ": " + tn + " byte size");
    t.offset = c.read<uint64_t>("offset of " + tn);
    HYMBA_CHECK(t.offset % alignment == 0, src, ": ", tn, " starts at data offset ", t.offset,
                ", not a multiple of the alignment ", alignment);
    f.tensor_index_.emplace(t.name, f.tensors_.size());
    f.tensors_.push_back(std::move(t));
  }
  f.data_offset_ = align_up(c.pos(), alignment);
  HYMBA_CHECK(f.data_offset_ <= size || f.tensors_.empty(), src, ": truncated: the data section would start at byte ",
              f.data_offset_, " of a ", size, "-byte file");
  const uint64_t data_bytes = size >= f.data_offset_ ? size - f.data_offset_ : 0;
  // Each tensor inside the data section, and no two overlapping.
  std::vector<std::pair<uint64_t, size_t>> by_offset;
  for (size_t k = 0; k < f.tensors_.size(); ++k) {
    const TensorInfo& t = f.tensors_[k];
    const auto bytes = static_cast<uint64_t>(t.bytes());
    HYMBA_CHECK(t.offset <= data_bytes && bytes <= data_bytes - t.offset, src, ": tensor '", excerpt(t.name, 80),
                "' (", tensor_type_name(static_cast<uint32_t>(t.type)), ", ", bytes, " bytes at data offset ",
                t.offset, ") runs past the end of the file (", data_bytes, " data bytes)");
    by_offset.emplace_back(t.offset, k);
  }
  std::sort(by_offset.begin(), by_offset.end());
  for (size_t k = 1; k < by_offset.size(); ++k) {
    const TensorInfo& prev = f.tensors_[by_offset[k - 1].second];
    HYMBA_CHECK(prev.offset + static_cast<uint64_t>(prev.bytes()) <= by_offset[k].first, src, ": tensors '",
                excerpt(prev.name, 80), "' and '", excerpt(f.tensors_[by_offset[k].second].name, 80), "' overlap");
  }
  return f;
}

const TensorInfo* File::find_tensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

const Value* File::find(std::string_view key) const {
  auto it = values_.find(key);
  return it == values_.end() ? nullptr : &it->second;
}

const Value& File::get(std::string_view key) const {
  const Value* v = find(key);
  HYMBA_CHECK(v != nullptr, source_, ": missing metadata key '", key, "'");
  return *v;
}

uint64_t File::get_uint(std::string_view key) const {
  const Value& v = get(key);
  HYMBA_CHECK(is_integer(v.type), source_, ": key '", key, "' is ", to_string(v.type), ", expected an integer");
  const bool is_signed = v.type == ValueType::kI8 || v.type == ValueType::kI16 || v.type == ValueType::kI32 ||
                         v.type == ValueType::kI64;
  HYMBA_CHECK(!is_signed || v.i >= 0, source_, ": key '", key, "' is negative (", v.i, ")");
  return is_signed ? static_cast<uint64_t>(v.i) : v.u;
}

double File::get_float(std::string_view key) const {
  const Value& v = get(key);
  HYMBA_CHECK(v.type == ValueType::kF32 || v.type == ValueType::kF64 || is_integer(v.type), source_, ": key '", key,
              "' is ", to_string(v.type), ", expected a number");
  return as_number(v.type, v);
}

bool File::get_bool(std::string_view key) const {
  const Value& v = get(key);
  HYMBA_CHECK(v.type == ValueType::kBool, source_, ": key '", key, "' is ", to_string(v.type), ", expected a bool");
  return v.u != 0;
}

const std::string& File::get_string(std::string_view key) const {
  const Value& v = get(key);
  HYMBA_CHECK(v.type == ValueType::kString, source_, ": key '", key, "' is ", to_string(v.type),
              ", expected a string");
  return v.s;
}

const std::vector<std::string>& File::get_strings(std::string_view key) const {
  const Value& v = get(key);
  HYMBA_CHECK(v.type == ValueType::kArray && v.element_type == ValueType::kString, source_, ": key '", key,
              "' is not an array of strings");
  return v.strings;
}

const std::vector<double>& File::get_numbers(std::string_view key) const {
  const Value& v = get(key);
  HYMBA_CHECK(v.type == ValueType::kArray && v.element_type != ValueType::kString, source_, ": key '", key,
              "' is not an array of numbers");
  return v.numbers;
}

// ---- writer

void Writer::set(const std::string& key, Value v) {
  for (auto& kv : values_)
    if (kv.first == key) {
      kv.second = std::move(v);
      return;
    }
  values_.emplace_back(key, std::move(v));
}

bool Writer::has(const std::string& key) const {
  for (const auto& kv : values_)
    if (kv.first == key) return true;
  return false;
}

void Writer::add_tensor(const std::string& name, std::vector<int64_t> dims, TensorType type, Producer bytes) {
  HYMBA_CHECK(!name.empty() && name.size() <= kMaxNameBytes, "GGUF tensor name '", name, "' must be 1 to ",
              kMaxNameBytes, " bytes");
  HYMBA_CHECK(!dims.empty() && dims.size() <= kMaxDims && dims[0] % block_elements(type) == 0, "GGUF tensor '", name,
              "': bad shape for ", tensor_type_name(static_cast<uint32_t>(type)));
  Pending p;
  p.info.name = name;
  p.info.dims = std::move(dims);
  p.info.type = type;
  p.produce = std::move(bytes);
  tensors_.push_back(std::move(p));
}

namespace {

void put_string(std::string& out, const std::string& s) {
  const uint64_t n = s.size();
  out.append(reinterpret_cast<const char*>(&n), 8);
  out += s;
}

template <typename T>
void put(std::string& out, T v) {
  out.append(reinterpret_cast<const char*>(&v), sizeof(T));
}

void put_scalar(std::string& out, ValueType t, double number, const Value& v) {
  switch (t) {
    case ValueType::kU8: put<uint8_t>(out, static_cast<uint8_t>(number)); break;
    case ValueType::kI8: put<int8_t>(out, static_cast<int8_t>(number)); break;
    case ValueType::kU16: put<uint16_t>(out, static_cast<uint16_t>(number)); break;
    case ValueType::kI16: put<int16_t>(out, static_cast<int16_t>(number)); break;
    case ValueType::kU32: put<uint32_t>(out, static_cast<uint32_t>(number)); break;
    case ValueType::kI32: put<int32_t>(out, static_cast<int32_t>(number)); break;
    case ValueType::kF32: put<float>(out, static_cast<float>(number)); break;
    case ValueType::kBool: put<uint8_t>(out, number != 0 ? 1 : 0); break;
    case ValueType::kU64: put<uint64_t>(out, v.type == t ? v.u : static_cast<uint64_t>(number)); break;
    case ValueType::kI64: put<int64_t>(out, v.type == t ? v.i : static_cast<int64_t>(number)); break;
    case ValueType::kF64: put<double>(out, number); break;
    default: fail("GGUF writer: value type ", to_string(t), " is not a scalar");
  }
}

}  // namespace

void Writer::write(const std::string& path) const {
  std::string header;
  put<uint32_t>(header, kMagic);
  put<uint32_t>(header, 3);
  put<uint64_t>(header, tensors_.size());
  put<uint64_t>(header, values_.size());
  for (const auto& [key, v] : values_) {
    put_string(header, key);
    put<uint32_t>(header, static_cast<uint32_t>(v.type));
    if (v.type == ValueType::kString) {
      put_string(header, v.s);
    } else if (v.type == ValueType::kArray) {
      put<uint32_t>(header, static_cast<uint32_t>(v.element_type));
      if (v.element_type == ValueType::kString) {
        put<uint64_t>(header, v.strings.size());
        for (const std::string& s : v.strings) put_string(header, s);
      } else {
        put<uint64_t>(header, v.numbers.size());
        for (double x : v.numbers) put_scalar(header, v.element_type, x, Value{});
      }
    } else {
      put_scalar(header, v.type, as_number(v.type, v), v);
    }
  }
  uint64_t offset = 0;
  for (const Pending& p : tensors_) {
    put_string(header, p.info.name);
    put<uint32_t>(header, static_cast<uint32_t>(p.info.dims.size()));
    for (int64_t d : p.info.dims) put<uint64_t>(header, static_cast<uint64_t>(d));
    put<uint32_t>(header, static_cast<uint32_t>(p.info.type));
    put<uint64_t>(header, offset);
    offset = align_up(offset + static_cast<uint64_t>(p.info.bytes()), kAlignment);
  }
  header.resize(align_up(header.size(), kAlignment), '\0');
  write_file_atomic(path, [&](std::FILE* out) {
    write_bytes(out, header.data(), header.size(), path);
    std::vector<uint8_t> bytes;
    const char zeros[kAlignment] = {};
    for (const Pending& p : tensors_) {
      bytes.clear();
      p.produce(bytes);
      HYMBA_CHECK(static_cast<int64_t>(bytes.size()) == p.info.bytes(), "GGUF writer: tensor '", p.info.name,
                  "' produced ", bytes.size(), " bytes, expected ", p.info.bytes());
      write_bytes(out, bytes.data(), bytes.size(), path);
      const uint64_t pad = align_up(bytes.size(), kAlignment) - bytes.size();
      if (pad > 0) write_bytes(out, zeros, pad, path);
    }
  });
}

}  // namespace hymba::gguf
