#include "core/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <tuple>
#include <unordered_set>
#include <utility>

#include "core/atomic_file.h"
#include "core/checked.h"
#include "core/error.h"
#include "core/excerpt.h"
#include "core/params.h"
#include "core/system_memory.h"

namespace hymba {

// Tensor bytes are copied straight between memory and file.
static_assert(std::endian::native == std::endian::little, "safetensors I/O assumes a little-endian host");

namespace {

// The reference implementation refuses headers above 100 MB; a larger length
// means the file is not safetensors (or is corrupt), so we never allocate it.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;

// Bytes per element of every fixed-width safetensors dtype; anything else is
// rejected on open so offsets can always be checked against the shape.
int dtype_size(const std::string& dtype) {
  static const std::map<std::string, int> sizes = {
      {"BOOL", 1}, {"U8", 1},   {"I8", 1},  {"F8_E5M2", 1}, {"F8_E4M3", 1}, {"F8_E8M0", 1}, {"I16", 2}, {"U16", 2},
      {"F16", 2},  {"BF16", 2}, {"I32", 4}, {"U32", 4},     {"F32", 4},     {"I64", 8},     {"U64", 8}, {"F64", 8}};
  auto it = sizes.find(dtype);
  return it == sizes.end() ? 0 : it->second;
}

std::string os_reason(int err) { return std::strerror(err); }

// Reads exactly `bytes` at `offset`. The header check guarantees the range was
// inside the file at open; a short read means the file shrank since.
void pread_exact(int fd, void* dst, uint64_t bytes, uint64_t offset, const std::string& path) {
  auto* out = static_cast<char*>(dst);
  while (bytes > 0) {
    // Linux transfers at most ~2 GiB per call; loop for larger tensors.
    std::size_t chunk = static_cast<std::size_t>(std::min<uint64_t>(bytes, 1u << 30));
    ssize_t got = ::pread(fd, out, chunk, static_cast<off_t>(offset));
    if (got < 0) {
      if (errno == EINTR) continue;
      fail(path, ": read failed: ", os_reason(errno));
    }
    if (got == 0) fail(path, ": unexpected end of file (was it truncated while being read?)");
    out += got;
    bytes -= static_cast<uint64_t>(got);
    offset += static_cast<uint64_t>(got);
  }
}

std::string dims_str(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (std::size_t i = 0; i < dims.size(); ++i) {
    if (i > 0) s.push_back(',');
    s.append(std::to_string(dims[i]));
  }
  s.push_back(']');
  return s;
}

// Parses and checks one header entry against the data buffer size.
SafetensorsEntry parse_entry(const std::string& path, const std::string& name, const nlohmann::json& j,
                             uint64_t data_size) {
  const std::string where = path + ": tensor '" + excerpt(name) + "'";
  HYMBA_CHECK(j.is_object(), where, " in header is not an object");
  SafetensorsEntry e;
  e.name = name;

  auto dt = j.find("dtype");
  HYMBA_CHECK(dt != j.end(), where, " has no \"dtype\" in header");
  HYMBA_CHECK(dt->is_string(), where, " has a non-string \"dtype\"");
  e.dtype = dt->get<std::string>();
  const int esize = dtype_size(e.dtype);
  HYMBA_CHECK(esize > 0, where, " has unknown dtype '", excerpt(e.dtype), "'");

  auto sh = j.find("shape");
  HYMBA_CHECK(sh != j.end(), where, " has no \"shape\" in header");
  HYMBA_CHECK(sh->is_array(), where, " has a \"shape\" that is not an array");
  // numel * esize is tracked in unsigned 64 bits with overflow checks, so an
  // absurd shape can never wrap around into a plausible byte count.
  // The element count must fit int64 too (numel() is signed); a zero
  // dimension makes both counts 0 whatever the other dimensions are.
  HYMBA_CHECK(sh->size() <= 64, where, " has a \"shape\" of ", sh->size(), " dimensions (at most 64)");
  uint64_t bytes = static_cast<uint64_t>(esize);
  int64_t numel = 1;
  bool overflow = false;
  for (const auto& d : *sh) {
    HYMBA_CHECK(d.is_number_unsigned(), where, " has a \"shape\" entry that is not a non-negative integer");
    uint64_t dim = d.get<uint64_t>();
    HYMBA_CHECK(dim <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()), where, " has an absurd dimension ",
                dim);
    e.shape.push_back(static_cast<int64_t>(dim));
    overflow = overflow || __builtin_mul_overflow(bytes, dim, &bytes) ||
               __builtin_mul_overflow(numel, static_cast<int64_t>(dim), &numel);
  }
  if (std::find(e.shape.begin(), e.shape.end(), 0) != e.shape.end()) overflow = false, bytes = 0;
  HYMBA_CHECK(!overflow, where, " has shape ", excerpt(dims_str(e.shape)), " whose size overflows 64-bit integers");

  auto off = j.find("data_offsets");
  HYMBA_CHECK(off != j.end(), where, " has no \"data_offsets\" in header");
  HYMBA_CHECK(off->is_array() && off->size() == 2 && (*off)[0].is_number_unsigned() && (*off)[1].is_number_unsigned(),
              where, " has \"data_offsets\" that are not two non-negative integers");
  e.begin = (*off)[0].get<uint64_t>();
  e.end = (*off)[1].get<uint64_t>();
  HYMBA_CHECK(e.end >= e.begin, where, " has data_offsets [", e.begin, ",", e.end, "] with end before begin");
  HYMBA_CHECK(e.end <= data_size, where, " has data_offsets [", e.begin, ",", e.end, "] past the end of the data (",
              data_size, " bytes); file truncated?");
  HYMBA_CHECK(e.end - e.begin == bytes, where, " has ", e.end - e.begin, " data bytes, but shape ", excerpt(dims_str(e.shape)),
              " of ", e.dtype, " needs ", bytes);
  return e;
}

// A finite value that narrowing would turn into infinity is refused: the
// written file would silently differ from the model.
void check_fits(const std::string& path, const NamedTensor& t, int64_t numel, FloatFormat format) {
  if (format == FloatFormat::kF32 || t.bytes != nullptr || t.bf16 != nullptr) return;
  const float threshold = overflow_threshold(format);
  for (int64_t i = 0; i < numel; ++i) {
    const float v = t.data[i];
    if (std::abs(v) >= threshold && std::isfinite(v))
      fail(path, ": tensor '", t.name, "' holds ", v, " at index ", i, ", beyond the largest finite ",
           torch_dtype_name(format), " (", largest_finite(format), "); store it as f32",
           (format == FloatFormat::kF16 ? " or bf16" : ""));
  }
}

// Writes one tensor's elements as `format`; narrowing goes through a bounded
// staging buffer, so a large tensor needs no second full-size copy.
void write_tensor(std::FILE* f, const std::string& path, const NamedTensor& t, FloatFormat format) {
  const int64_t n = t.shape.numel();
  if (t.bytes != nullptr) {
    write_bytes(f, t.bytes, static_cast<std::size_t>(n), path);
    return;
  }
  if (t.bf16 != nullptr) {
    write_bytes(f, t.bf16, static_cast<std::size_t>(n) * 2, path);
    return;
  }
  if (format == FloatFormat::kF32) {
    write_bytes(f, t.data, static_cast<std::size_t>(n) * sizeof(float), path);
    return;
  }
  uint16_t (*narrow)(float) = format == FloatFormat::kBF16 ? f32_to_bf16 : f32_to_f16;
  std::vector<uint16_t> staged(static_cast<std::size_t>(std::min<int64_t>(n, 1 << 16)));
  for (int64_t done = 0; done < n;) {
    const int64_t count = std::min<int64_t>(n - done, static_cast<int64_t>(staged.size()));
    for (int64_t i = 0; i < count; ++i) staged[static_cast<std::size_t>(i)] = narrow(t.data[done + i]);
    write_bytes(f, staged.data(), static_cast<std::size_t>(count) * 2, path);
    done += count;
  }
}

}  // namespace

int64_t SafetensorsEntry::numel() const {
  // Readers check the product on open; this stays checked for entries built elsewhere.
  // A zero dimension makes the count 0 whatever the others are.
  for (int64_t d : shape)
    if (d == 0) return 0;
  int64_t n = 1;
  for (int64_t d : shape)
    if (__builtin_mul_overflow(n, d, &n)) fail("tensor '", excerpt(name), "' has shape ", excerpt(shape_str()),
                                                " whose element count overflows 64-bit integers");
  return n;
}

std::string SafetensorsEntry::shape_str() const { return dims_str(shape); }

SafetensorsFile::SafetensorsFile(SafetensorsFile&& other) noexcept
    : path_(std::move(other.path_)),
      fd_(std::exchange(other.fd_, -1)),
      data_start_(other.data_start_),
      entries_(std::move(other.entries_)),
      index_(std::move(other.index_)),
      metadata_(std::move(other.metadata_)),
      file_size_(other.file_size_),
      mapping_(std::move(other.mapping_)) {}

SafetensorsFile& SafetensorsFile::operator=(SafetensorsFile&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    path_ = std::move(other.path_);
    fd_ = std::exchange(other.fd_, -1);
    data_start_ = other.data_start_;
    entries_ = std::move(other.entries_);
    index_ = std::move(other.index_);
    metadata_ = std::move(other.metadata_);
    file_size_ = other.file_size_;
    mapping_ = std::move(other.mapping_);
  }
  return *this;
}

SafetensorsFile::~SafetensorsFile() {
  if (fd_ >= 0) ::close(fd_);
}

SafetensorsFile SafetensorsFile::open(const std::string& path) {
  SafetensorsFile file;  // closes the descriptor if any check below throws
  file.path_ = path;
  file.fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (file.fd_ < 0) fail(path, ": cannot open: ", os_reason(errno));
  struct stat st {};
  if (::fstat(file.fd_, &st) != 0) fail(path, ": cannot stat: ", os_reason(errno));
  HYMBA_CHECK(!S_ISDIR(st.st_mode), path, ": is a directory, expected a safetensors file");
  const auto size = static_cast<uint64_t>(st.st_size);
  file.file_size_ = size;

  HYMBA_CHECK(size >= 8, path, ": not a safetensors file: ", size, " bytes is too short for the header length");
  unsigned char len_bytes[8];
  pread_exact(file.fd_, len_bytes, 8, 0, path);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | len_bytes[i];
  HYMBA_CHECK(n <= kMaxHeaderBytes, path, ": header length ", n,
              " bytes exceeds the 100 MB limit; not a safetensors file?");
  HYMBA_CHECK(n <= size - 8, path, ": header length ", n, " bytes runs past the end of the file (", size,
              " bytes); file truncated?");
  file.data_start_ = 8 + n;
  const uint64_t data_size = size - file.data_start_;

  std::string text(static_cast<std::size_t>(n), '\0');
  pread_exact(file.fd_, text.data(), n, 8, path);

  // JSON objects would silently keep only the last of two equal names, so
  // duplicates are caught while parsing.
  std::string duplicate;
  std::unordered_set<std::string> keys;
  auto on_event = [&](int depth, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
    // A header nests three levels ({name: {"shape": [...]}}); anything deeper
    // is refused while parsing, before it can be built.
    if ((event == nlohmann::json::parse_event_t::object_start || event == nlohmann::json::parse_event_t::array_start) &&
        depth > 8)
      fail(path, ": header nests arrays and objects more than 8 levels deep; not a safetensors header");
    if (depth == 1 && event == nlohmann::json::parse_event_t::key && duplicate.empty()) {
      const auto& key = parsed.get_ref<const std::string&>();
      if (!keys.insert(key).second) duplicate = key;
    }
    return true;
  };
  nlohmann::json header = nlohmann::json::parse(text, on_event, /*allow_exceptions=*/false);
  HYMBA_CHECK(!header.is_discarded(), path, ": header is not valid JSON");
  HYMBA_CHECK(header.is_object(), path, ": header is not a JSON object");
  HYMBA_CHECK(duplicate.empty(), path, ": header names tensor '", excerpt(duplicate), "' twice");

  for (const auto& [name, value] : header.items()) {
    if (name == "__metadata__") {
      HYMBA_CHECK(value.is_object(), path, ": header \"__metadata__\" is not an object");
      for (const auto& [key, v] : value.items()) {
        HYMBA_CHECK(v.is_string(), path, ": metadata '", excerpt(key), "' is not a string");
        file.metadata_[key] = v.get<std::string>();
      }
      continue;
    }
    file.entries_.push_back(parse_entry(path, name, value, data_size));
  }

  // The format allows any order in the header; callers get data order.
  std::sort(file.entries_.begin(), file.entries_.end(), [](const SafetensorsEntry& a, const SafetensorsEntry& b) {
    return std::tie(a.begin, a.end, a.name) < std::tie(b.begin, b.end, b.name);
  });
  // Two tensors sharing bytes would load as silent garbage: refuse overlaps
  // (empty tensors hold no bytes and can sit anywhere).
  const SafetensorsEntry* reach = nullptr;  // the non-empty entry ending furthest so far
  for (const SafetensorsEntry& e : file.entries_) {
    if (e.begin == e.end) continue;
    HYMBA_CHECK(reach == nullptr || e.begin >= reach->end, path, ": tensors '", excerpt(reach->name), "' [",
                reach->begin, ",", reach->end, ") and '", excerpt(e.name), "' [", e.begin, ",", e.end,
                ") overlap in the data buffer");
    HYMBA_CHECK(e.begin == (reach == nullptr ? 0 : reach->end), path, ": bytes [",
                reach == nullptr ? 0 : reach->end, ",", e.begin, ") of the data buffer belong to no tensor (before '",
                excerpt(e.name), "'); the header length or data_offsets are wrong");
    reach = &e;
  }
  // The format's rule: the offsets cover the data buffer exactly. A header
  // length that is off (a padded header still parses) shifts every tensor.
  const uint64_t covered = reach == nullptr ? 0 : reach->end;
  HYMBA_CHECK(covered == data_size, path, ": the tensors cover ", covered, " bytes of a ", data_size,
              "-byte data buffer; the header length (", n, " bytes) or data_offsets are wrong");
  for (std::size_t i = 0; i < file.entries_.size(); ++i) file.index_[file.entries_[i].name] = i;
  return file;
}

const SafetensorsEntry* SafetensorsFile::find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &entries_[it->second];
}

const SafetensorsEntry& SafetensorsFile::entry(const std::string& name) const {
  const SafetensorsEntry* e = find(name);
  HYMBA_CHECK(e != nullptr, path_, ": no tensor '", excerpt(name), "'");
  return *e;
}

std::vector<float> SafetensorsFile::read_f32(const std::string& name) const {
  const SafetensorsEntry& e = entry(name);
  std::vector<float> out(static_cast<std::size_t>(e.numel()));
  read_into(name, out.data(), e.numel());
  return out;
}

void SafetensorsFile::read_into(const std::string& name, float* dst, int64_t n) const {
  const SafetensorsEntry& e = entry(name);
  HYMBA_CHECK(e.is_float(), path_, ": tensor '", excerpt(name), "' has dtype ", e.dtype,
              "; only F32, BF16 and F16 can be read as float32");
  HYMBA_CHECK(n == e.numel(), path_, ": tensor '", excerpt(name), "' has ", e.numel(), " elements, expected ", n);
  const uint64_t at = data_start_ + e.begin;
  if (e.dtype == "F32") {
    pread_exact(fd_, dst, e.end - e.begin, at, path_);
    return;
  }
  // Half precision goes through a bounded staging buffer, so converting a
  // large tensor does not need a second full-size copy.
  float (*convert)(uint16_t) = e.dtype == "BF16" ? bf16_to_f32 : f16_to_f32;
  std::vector<uint16_t> staged(static_cast<std::size_t>(std::min<int64_t>(n, 1 << 16)));
  for (int64_t done = 0; done < n;) {
    const int64_t count = std::min<int64_t>(n - done, static_cast<int64_t>(staged.size()));
    pread_exact(fd_, staged.data(), static_cast<uint64_t>(count) * 2, at + static_cast<uint64_t>(done) * 2, path_);
    for (int64_t i = 0; i < count; ++i) dst[done + i] = convert(staged[static_cast<std::size_t>(i)]);
    done += count;
  }
}

std::shared_ptr<const uint8_t> SafetensorsFile::map_bytes(const std::string& name) const {
  const SafetensorsEntry& e = entry(name);
  if (!mapping_) {
    void* p = ::mmap(nullptr, file_size_, PROT_READ, MAP_PRIVATE, fd_, 0);
    if (p == MAP_FAILED) fail(path_, ": cannot map the file: ", os_reason(errno));
    const uint64_t size = file_size_;
    mapping_ = std::shared_ptr<const uint8_t>(static_cast<const uint8_t*>(p),
                                              [size](const uint8_t* q) { ::munmap(const_cast<uint8_t*>(q), size); });
  }
  return std::shared_ptr<const uint8_t>(mapping_, mapping_.get() + data_start_ + e.begin);
}

AlignedFloats SafetensorsFile::map_private_floats(uint64_t begin, uint64_t bytes) const {
  const auto page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  const uint64_t at = data_start_ + begin;
  if (bytes == 0 || at % page != 0 || at > file_size_ || bytes > file_size_ - at) return AlignedFloats(nullptr);
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd_, static_cast<off_t>(at));
  if (p == MAP_FAILED) fail(path_, ": cannot map the file: ", os_reason(errno));
  return AlignedFloats(static_cast<float*>(p), AlignedFree{bytes});
}

int64_t SafetensorsFile::share_pages_with_file(uint64_t begin, float* dest, int64_t n) const {
  const auto page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  const auto addr = reinterpret_cast<uint64_t>(dest);
  const uint64_t bytes = static_cast<uint64_t>(n) * sizeof(float), at = data_start_ + begin;
  if (bytes == 0 || at > file_size_ || bytes > file_size_ - at || addr % page != at % page) return 0;
  const uint64_t skip = (page - addr % page) % page;
  if (bytes <= skip) return 0;
  const uint64_t whole = (bytes - skip) / page * page;
  // Slices keep the moment when both copies are resident short.
  constexpr uint64_t kSlice = uint64_t{16} << 20;
  int64_t shared = 0;
  for (uint64_t done = 0; done < whole;) {
    const uint64_t len = std::min(kSlice, whole - done);
    char* target = reinterpret_cast<char*>(addr + skip + done);
    void* file_pages =
        ::mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd_, static_cast<off_t>(at + skip + done));
    if (file_pages == MAP_FAILED) break;
    // The file may have changed since it was read: keep what was read then.
    if (std::memcmp(file_pages, target, len) != 0 ||
        ::mremap(file_pages, len, len, MREMAP_MAYMOVE | MREMAP_FIXED, target) == MAP_FAILED) {
      ::munmap(file_pages, len);
      break;
    }
    release_mapped_pages(target, static_cast<int64_t>(len));
    shared += static_cast<int64_t>(len);
    done += len;
  }
  return shared;
}

void save_safetensors(const std::string& path, const std::vector<NamedTensor>& tensors,
                      const std::map<std::string, std::string>& metadata, FloatFormat format,
                      uint64_t data_alignment) {
  const int esize = bytes_per_element(format);
  // ordered_json keeps insertion order: "__metadata__" first, then tensors in
  // data order, each as {"dtype","shape","data_offsets"}, like the reference.
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) {
    nlohmann::ordered_json meta = nlohmann::ordered_json::object();
    for (const auto& [key, value] : metadata) meta[key] = value;
    header["__metadata__"] = std::move(meta);
  }
  uint64_t offset = 0;
  for (const NamedTensor& t : tensors) {
    HYMBA_CHECK(!t.name.empty(), path, ": cannot save a tensor with an empty name");
    HYMBA_CHECK(t.name != "__metadata__", path, ": '__metadata__' is reserved and cannot name a tensor");
    HYMBA_CHECK(!header.contains(t.name), path, ": tensor '", t.name, "' given twice");
    nlohmann::ordered_json dims = nlohmann::ordered_json::array();
    for (int i = 0; i < t.shape.rank; ++i) {
      HYMBA_CHECK(t.shape[i] >= 0, path, ": tensor '", t.name, "' has negative dim in ", t.shape.str());
      dims.push_back(t.shape[i]);
    }
    int64_t numel = 1;
    for (int i = 0; i < t.shape.rank; ++i) numel = checked_mul(numel, t.shape[i], path + ": size of tensor '" + t.name + "'");
    const int tsize = t.bytes != nullptr ? 1 : t.bf16 != nullptr ? 2 : esize;
    const auto bytes = static_cast<uint64_t>(checked_mul(numel, tsize, path + ": bytes of tensor '" + t.name + "'"));
    HYMBA_CHECK(bytes == 0 || t.data != nullptr || t.bytes != nullptr || t.bf16 != nullptr, path, ": tensor '",
                t.name, "' has no data");
    check_fits(path, t, numel, format);
    nlohmann::ordered_json e = nlohmann::ordered_json::object();
    e["dtype"] = t.bytes != nullptr  ? std::string("U8")
                 : t.bf16 != nullptr ? std::string("BF16")
                                     : std::string(safetensors_dtype(format));
    e["shape"] = std::move(dims);
    e["data_offsets"] = nlohmann::ordered_json::array({offset, offset + bytes});
    header[t.name] = std::move(e);
    offset += bytes;
  }

  std::string text;
  try {
    text = header.dump();
  } catch (const nlohmann::json::exception&) {
    fail(path, ": tensor names and metadata must be valid UTF-8");
  }
  // Padding keeps the data buffer aligned in the file (8 bytes, or a page
  // for files mapped as a parameter block).
  HYMBA_CHECK(data_alignment >= 8 && data_alignment % 8 == 0, path, ": data alignment ", data_alignment,
              " is not a multiple of 8");
  text.append((data_alignment - (8 + text.size()) % data_alignment) % data_alignment, ' ');

  write_file_atomic(path, [&](std::FILE* f) {
    unsigned char len_bytes[8];
    uint64_t n = text.size();
    for (int i = 0; i < 8; ++i) len_bytes[i] = static_cast<unsigned char>(n >> (8 * i));
    write_bytes(f, len_bytes, 8, path);
    write_bytes(f, text.data(), text.size(), path);
    for (const NamedTensor& t : tensors) write_tensor(f, path, t, format);
  });
}

void save_params(const std::string& path, const ParamTable& table, const std::map<std::string, std::string>& metadata,
                 FloatFormat format) {
  HYMBA_CHECK(table.values_block() != nullptr || table.rows().empty(), path,
              ": cannot save parameters before they are allocated");
  std::vector<NamedTensor> tensors;
  tensors.reserve(table.rows().size());
  table.for_each([&](const ParamInfo& info, const float* value) { tensors.push_back({info.name, info.shape, value}); });
  save_safetensors(path, tensors, metadata, format);
}

void load_params(const std::string& path, ParamTable& table) {
  load_params(SafetensorsFile::open(path), table, {});
}

void save_params_mappable(const std::string& path, const ParamTable& table,
                          const std::map<std::string, std::string>& metadata) {
  HYMBA_CHECK(table.values_block() != nullptr || table.rows().empty(), path,
              ": cannot save parameters before they are allocated");
  const std::vector<ParamInfo>& rows = table.rows();
  // The floats between a row's end and the next row's start (or the block's end).
  std::vector<int64_t> pad(rows.size());
  for (size_t i = 0; i < rows.size(); ++i)
    pad[i] = (i + 1 < rows.size() ? rows[i + 1].offset : table.total_floats()) - rows[i].offset -
             rows[i].shape.numel();
  const std::vector<float> zeros(static_cast<size_t>(pad.empty() ? 0 : *std::max_element(pad.begin(), pad.end())));
  std::vector<NamedTensor> tensors;
  int64_t pads = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    tensors.push_back({rows[i].name, rows[i].shape, table.values_block() + rows[i].offset});
    if (pad[i] > 0) tensors.push_back({kPaddingTensorPrefix + std::to_string(pads++), Shape({pad[i]}), zeros.data()});
  }
  save_safetensors(path, tensors, metadata, FloatFormat::kF32, kMappableDataAlignment);
}

namespace {

bool is_padding(const std::string& name) { return name.rfind(kPaddingTensorPrefix, 0) == 0; }

// Every name, dtype and shape, before any value is written, so a bad
// checkpoint leaves the table as it was.
void check_params_file(const SafetensorsFile& file, const ParamTable& table, const std::set<std::string>& elsewhere) {
  const std::string& path = file.path();
  HYMBA_CHECK(table.values_block() != nullptr || table.rows().empty(), path,
              ": cannot load parameters before they are allocated");
  for (const ParamInfo& p : table.rows()) {
    if (elsewhere.count(p.name) != 0) continue;
    const SafetensorsEntry* e = file.find(p.name);
    HYMBA_CHECK(e != nullptr, path, ": tensor '", p.name, "' is missing");
    HYMBA_CHECK(e->is_float(), path, ": tensor '", p.name, "' has dtype ", e->dtype, ", expected F32, BF16 or F16");
    bool same = static_cast<int>(e->shape.size()) == p.shape.rank;
    for (int i = 0; same && i < p.shape.rank; ++i) same = e->shape[static_cast<std::size_t>(i)] == p.shape[i];
    HYMBA_CHECK(same, path, ": tensor '", p.name, "' has shape ", excerpt(e->shape_str()), ", expected ",
                p.shape.str());
  }
  for (const SafetensorsEntry& e : file.entries())
    HYMBA_CHECK(table.contains(e.name) || is_padding(e.name), path, ": unexpected tensor '", excerpt(e.name),
                "' (not a parameter of this model)");
}

}  // namespace

bool map_params(const SafetensorsFile& file, ParamTable& table) {
  check_params_file(file, table, {});
  for (const ParamInfo& p : table.rows()) {
    const SafetensorsEntry* e = file.find(p.name);
    if (e->dtype != "F32" || e->begin != static_cast<uint64_t>(p.offset) * sizeof(float)) return false;
  }
  AlignedFloats block = file.map_private_floats(0, static_cast<uint64_t>(table.total_floats()) * sizeof(float));
  if (!block) return false;
  // The check reads every page of the file; each slice's pages leave the
  // resident set again once checked (nothing has written them: they read
  // back from the file), so loading costs no more memory than a slice, and a
  // decoder that multiplies by blocks made from these rows never makes them
  // all resident at once (issue 40: TinyLlama-1.1B under --weights q4 peaked
  // at the whole 4.4 GB file).
  constexpr int64_t kSliceFloats = int64_t{4} << 20;
  for (const ParamInfo& p : table.rows())
    for (int64_t done = 0; done < p.shape.numel(); done += kSliceFloats) {
      const int64_t n = std::min(kSliceFloats, p.shape.numel() - done);
      const float* slice = block.get() + p.offset + done;
      check_finite(file.path(), p.name, slice, n, done);
      release_mapped_pages(slice, n * int64_t{sizeof(float)});
    }
  table.adopt_values(std::move(block));
  return true;
}

void load_params(const SafetensorsFile& file, ParamTable& table, const std::set<std::string>& elsewhere) {
  const std::string& path = file.path();
  check_params_file(file, table, elsewhere);
  table.for_each([&](ParamSlot& slot) {
    if (elsewhere.count(slot.info.name) != 0) return;
    file.read_into(slot.info.name, slot.value, slot.numel());
    check_finite(path, slot.info.name, slot.value, slot.numel());
  });
}

void check_finite(const std::string& path, const std::string& name, const float* data, int64_t n, int64_t first) {
  for (int64_t i = 0; i < n; ++i)
    if (!std::isfinite(data[i]))
      fail(path, ": tensor '", name, "' holds ", data[i], " at index ", first + i,
           "; the checkpoint is corrupt or diverged");
}

}  // namespace hymba
