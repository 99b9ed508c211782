// The tokenised dataset (with its on-disk token cache), the train/validation
// split, the random batch sampler and evaluation windows.
#include "data/dataset.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <numeric>
#include <optional>
#include <string_view>
#include <utility>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/rng.h"
#include "data/chunk_split.h"
#include "data/corpus.h"

namespace hymba {

namespace fs = std::filesystem;

namespace {

constexpr char kMagic[8] = {'H', 'Y', 'M', 'B', 'A', 'T', 'O', 'K'};
// Bump when the file layout or the rules of read_documents change, so old
// caches are rebuilt rather than trusted.
// 2: pieces are cut only at a newline between two printable ASCII bytes.
constexpr uint32_t kCacheVersion = 2;

struct CacheHeader {
  char magic[8];
  uint32_t version;
  uint32_t header_bytes;
  uint64_t source_hash;
  uint64_t tokenizer_hash;
  int64_t token_count;
  int32_t vocab_size;
  int32_t eos_id;
  uint64_t reserved;
  uint64_t checksum;  // of the 56 bytes above and the tokens
};
static_assert(sizeof(CacheHeader) == 64, "the cache header is 64 bytes on disk");
constexpr size_t kChecksummedHeaderBytes = offsetof(CacheHeader, checksum);

constexpr uint64_t kFnvBasis = 0xCBF29CE484222325ull;

uint64_t fnv1a(std::string_view s, uint64_t h = kFnvBasis) {
  for (unsigned char c : s) h = (h ^ c) * 0x100000001B3ull;
  // A terminator keeps ("ab", "c") and ("a", "bc") apart.
  return (h ^ 0xFFu) * 0x100000001B3ull;
}

uint64_t fnv1a_u64(uint64_t v, uint64_t h) {
  for (int i = 0; i < 8; ++i) h = (h ^ ((v >> (8 * i)) & 0xFFu)) * 0x100000001B3ull;
  return h;
}

uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

// Fast non-cryptographic hash for detecting corrupt cache files: four
// independent multiply-rotate lanes over 8-byte words, so it runs near
// memory speed on gigabytes of tokens.
uint64_t hash_bytes(const void* data, size_t n) {
  constexpr uint64_t P1 = 0x9E3779B185EBCA87ull, P2 = 0xC2B2AE3D27D4EB4Full, P3 = 0x165667B19E3779F9ull;
  const auto* p = static_cast<const unsigned char*>(data);
  uint64_t h[4] = {P1, P2, P3, P1 ^ P2};
  auto round = [&](int k, uint64_t w) { h[k] = rotl(h[k] ^ (w * P1), 31) * P2; };
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    uint64_t w[4];
    std::memcpy(w, p + i, 32);
    for (int k = 0; k < 4; ++k) round(k, w[k]);
  }
  uint64_t tail[4] = {0, 0, 0, 0};
  std::memcpy(tail, p + i, n - i);
  for (int k = 0; k < 4; ++k) round(k, tail[k]);
  uint64_t r = n * P3;
  for (int k = 0; k < 4; ++k) r = rotl(r ^ h[k], 27) * P1 + P3;
  r ^= r >> 33;
  r *= P2;
  return r ^ (r >> 29);
}

uint64_t cache_checksum(const CacheHeader& h, const int32_t* tokens, int64_t count) {
  uint64_t a = hash_bytes(&h, kChecksummedHeaderBytes);
  uint64_t b = hash_bytes(tokens, static_cast<size_t>(count) * sizeof(int32_t));
  return a ^ rotl(b, 17) ^ (b * 0x9E3779B97F4A7C15ull);
}

std::string hex16(uint64_t v) {
  static const char digits[] = "0123456789abcdef";
  std::string s(16, '0');
  for (int i = 15; i >= 0; --i, v >>= 4) s[static_cast<size_t>(i)] = digits[v & 0xF];
  return s;
}

// What the cache remembers about where the tokens came from: the spec and
// the path, size and modification time of every file, taken before the files
// are read so a change while reading shows up on the next run.
uint64_t source_hash(const std::string& spec_id, const std::vector<std::string>& files) {
  uint64_t h = fnv1a(spec_id, fnv1a("hymba-corpus"));
  for (const std::string& f : files) {
    struct stat st {};
    if (::stat(f.c_str(), &st) != 0) fail(f, ": cannot stat: ", std::strerror(errno));
    h = fnv1a(fs::absolute(f).lexically_normal().string(), h);
    h = fnv1a_u64(static_cast<uint64_t>(st.st_size), h);
    h = fnv1a_u64(static_cast<uint64_t>(st.st_mtim.tv_sec), h);
    h = fnv1a_u64(static_cast<uint64_t>(st.st_mtim.tv_nsec), h);
  }
  return h;
}

std::string user_cache_dir() {
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  if (xdg != nullptr && xdg[0] == '/') return std::string(xdg) + "/hymba";  // XDG: relative values are ignored
  const char* home = std::getenv("HOME");
  HYMBA_CHECK(home != nullptr && home[0] != '\0',
              "cannot find a directory for the token cache: set XDG_CACHE_HOME or HOME");
  return std::string(home) + "/.cache/hymba";
}

std::string ensure_dir(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) fail(dir, ": cannot create the token cache directory: ", ec.message());
  return dir;
}

// A directory we may add files to. access() alone says yes to root even for a
// read-only (mode 555) data folder, which we must not litter.
bool writable_dir(const fs::path& dir) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return false;
  return (st.st_mode & (S_IWUSR | S_IWGRP | S_IWOTH)) != 0 && ::access(dir.c_str(), W_OK) == 0;
}

// Where the tokens of `spec_id` (an absolute data path, or "default") are
// cached: next to the data when its directory is writable, otherwise (and
// for "default") in the cache directory under a name that cannot collide.
std::string cache_path_for(const std::string& spec_id, const std::string& cache_dir, uint64_t tok_hash) {
  const std::string suffix = "." + hex16(tok_hash) + ".tokens";
  fs::path data(spec_id);
  bool is_default = spec_id == kDefaultCorpus;
  if (cache_dir.empty() && !is_default && data.has_filename() && writable_dir(data.parent_path())) {
    return spec_id + suffix;
  }
  std::string dir = ensure_dir(cache_dir.empty() ? user_cache_dir() : cache_dir);
  if (is_default) return (fs::path(dir) / (spec_id + suffix)).string();
  std::string name = data.has_filename() ? data.filename().string() : "root";
  return (fs::path(dir) / (name + "-" + hex16(fnv1a(spec_id)) + suffix)).string();
}

// A read-only memory map of a whole file.
class MappedFile {
 public:
  MappedFile(void* addr, size_t size) : addr_(addr), size_(size) {}
  MappedFile(MappedFile&& o) noexcept : addr_(std::exchange(o.addr_, nullptr)), size_(std::exchange(o.size_, 0)) {}
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  MappedFile& operator=(MappedFile&& o) noexcept {
    std::swap(addr_, o.addr_);
    std::swap(size_, o.size_);
    return *this;
  }
  ~MappedFile() {
    if (addr_ != nullptr) ::munmap(addr_, size_);
  }
  const unsigned char* data() const { return static_cast<const unsigned char*>(addr_); }
  size_t size() const { return size_; }

  // nullopt when the file is missing, empty or cannot be mapped.
  static std::optional<MappedFile> open(const std::string& path) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return std::nullopt;
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size <= 0) {
      ::close(fd);
      return std::nullopt;
    }
    size_t size = static_cast<size_t>(st.st_size);
    void* addr = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    ::close(fd);  // the mapping keeps the file alive
    if (addr == MAP_FAILED) return std::nullopt;
    return MappedFile(addr, size);
  }

 private:
  void* addr_;
  size_t size_;
};

struct Expected {
  uint64_t source_hash;
  uint64_t tokenizer_hash;
  int32_t vocab_size;
  int32_t eos_id;
};

CacheHeader make_header(const Expected& e, int64_t count) {
  CacheHeader h{};
  std::memcpy(h.magic, kMagic, sizeof kMagic);
  h.version = kCacheVersion;
  h.header_bytes = sizeof(CacheHeader);
  h.source_hash = e.source_hash;
  h.tokenizer_hash = e.tokenizer_hash;
  h.token_count = count;
  h.vocab_size = e.vocab_size;
  h.eos_id = e.eos_id;
  h.reserved = 0;
  return h;
}

// The cached tokens when the file exists and matches the source and the
// tokenizer in every respect; nullopt means "rebuild" (stale, truncated or
// corrupt files included).
std::optional<MappedFile> load_cache(const std::string& path, const Expected& e) {
  std::optional<MappedFile> m = MappedFile::open(path);
  if (!m || m->size() < sizeof(CacheHeader)) return std::nullopt;
  CacheHeader h;
  std::memcpy(&h, m->data(), sizeof h);
  CacheHeader want = make_header(e, h.token_count);
  if (std::memcmp(&h, &want, kChecksummedHeaderBytes) != 0) return std::nullopt;
  if (h.token_count < 0 ||
      static_cast<uint64_t>(h.token_count) != (m->size() - sizeof(CacheHeader)) / sizeof(int32_t) ||
      (m->size() - sizeof(CacheHeader)) % sizeof(int32_t) != 0) {
    return std::nullopt;
  }
  const auto* tokens = reinterpret_cast<const int32_t*>(m->data() + sizeof(CacheHeader));
  if (cache_checksum(h, tokens, h.token_count) != h.checksum) return std::nullopt;
  const int32_t vocab = e.vocab_size;
  if (!std::all_of(tokens, tokens + h.token_count, [vocab](int32_t t) { return t >= 0 && t < vocab; })) {
    return std::nullopt;
  }
  return m;
}

void write_cache(const std::string& path, const Expected& e, const std::vector<int32_t>& tokens) {
  CacheHeader h = make_header(e, static_cast<int64_t>(tokens.size()));
  h.checksum = cache_checksum(h, tokens.data(), h.token_count);
  write_file_atomic(path, [&](std::FILE* f) {
    write_bytes(f, &h, sizeof h, path);
    write_bytes(f, tokens.data(), tokens.size() * sizeof(int32_t), path);
  });
}

// Reads and tokenises the corpus. Documents (and pieces of about 64 KiB cut
// after a newline from longer ones, so a one-file corpus still spreads over
// the threads; sentencepiece is also faster on shorter inputs) are encoded in
// parallel and joined in document order, with eos between documents: the
// result does not depend on the thread count. Cuts follow a newline with a
// printable ASCII byte on each side and depend on the text alone. No pre-token of
// GPT-2's byte-level pattern spans such a newline (whitespace runs end there,
// and only a space prefixes a word), so byte-level BPE ids are those of one
// long encode call, as are sentencepiece BPE's; unigram may tokenise the
// characters at a cut differently (about one token per 64 KiB).
std::vector<int32_t> tokenize_corpus(const std::vector<std::string>& docs, const Tokenizer& tok) {
  struct Piece {
    size_t doc;
    std::string_view text;
  };
  constexpr size_t kPieceBytes = size_t{1} << 16;
  std::vector<Piece> pieces;
  for (size_t d = 0; d < docs.size(); ++d) {
    std::string_view rest = docs[d];
    // Printable ASCII: no part of a (Unicode) whitespace character.
    auto graph = [](char c) { return c > 0x20 && c < 0x7f; };
    while (rest.size() > kPieceBytes) {
      size_t nl = rest.find('\n', kPieceBytes);
      while (nl != std::string_view::npos && nl + 1 < rest.size() && !(graph(rest[nl - 1]) && graph(rest[nl + 1])))
        nl = rest.find('\n', nl + 1);
      if (nl == std::string_view::npos || nl + 1 == rest.size()) break;
      pieces.push_back({d, rest.substr(0, nl + 1)});
      rest.remove_prefix(nl + 1);
    }
    pieces.push_back({d, rest});
  }

  const int64_t np = static_cast<int64_t>(pieces.size());
  std::vector<std::vector<int32_t>> encoded(pieces.size());
  std::vector<std::exception_ptr> errors(pieces.size());
#pragma omp parallel for schedule(dynamic, 4)
  for (int64_t i = 0; i < np; ++i) {
    try {
      encoded[static_cast<size_t>(i)] = tok.encode(pieces[static_cast<size_t>(i)].text);
    } catch (...) {
      errors[static_cast<size_t>(i)] = std::current_exception();  // exceptions must not leave the region
    }
  }
  for (const auto& e : errors)
    if (e) std::rethrow_exception(e);

  const int32_t eos = tok.eos_id();
  size_t total = docs.size() - 1;
  for (const auto& v : encoded) total += v.size();
  std::vector<int32_t> out;
  out.reserve(total);
  for (size_t i = 0; i < pieces.size(); ++i) {
    out.insert(out.end(), encoded[i].begin(), encoded[i].end());
    std::vector<int32_t>().swap(encoded[i]);
    bool last_of_doc = i + 1 == pieces.size() || pieces[i + 1].doc != pieces[i].doc;
    if (last_of_doc && i + 1 < pieces.size() && eos >= 0) out.push_back(eos);
  }
  const int32_t vocab = tok.vocab_size();
  for (int32_t t : out) HYMBA_CHECK(t >= 0 && t < vocab, "tokenizer produced id ", t, " outside its vocabulary of ", vocab);
  return out;
}


// One split's tokens: mapped from its cache file, or freshly built (and cached).
struct TokenStream {
  std::optional<MappedFile> map;
  std::vector<int32_t> owned;
  std::span<const int32_t> tokens;
  std::string cache_path;
  bool from_cache = false;
};

// The tokens of `split` of `spec`. A published split is cached under its own
// name (`<data>.train.<hash>.tokens`); an unsplit corpus keeps its old name.
TokenStream load_stream(const std::string& spec, const std::string& spec_id, CorpusSplit split, bool published,
                        const Tokenizer& tok, const std::string& cache_dir) {
  const std::vector<std::string> files = corpus_files(spec, split);
  const std::string id = published ? spec_id + "." + to_string(split) : spec_id;
  const Expected expect{source_hash(id, files), fnv1a(tok.fingerprint()), tok.vocab_size(), tok.eos_id()};
  TokenStream s;
  s.cache_path = cache_path_for(id, cache_dir, expect.tokenizer_hash);
  if ((s.map = load_cache(s.cache_path, expect))) {
    s.from_cache = true;
    const auto* base = reinterpret_cast<const int32_t*>(s.map->data() + sizeof(CacheHeader));
    s.tokens = {base, (s.map->size() - sizeof(CacheHeader)) / sizeof(int32_t)};
  } else {
    s.owned = tokenize_corpus(read_documents(spec, split), tok);
    write_cache(s.cache_path, expect, s.owned);
    s.tokens = s.owned;
  }
  return s;
}

// The block split of an unsplit corpus: blocks of `B` tokens (the last may
// be shorter), a seeded partial Fisher-Yates shuffle picks the validation
// blocks; each side keeps the stream order.
void split_blocks(std::span<const int32_t> all, const std::string& spec, const DatasetOptions& opt,
                  std::vector<int32_t>& train, std::vector<int32_t>& val) {
  const int64_t n = static_cast<int64_t>(all.size());
  const int64_t B = opt.block_tokens;
  const int64_t blocks = (n + B - 1) / B;
  HYMBA_CHECK(blocks >= 2, spec, ": too few tokens to hold out validation data: ", n, " tokens make ", blocks,
              " block(s) of block_tokens=", B, ", need at least 2");
  int64_t n_val = std::max<int64_t>(1, std::llround(opt.val_fraction * static_cast<double>(blocks)));
  HYMBA_CHECK(n_val < blocks, spec, ": val_fraction=", opt.val_fraction, " holds out all ", blocks,
              " blocks of block_tokens=", B, ", leaving no training data");
  std::vector<int64_t> order(static_cast<size_t>(blocks));
  std::iota(order.begin(), order.end(), 0);
  Rng rng = Rng(opt.split_seed).split(hash_name("val-split"));
  std::vector<char> is_val(static_cast<size_t>(blocks), 0);
  for (int64_t i = 0; i < n_val; ++i) {
    int64_t j = i + static_cast<int64_t>(rng.below(static_cast<uint64_t>(blocks - i)));
    std::swap(order[static_cast<size_t>(i)], order[static_cast<size_t>(j)]);
    is_val[static_cast<size_t>(order[static_cast<size_t>(i)])] = 1;
  }
  const int64_t val_len = (n_val - is_val.back()) * B + (is_val.back() ? n - (blocks - 1) * B : 0);
  val.reserve(static_cast<size_t>(val_len));
  train.reserve(static_cast<size_t>(n - val_len));
  for (int64_t b = 0; b < blocks; ++b) {
    auto block = all.subspan(static_cast<size_t>(b * B), static_cast<size_t>(std::min(B, n - b * B)));
    auto& dst = is_val[static_cast<size_t>(b)] ? val : train;
    dst.insert(dst.end(), block.begin(), block.end());
  }
}

void check_options(const DatasetOptions& opt) {
  HYMBA_CHECK(std::isfinite(opt.val_fraction) && opt.val_fraction >= 0.0 && opt.val_fraction < 1.0,
              "val_fraction must be in [0, 1), got ", opt.val_fraction);
  HYMBA_CHECK(opt.block_tokens > 0, "block_tokens must be positive, got ", opt.block_tokens);
  HYMBA_CHECK(opt.split == DataSplit::kChunksShuffled || !opt.chunk_last_eos,
              "chunk_last_target eos needs data_split chunks-shuffled (the EOS replaces each chunk's last target)");
}

}  // namespace

const char* to_string(DataSplit split) { return split == DataSplit::kBlocks ? "blocks" : "chunks-shuffled"; }

DataSplit parse_data_split(const std::string& name, const std::string& where) {
  if (name == "blocks") return DataSplit::kBlocks;
  if (name == "chunks-shuffled") return DataSplit::kChunksShuffled;
  fail(where, ": expected blocks or chunks-shuffled (got '", name, "')");
}

struct TokenDataset::Impl {
  TokenStream streams[3];          // train, valid, test as read (valid/test: published splits only)
  std::vector<int32_t> train_buf;  // copies when this dataset splits the stream itself
  std::vector<int32_t> val_buf;
  std::span<const int32_t> train, val, test;
  int64_t window_stride = 0;
};

TokenDataset::TokenDataset() : impl_(std::make_unique<Impl>()) {}
TokenDataset::~TokenDataset() = default;
TokenDataset::TokenDataset(TokenDataset&&) noexcept = default;
TokenDataset& TokenDataset::operator=(TokenDataset&&) noexcept = default;

std::span<const int32_t> TokenDataset::train() const { return impl_->train; }
std::span<const int32_t> TokenDataset::val() const { return impl_->val; }
std::span<const int32_t> TokenDataset::test() const { return impl_->test; }
int64_t TokenDataset::window_stride() const { return impl_->window_stride; }
const std::string& TokenDataset::cache_path() const { return impl_->streams[0].cache_path; }
bool TokenDataset::loaded_from_cache() const {
  for (const TokenStream& s : impl_->streams)
    if (!s.cache_path.empty() && !s.from_cache) return false;
  return true;
}

TokenDataset TokenDataset::build(const std::string& spec, const Tokenizer& tok, const DatasetOptions& opt) {
  check_options(opt);
  const bool published = has_published_splits(spec);
  HYMBA_CHECK(!opt.with_test || published, spec, ": publishes no test split (only WikiText-103 and PG-19 do)");
  std::string spec_id = spec;
  if (spec != kDefaultCorpus) {
    fs::path p = fs::absolute(spec).lexically_normal();
    if (!p.has_filename() && p.has_parent_path()) p = p.parent_path();  // "data/" -> "data"
    spec_id = p.string();
  }
  TokenDataset ds;
  Impl& im = *ds.impl_;
  auto load = [&](CorpusSplit split) {
    TokenStream& s = im.streams[static_cast<int>(split)];
    s = load_stream(spec, spec_id, split, published, tok, opt.cache_dir);
    return s.tokens;
  };
  const std::span<const int32_t> all = load(CorpusSplit::kTrain);
  if (opt.with_test) im.test = load(CorpusSplit::kTest);
  if (opt.split == DataSplit::kChunksShuffled) {
    // The seeds cut their training text alone; a published valid split is not read.
    HYMBA_CHECK(!opt.chunk_last_eos || tok.eos_id() >= 0,
                "chunk_last_target eos: the tokenizer has no end-of-sequence token");
    ChunkSplit c = split_chunks(all, opt.chunk_tokens, opt.val_fraction, opt.split_seed,
                                opt.chunk_last_eos ? tok.eos_id() : -1);
    im.train_buf = std::move(c.train);
    im.val_buf = std::move(c.val);
    im.window_stride = opt.chunk_tokens + 1;
  } else if (published) {
    im.train = all;
    im.val = load(CorpusSplit::kValid);
    return ds;
  } else if (opt.val_fraction == 0.0) {
    im.train = all;
    return ds;
  } else {
    split_blocks(all, spec, opt, im.train_buf, im.val_buf);
  }
  // The copies are all that is needed now.
  im.streams[0].map.reset();
  std::vector<int32_t>().swap(im.streams[0].owned);
  im.train = im.train_buf;
  im.val = im.val_buf;
  return ds;
}

}  // namespace hymba
