#include "formats/torch_checkpoint.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <utility>

#include "core/error.h"
#include "core/excerpt.h"
#include "core/float_formats.h"

namespace hymba {

namespace {

void pread_all(int fd, void* dst, uint64_t bytes, uint64_t offset, const std::string& path) {
  auto* out = static_cast<char*>(dst);
  while (bytes > 0) {
    const ssize_t got = ::pread(fd, out, bytes, static_cast<off_t>(offset));
    if (got < 0 && errno == EINTR) continue;
    HYMBA_CHECK(got > 0, path, ": read failed at byte ", offset, got < 0 ? std::string(": ") + std::strerror(errno) : "");
    out += got;
    bytes -= static_cast<uint64_t>(got);
    offset += static_cast<uint64_t>(got);
  }
}

uint64_t le(const uint8_t* p, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

// ------------------------------------------------------------------ zip

struct ZipEntry {
  uint64_t data_offset = 0, size = 0;
};

// The stored entries of a zip file by name (torch writes them uncompressed).
std::map<std::string, ZipEntry> read_zip_directory(int fd, uint64_t file_size, const std::string& path) {
  // End of central directory: within the last 64 KiB + 22 bytes.
  const uint64_t tail = std::min<uint64_t>(file_size, 65557);
  std::vector<uint8_t> buf(tail);
  pread_all(fd, buf.data(), tail, file_size - tail, path);
  int64_t eocd = -1;
  for (int64_t i = static_cast<int64_t>(tail) - 22; i >= 0; --i)
    if (le(&buf[static_cast<size_t>(i)], 4) == 0x06054b50) {
      eocd = i;
      break;
    }
  HYMBA_CHECK(eocd >= 0, path, ": not a zip file (a torch.save file from torch < 1.6 is not supported; resave it "
              "with a newer torch or convert it to safetensors)");
  const uint8_t* e = &buf[static_cast<size_t>(eocd)];
  uint64_t count = le(e + 10, 2), cd_size = le(e + 12, 4), cd_offset = le(e + 16, 4);
  if (count == 0xFFFF || cd_offset == 0xFFFFFFFF) {  // zip64: locator just before the record
    HYMBA_CHECK(eocd >= 20 && le(e - 20, 4) == 0x07064b50, path, ": zip64 end record locator is missing");
    const uint64_t z64 = le(e - 20 + 8, 8);
    uint8_t rec[56];
    HYMBA_CHECK(z64 <= file_size && 56 <= file_size - z64, path, ": zip64 end record is outside the file");
    pread_all(fd, rec, 56, z64, path);
    HYMBA_CHECK(le(rec, 4) == 0x06064b50, path, ": bad zip64 end record");
    count = le(rec + 32, 8);
    cd_size = le(rec + 40, 8);
    cd_offset = le(rec + 48, 8);
  }
  HYMBA_CHECK(cd_offset <= file_size && cd_size <= file_size - cd_offset, path,
              ": zip central directory is outside the file (truncated?)");
  std::vector<uint8_t> cd(cd_size);
  pread_all(fd, cd.data(), cd_size, cd_offset, path);
  std::map<std::string, ZipEntry> out;
  size_t p = 0;
  for (uint64_t n = 0; n < count; ++n) {
    HYMBA_CHECK(p + 46 <= cd.size() && le(&cd[p], 4) == 0x02014b50, path, ": corrupt zip central directory");
    const uint64_t method = le(&cd[p + 10], 2);
    uint64_t size = le(&cd[p + 24], 4), local = le(&cd[p + 42], 4);
    const size_t name_len = le(&cd[p + 28], 2), extra_len = le(&cd[p + 30], 2), comment_len = le(&cd[p + 32], 2);
    HYMBA_CHECK(p + 46 + name_len + extra_len + comment_len <= cd.size(), path, ": corrupt zip central directory");
    std::string name(reinterpret_cast<const char*>(&cd[p + 46]), name_len);
    // zip64 extra field: the 64-bit values of the fields saturated above, in order.
    for (size_t x = p + 46 + name_len; x + 4 <= p + 46 + name_len + extra_len;) {
      const uint64_t id = le(&cd[x], 2), len = le(&cd[x + 2], 2);
      if (id == 1) {
        size_t at = x + 4;
        const size_t end = std::min(x + 4 + len, p + 46 + name_len + extra_len);
        auto next64 = [&] {
          HYMBA_CHECK(at + 8 <= end, path, ": corrupt zip64 extra field for '", excerpt(name), "'");
          at += 8;
          return le(&cd[at - 8], 8);
        };
        const uint64_t usize = le(&cd[p + 24], 4), csize = le(&cd[p + 20], 4);
        if (usize == 0xFFFFFFFF) size = next64();
        if (csize == 0xFFFFFFFF) next64();
        if (local == 0xFFFFFFFF) local = next64();
      }
      x += 4 + len;
    }
    p += 46 + name_len + extra_len + comment_len;
    HYMBA_CHECK(method == 0, path, ": zip entry '", excerpt(name),
                "' is compressed; torch.save stores entries uncompressed");
    uint8_t lh[30];
    HYMBA_CHECK(local <= file_size && 30 <= file_size - local, path, ": zip entry '", excerpt(name),
                "' is outside the file");
    pread_all(fd, lh, 30, local, path);
    HYMBA_CHECK(le(lh, 4) == 0x04034b50, path, ": corrupt zip local header for '", excerpt(name), "'");
    const uint64_t data = local + 30 + le(lh + 26, 2) + le(lh + 28, 2);
    HYMBA_CHECK(data <= file_size && size <= file_size - data, path, ": zip entry '", excerpt(name),
                "' runs past the end of the file (truncated?)");
    out[name] = {data, size};
  }
  return out;
}

// --------------------------------------------------------------- pickle

// The values a state_dict pickle builds. Nothing here can run code.
//
// Every object is owned by the Unpickler's arena and refers to others by
// plain pointer: a pickle of 1,000,000 nested tuples, or a list appended to
// itself through the memo, is freed in one flat pass (shared_ptr chains were
// destroyed recursively, overflowing the stack, and cycles leaked).
struct Obj;
using Ref = Obj*;
struct Obj {
  enum Kind { kNone, kBool, kInt, kFloat, kStr, kTuple, kList, kDict, kGlobal, kStorage, kTensor, kMark } kind = kNone;
  int64_t i = 0;
  double f = 0;
  std::string s;                              // str; global "module.name"; storage key
  std::vector<Ref> items;                     // tuple/list; tensor: sizes, strides
  std::vector<std::pair<Ref, Ref>> dict;      // in insertion order
  std::string dtype;                          // storage / tensor
  int64_t offset = 0;                         // tensor: storage offset (elements)
  Ref storage;                                // tensor
};

// Objects one pickle may build: far more than any state_dict needs (a few
// per tensor), few enough that a hostile pickle of one-byte opcodes cannot
// use more than a few hundred MB.
constexpr size_t kMaxPickleObjects = size_t{1} << 21;
// Items on the pickle stack plus memo entries, bounded the same way.
constexpr size_t kMaxPickleStack = size_t{1} << 21;
constexpr uint64_t kMaxPickleBytes = uint64_t{64} << 20;

class Unpickler {
 public:
  Unpickler(const std::vector<uint8_t>& data, const std::string& where) : d_(data), where_(where) {}
  Unpickler(const Unpickler&) = delete;
  Unpickler& operator=(const Unpickler&) = delete;
  // The objects run() returned live as long as the Unpickler.

  Ref run() {
    for (;;) {
      check(stack_.size() <= kMaxPickleStack && memo_.size() <= kMaxPickleStack,
            "pickle holds too many values (not a plain state_dict)");
      const uint8_t op = byte();
      switch (op) {
        case 0x80: byte(); break;                       // PROTO
        case 0x95: bytes(8); break;                     // FRAME
        case '.': return pop();                         // STOP
        case '(': stack_.push_back(make(Obj::kMark)); break;
        case '}': stack_.push_back(make(Obj::kDict)); break;
        case ']': stack_.push_back(make(Obj::kList)); break;
        case ')': stack_.push_back(make(Obj::kTuple)); break;
        case 'N': stack_.push_back(make(Obj::kNone)); break;
        case 0x88: case 0x89: {                          // NEWTRUE / NEWFALSE
          Ref b = make(Obj::kBool);
          b->i = op == 0x88;
          stack_.push_back(b);
          break;
        }
        case 'J': push_int(static_cast<int32_t>(le(bytes(4), 4))); break;
        case 'K': push_int(byte()); break;
        case 'M': push_int(static_cast<int64_t>(le(bytes(2), 2))); break;
        case 0x8a: {                                    // LONG1
          const int n = byte();
          check(n <= 8, "integer wider than 64 bits");
          const uint8_t* p = bytes(static_cast<size_t>(n));
          uint64_t v = n ? le(p, n) : 0;
          if (n > 0 && n < 8 && (p[n - 1] & 0x80)) v |= ~uint64_t{0} << (8 * n);  // sign-extend
          push_int(static_cast<int64_t>(v));
          break;
        }
        case 'G': {                                     // BINFLOAT (big-endian)
          const uint8_t* p = bytes(8);
          uint64_t v = 0;
          for (int k = 0; k < 8; ++k) v = (v << 8) | p[k];
          Ref f = make(Obj::kFloat);
          std::memcpy(&f->f, &v, 8);
          stack_.push_back(f);
          break;
        }
        case 'X': push_str(le(bytes(4), 4)); break;     // BINUNICODE
        case 0x8c: case 'U': push_str(byte()); break;   // SHORT_BINUNICODE / SHORT_BINSTRING
        case 'T': push_str(le(bytes(4), 4)); break;     // BINSTRING
        case 'q': memo_[byte()] = top(); break;         // BINPUT
        case 'r': memo_[le(bytes(4), 4)] = top(); break;
        case 0x94: memo_[memo_.size()] = top(); break;  // MEMOIZE
        case 'h': stack_.push_back(memo(byte())); break;
        case 'j': stack_.push_back(memo(le(bytes(4), 4))); break;
        case 't': {
          Ref t = make(Obj::kTuple);
          t->items = pop_to_mark();
          stack_.push_back(t);
          break;
        }
        case 0x85: case 0x86: case 0x87: {              // TUPLE1..3
          Ref t = make(Obj::kTuple);
          t->items.resize(op - 0x84);
          for (size_t k = t->items.size(); k-- > 0;) t->items[k] = pop();
          stack_.push_back(t);
          break;
        }
        case 'a': {
          Ref v = pop();
          top()->items.push_back(v);
          break;
        }
        case 'e': {
          std::vector<Ref> v = pop_to_mark();
          Ref list = top();
          list->items.insert(list->items.end(), v.begin(), v.end());
          break;
        }
        case 's': {
          Ref v = pop(), k = pop();
          set_item(top(), k, v);
          break;
        }
        case 'u': {
          std::vector<Ref> kv = pop_to_mark();
          check(kv.size() % 2 == 0, "SETITEMS with an odd count");
          for (size_t k = 0; k < kv.size(); k += 2) set_item(top(), kv[k], kv[k + 1]);
          break;
        }
        case 'c': {                                     // GLOBAL "module\nname\n"
          const std::string module = line(), name = line();
          push_global(module + "." + name);
          break;
        }
        case 0x93: {                                    // STACK_GLOBAL
          Ref name = pop(), module = pop();
          check(name->kind == Obj::kStr && module->kind == Obj::kStr, "STACK_GLOBAL needs two strings");
          push_global(module->s + "." + name->s);
          break;
        }
        case 'Q': stack_.push_back(persistent(pop())); break;  // BINPERSID
        case 'R': {                                     // REDUCE
          Ref args = pop(), fn = pop();
          stack_.push_back(reduce(fn, args));
          break;
        }
        case 'b': pop(); break;  // BUILD: state (a state_dict's _metadata) is not needed
        default: {
          char hex[8];
          std::snprintf(hex, sizeof hex, "0x%02x", op);
          fail(where_, ": unsupported pickle opcode ", hex, " at byte ", pos_ - 1,
               " (only plain state_dict checkpoints are read)");
        }
      }
    }
  }

 private:
  void check(bool ok, const char* what) const {
    if (!ok) fail(where_, ": ", what, " at byte ", pos_);
  }
  uint8_t byte() {
    check(pos_ < d_.size(), "pickle ends early");
    return d_[pos_++];
  }
  const uint8_t* bytes(size_t n) {
    check(n <= d_.size() - pos_, "pickle ends early");
    pos_ += n;
    return &d_[pos_ - n];
  }
  std::string line() {
    std::string s;
    for (uint8_t c = byte(); c != '\n'; c = byte()) {
      check(s.size() < 256, "GLOBAL name longer than 256 bytes");
      s.push_back(static_cast<char>(c));
    }
    return s;
  }
  Ref make(Obj::Kind k) {
    check(arena_.size() < kMaxPickleObjects, "pickle builds too many objects (not a plain state_dict)");
    arena_.push_back(std::make_unique<Obj>());
    arena_.back()->kind = k;
    return arena_.back().get();
  }
  Ref pop() {
    check(!stack_.empty(), "pickle stack underflow");
    Ref r = stack_.back();
    stack_.pop_back();
    return r;
  }
  Ref top() {
    check(!stack_.empty(), "pickle stack underflow");
    return stack_.back();
  }
  std::vector<Ref> pop_to_mark() {
    std::vector<Ref> out;
    for (;;) {
      Ref r = pop();
      if (r->kind == Obj::kMark) break;
      out.push_back(r);
    }
    return {out.rbegin(), out.rend()};
  }
  Ref memo(uint64_t k) {
    auto it = memo_.find(k);
    check(it != memo_.end(), "pickle memo key not found");
    return it->second;
  }
  void push_int(int64_t v) {
    Ref r = make(Obj::kInt);
    r->i = v;
    stack_.push_back(r);
  }
  void push_str(uint64_t n) {
    Ref r = make(Obj::kStr);
    const uint8_t* p = bytes(n);
    r->s.assign(reinterpret_cast<const char*>(p), n);
    stack_.push_back(r);
  }
  void set_item(const Ref& d, const Ref& k, const Ref& v) {
    check(d->kind == Obj::kDict, "SETITEM on a non-dict");
    d->dict.emplace_back(k, v);
  }
  void push_global(const std::string& name) {
    static const char* const kAllowed[] = {
        "collections.OrderedDict", "torch._utils._rebuild_tensor_v2", "torch._utils._rebuild_parameter",
        "torch.FloatStorage",      "torch.HalfStorage",               "torch.BFloat16Storage",
        "torch.DoubleStorage",     "torch.ByteStorage",               "torch.BoolStorage"};
    bool ok = false;
    for (const char* a : kAllowed) ok = ok || name == a;
    if (!ok) fail(where_, ": refers to '", excerpt(name), "', which a plain state_dict of float tensors does not use");
    Ref g = make(Obj::kGlobal);
    g->s = name;
    stack_.push_back(g);
  }
  // ('storage', storage type, key, location, numel)
  Ref persistent(const Ref& pid) {
    check(pid->kind == Obj::kTuple && pid->items.size() >= 3 && pid->items[0]->kind == Obj::kStr &&
              pid->items[0]->s == "storage" && pid->items[1]->kind == Obj::kGlobal && pid->items[2]->kind == Obj::kStr,
          "unexpected persistent id (not a torch storage)");
    const std::string& type = pid->items[1]->s;
    // Byte and bool storages hold mask buffers some checkpoints keep (GPT-Neo's
    // attn.attention.bias): listed, never read as parameters (not float).
    static const std::map<std::string, const char*> kDtypes = {
        {"torch.FloatStorage", "F32"}, {"torch.HalfStorage", "F16"}, {"torch.BFloat16Storage", "BF16"},
        {"torch.DoubleStorage", "F64"}, {"torch.ByteStorage", "U8"},  {"torch.BoolStorage", "BOOL"}};
    const auto dtype = kDtypes.find(type);
    check(dtype != kDtypes.end(), "persistent id names no storage type");
    Ref st = make(Obj::kStorage);
    st->dtype = dtype->second;
    st->s = pid->items[2]->s;
    return st;
  }
  Ref reduce(const Ref& fn, const Ref& args) {
    check(fn->kind == Obj::kGlobal && args->kind == Obj::kTuple, "REDUCE needs a callable and a tuple");
    if (fn->s == "collections.OrderedDict") return make(Obj::kDict);
    if (fn->s == "torch._utils._rebuild_parameter") {
      check(!args->items.empty() && args->items[0]->kind == Obj::kTensor, "_rebuild_parameter needs a tensor");
      return args->items[0];
    }
    if (fn->s == "torch._utils._rebuild_tensor_v2") {
      const auto& a = args->items;
      check(a.size() >= 4 && a[0]->kind == Obj::kStorage && a[1]->kind == Obj::kInt && a[2]->kind == Obj::kTuple &&
                a[3]->kind == Obj::kTuple,
            "_rebuild_tensor_v2 needs (storage, offset, size, stride)");
      Ref t = make(Obj::kTensor);
      t->storage = a[0];
      t->dtype = a[0]->dtype;
      t->offset = a[1]->i;
      for (const Ref& x : a[2]->items) {
        check(x->kind == Obj::kInt, "tensor size is not an integer");
        t->items.push_back(x);
      }
      // Row-major strides only: a state_dict of parameters is contiguous.
      // The stride product is checked: sizes come from the file.
      int64_t expect = 1;
      check(a[3]->items.size() == a[2]->items.size(), "tensor stride and size differ in rank");
      check(a[2]->items.size() <= 64, "tensor has more than 64 dimensions");
      for (size_t k = a[3]->items.size(); k-- > 0;) {
        const int64_t size = a[2]->items[k]->i;
        check(size >= 0, "tensor size is negative");
        check(a[3]->items[k]->kind == Obj::kInt && (size == 1 || a[3]->items[k]->i == expect),
              "tensor is not contiguous (save a .contiguous() copy)");
        check(!__builtin_mul_overflow(expect, size, &expect), "tensor size overflows 64-bit integers");
      }
      return t;
    }
    fail(where_, ": cannot call '", excerpt(fn->s), "'");
  }

  const std::vector<uint8_t>& d_;
  const std::string& where_;
  size_t pos_ = 0;
  std::vector<std::unique_ptr<Obj>> arena_;  // owns every object; freed flat
  std::vector<Ref> stack_;
  std::map<uint64_t, Ref> memo_;
};

int64_t element_bytes(const std::string& dtype) {
  return dtype == "F32" ? 4 : dtype == "F64" ? 8 : dtype == "U8" || dtype == "BOOL" ? 1 : 2;
}

}  // namespace

TorchCheckpoint TorchCheckpoint::open(const std::string& path) {
  TorchCheckpoint c;
  c.path_ = path;
  c.fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  HYMBA_CHECK(c.fd_ >= 0, path, ": cannot open: ", std::strerror(errno));
  struct stat st{};
  HYMBA_CHECK(::fstat(c.fd_, &st) == 0, path, ": cannot stat: ", std::strerror(errno));
  const auto file_size = static_cast<uint64_t>(st.st_size);
  const std::map<std::string, ZipEntry> zip = read_zip_directory(c.fd_, file_size, path);

  // "<archive>/data.pkl" and "<archive>/data/<key>"; the archive folder's name varies.
  std::string prefix;
  const ZipEntry* pkl = nullptr;
  for (const auto& [name, e] : zip) {
    const size_t slash = name.find('/');
    if (slash != std::string::npos && name.compare(slash, std::string::npos, "/data.pkl") == 0) {
      prefix = name.substr(0, slash + 1);
      pkl = &e;
    }
  }
  HYMBA_CHECK(pkl != nullptr, path, ": no data.pkl in the zip (not a torch.save checkpoint)");
  // A state_dict's pickle is a few bytes per tensor (KBs, MBs for thousands
  // of tensors); the limit keeps a hostile one from sizing a huge buffer.
  HYMBA_CHECK(pkl->size <= kMaxPickleBytes, path, ": data.pkl is ", pkl->size, " bytes, more than the ",
              kMaxPickleBytes >> 20, " MiB a state_dict's pickle needs");
  std::vector<uint8_t> pickle(pkl->size);
  pread_all(c.fd_, pickle.data(), pickle.size(), pkl->data_offset, path);
  const std::string where = path + " (data.pkl)";
  Unpickler unpickler(pickle, where);  // owns every object below
  const Ref top = unpickler.run();
  // A state_dict, or a dict holding one under "state_dict" / "model" (torch.save({'state_dict': sd, ...})).
  // `top` keeps the outer dict alive while `root` points into it.
  Ref root = top;
  if (top->kind == Obj::kDict)
    for (const auto& [k, v] : top->dict)
      if (k->kind == Obj::kStr && (k->s == "state_dict" || k->s == "model") && v->kind == Obj::kDict) {
        root = v;
        break;
      }
  HYMBA_CHECK(root->kind == Obj::kDict, path, ": the pickle is not a dict of tensors");

  for (const auto& [k, v] : root->dict) {
    HYMBA_CHECK(k->kind == Obj::kStr, path, ": a state_dict key is not a string");
    HYMBA_CHECK(v->kind == Obj::kTensor, path, ": entry '", excerpt(k->s), "' is not a tensor");
    auto it = zip.find(prefix + "data/" + v->storage->s);
    HYMBA_CHECK(it != zip.end(), path, ": tensor '", excerpt(k->s), "' refers to storage ", excerpt(v->storage->s),
                ", which the zip lacks");
    SafetensorsEntry e;
    e.name = k->s;
    e.dtype = v->dtype;
    int64_t numel = 1;
    for (const Ref& x : v->items) {
      // Every product stays below 2^40 elements, so byte counts cannot overflow.
      HYMBA_CHECK(x->i >= 0 && (x->i == 0 || numel <= (int64_t{1} << 40) / x->i), path, ": tensor '", excerpt(k->s),
                  "' has a bad size");
      e.shape.push_back(x->i);
      numel *= x->i;
    }
    const auto eb = static_cast<uint64_t>(element_bytes(e.dtype));
    HYMBA_CHECK(v->offset >= 0 && v->offset <= (int64_t{1} << 40) &&
                    static_cast<uint64_t>(v->offset + numel) * eb <= it->second.size,
                path, ": tensor '", excerpt(k->s), "' runs past the end of its storage");
    e.begin = it->second.data_offset + static_cast<uint64_t>(v->offset) * eb;
    e.end = e.begin + static_cast<uint64_t>(numel) * eb;
    HYMBA_CHECK(c.index_.emplace(e.name, c.entries_.size()).second, path, ": tensor '", excerpt(k->s),
                "' appears twice");
    c.entries_.push_back(std::move(e));
  }
  return c;
}

TorchCheckpoint::TorchCheckpoint(TorchCheckpoint&& o) noexcept
    : path_(std::move(o.path_)), fd_(std::exchange(o.fd_, -1)), entries_(std::move(o.entries_)),
      index_(std::move(o.index_)) {}

TorchCheckpoint::~TorchCheckpoint() {
  if (fd_ >= 0) ::close(fd_);
}

const SafetensorsEntry* TorchCheckpoint::find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &entries_[it->second];
}

void TorchCheckpoint::read_into(const std::string& name, float* dst, int64_t n) const {
  const SafetensorsEntry* e = find(name);
  HYMBA_CHECK(e != nullptr, path_, ": tensor '", excerpt(name), "' is missing");
  HYMBA_CHECK(n == e->numel(), path_, ": tensor '", excerpt(name), "' has ", e->numel(), " elements, expected ", n);
  HYMBA_CHECK(e->dtype != "U8" && e->dtype != "BOOL", path_, ": tensor '", excerpt(name), "' has dtype ", e->dtype,
              ", not a float");
  std::vector<uint8_t> raw(e->end - e->begin);
  pread_all(fd_, raw.data(), raw.size(), e->begin, path_);
  for (int64_t i = 0; i < n; ++i) {
    const uint8_t* p = raw.data() + i * element_bytes(e->dtype);
    if (e->dtype == "F32") {
      std::memcpy(dst + i, p, 4);
    } else if (e->dtype == "F64") {
      double v;
      std::memcpy(&v, p, 8);
      dst[i] = static_cast<float>(v);
    } else {
      const auto bits = static_cast<uint16_t>(p[0] | (p[1] << 8));
      dst[i] = e->dtype == "BF16" ? bf16_to_f32(bits) : f16_to_f32(bits);
    }
  }
}

std::vector<float> TorchCheckpoint::read_f32(const std::string& name) const {
  const SafetensorsEntry* e = find(name);
  HYMBA_CHECK(e != nullptr, path_, ": tensor '", name, "' is missing");
  std::vector<float> out(static_cast<size_t>(e->numel()));
  read_into(name, out.data(), e->numel());
  return out;
}

}  // namespace hymba
