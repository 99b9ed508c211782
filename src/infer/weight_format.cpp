#include "infer/weight_format.h"

#include <algorithm>

#include <unistd.h>

#include "core/error.h"
#include "core/float_formats.h"
#include "core/system_memory.h"
#include "kernels/cpu/decode_linear.h"
#include "kernels/cpu/embedding.h"
#include "kernels/cpu/matmul_bf16_widened.h"

namespace hymba::infer {

std::optional<WeightFormat> parse_weight_format(std::string_view name) {
  if (name == "f32") return WeightFormat::kF32;
  if (name == "bf16") return WeightFormat::kBF16;
  if (name == "q8") return WeightFormat::kQ8;
  if (name == "q4") return WeightFormat::kQ4;
  return std::nullopt;
}

const char* to_string(WeightFormat format) {
  switch (format) {
    case WeightFormat::kBF16: return "bf16";
    case WeightFormat::kQ8: return "q8";
    case WeightFormat::kQ4: return "q4";
    case WeightFormat::kF32: break;
  }
  return "f32";
}

WeightFormat weight_format_of(BlockFormat format) {
  if (format == BlockFormat::kBF16) return WeightFormat::kBF16;
  return format == BlockFormat::kQ4 ? WeightFormat::kQ4 : WeightFormat::kQ8;
}

std::optional<BlockFormat> block_format_of(WeightFormat format) {
  if (format == WeightFormat::kQ8) return BlockFormat::kQ8;
  if (format == WeightFormat::kQ4) return BlockFormat::kQ4;
  return std::nullopt;
}

int64_t DecoderLinears::Packed::bytes() const {
  return static_cast<int64_t>(q8.size() * sizeof(cpu::PackedQ8) + q4.size() * sizeof(cpu::PackedQ4)) +
         (format == BlockFormat::kBF16 ? bf16.bytes() : 0);
}

namespace {

// Matrices are copied into their packed blocks a slice of rows at a time:
// the rows of the whole matrix would be a second copy for a moment
// (hymba-1.5b's head in q8: 54 MB on top of the peak), and where they are
// file pages each slice's leave the resident set once copied. Slices of
// whole groups of 8 rows pack exactly as the whole does.
constexpr int64_t kSliceRows = 64 * cpu::kPackedRows;

template <typename Fn>
void for_each_slice(int64_t rows, Fn fn) {
  for (int64_t r0 = 0; r0 < rows; r0 += kSliceRows) fn(r0, std::min(kSliceRows, rows - r0));
}

// Quantizes rows of w a slice at a time into Block row blocks and packs each
// slice into `out` (packed_groups(rows) * blocks_per_row groups of blocks).
template <typename Block, typename PackedBlocks, typename Quantize, typename PackRows>
void quantize_and_pack(PackedBlocks& out, const float* w, int64_t rows, int64_t cols, int64_t nb,
                       bool drop_file_pages, Quantize quantize, PackRows pack_rows) {
  out.resize(static_cast<size_t>(cpu::packed_groups(rows) * nb));
  std::vector<Block> slice;
  for_each_slice(rows, [&](int64_t r0, int64_t n) {
    slice.resize(static_cast<size_t>(n * nb));
    quantize(slice.data(), w + r0 * cols, n, cols);
    pack_rows(out.data() + r0 / cpu::kPackedRows * nb, slice.data(), n, cols);
    if (drop_file_pages) release_unwritten_file_pages(w + r0 * cols, n * cols * int64_t{sizeof(float)});
  });
}

// Packs a held matrix's row blocks a slice at a time; with drop_file_pages
// (blocks in a read-only file mapping) each slice's pages leave the resident
// set once packed: from the page holding its first byte (the bytes before
// it are packed already, and a page read again comes back from the file)
// to its last whole page.
template <typename Block, typename PackedBlocks, typename PackRows>
void pack_slices(PackedBlocks& out, const Block* w, int64_t rows, int64_t cols, int64_t nb,
                 bool drop_file_pages, PackRows pack_rows) {
  out.resize(static_cast<size_t>(cpu::packed_groups(rows) * nb));
  const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  uintptr_t released = reinterpret_cast<uintptr_t>(w) / page * page;
  for_each_slice(rows, [&](int64_t r0, int64_t n) {
    pack_rows(out.data() + r0 / cpu::kPackedRows * nb, w + r0 * nb, n, cols);
    if (!drop_file_pages) return;
    const auto end = reinterpret_cast<uintptr_t>(w + (r0 + n) * nb);
    release_mapped_pages(reinterpret_cast<const void*>(released), static_cast<int64_t>(end - released));
    released = end / page * page;
  });
}

}  // namespace

DecoderLinears::Packed DecoderLinears::pack(const HeldMatrix& m, bool drop_file_pages) {
  Packed p;
  p.format = m.format;
  p.rows = m.rows;
  p.cols = m.cols;
  if (m.format == BlockFormat::kBF16)
    p.bf16 = m;  // its rows are the bf16 kernel's layout: used where they lie
  else if (m.format == BlockFormat::kQ4)
    pack_slices(p.q4, m.q4(), m.rows, m.cols, cpu::q4_blocks_per_row(m.cols), drop_file_pages, cpu::pack_q4);
  else
    pack_slices(p.q8, m.q8(), m.rows, m.cols, cpu::q8_blocks_per_row(m.cols), drop_file_pages, cpu::pack_q8);
  return p;
}

DecoderLinears::Packed DecoderLinears::packed_copy(BlockFormat format, const float* w, int64_t rows, int64_t cols,
                                                   bool drop_file_pages) {
  Packed p;
  p.format = format;
  p.rows = rows;
  p.cols = cols;
  if (format == BlockFormat::kQ4) {
    quantize_and_pack<cpu::BlockQ4>(
        p.q4, w, rows, cols, cpu::q4_blocks_per_row(cols), drop_file_pages,
        [](cpu::BlockQ4* b, const float* x, int64_t n, int64_t c) { cpu::quantize_q4(b, x, n, c); }, cpu::pack_q4);
  } else {
    HYMBA_CHECK(format == BlockFormat::kQ8, "a packed copy is q8 or q4");
    quantize_and_pack<cpu::BlockQ8>(
        p.q8, w, rows, cols, cpu::q8_blocks_per_row(cols), drop_file_pages,
        [](cpu::BlockQ8* b, const float* x, int64_t n, int64_t c) { cpu::quantize_q8(b, x, n, c); }, cpu::pack_q8);
  }
  return p;
}

void DecoderLinears::packed_product(const Packed& p, float* out, int64_t ld_out, const float* in, int64_t ld_in,
                                    int64_t rows) {
  if (p.format == BlockFormat::kBF16)
    cpu::matmul_bf16(out, ld_out, in, ld_in, p.bf16.bf16(), nullptr, rows, p.cols, p.rows);
  else if (p.format == BlockFormat::kQ4)
    cpu::matmul_packed_q4(out, ld_out, in, ld_in, p.q4.data(), nullptr, rows, p.cols, p.rows);
  else
    cpu::matmul_packed_q8(out, ld_out, in, ld_in, p.q8.data(), nullptr, rows, p.cols, p.rows);
}

void DecoderLinears::adopt(const float* w, const HeldMatrix& m) {
  HYMBA_CHECK(held_.count(w) == 0, "a held matrix was adopted twice");
  // The decoder reads only its repacked copy (bf16's is the held rows
  // themselves): a file's pages of q8 / q4 blocks need not stay resident.
  const auto it = held_.emplace(w, pack(m, m.mapped && m.format != BlockFormat::kBF16)).first;
  held_bytes_ += it->second.bytes();
}

bool DecoderLinears::held_rows(float* out, const int32_t* ids, int64_t n, const float* w) const {
  const auto it = held_.find(w);
  if (it == held_.end() || it->second.format == BlockFormat::kBF16) return false;
  const Packed& p = it->second;
  if (p.format == BlockFormat::kQ4)
    cpu::embedding_forward_packed_q4(out, ids, p.q4.data(), n, p.rows, p.cols);
  else
    cpu::embedding_forward_packed_q8(out, ids, p.q8.data(), n, p.rows, p.cols);
  return true;
}

bool DecoderLinears::held_linear(float* out, int64_t ld_out, const float* in, int64_t ld_in, const float* w,
                                 int64_t rows, int64_t C, int64_t OC) const {
  auto it = held_.find(w);
  if (it == held_.end()) return false;
  for (int64_t done = 0; done < OC;) {
    HYMBA_CHECK(it != held_.end() && it->first == w + done * C, "a product of ", OC, " rows starts at a held matrix ",
                "but its rows from ", done, " on are not held");
    const Packed& m = it->second;
    HYMBA_CHECK(m.cols == C && done + m.rows <= OC, "a held matrix of [", m.rows, ",", m.cols,
                "] does not fit a product of [", OC, ",", C, "]");
    if (m.format == BlockFormat::kBF16 && rows >= kFloatRows && !quantize_all_rows_)
      cpu::matmul_bf16_widened(out + done, ld_out, in, ld_in, m.bf16.bf16(), rows, m.cols, m.rows);
    else
      packed_product(m, out + done, ld_out, in, ld_in, rows);
    done += m.rows;
    if (done < OC) it = held_.find(w + done * C);
  }
  return true;
}

void DecoderLinears::formatted_product(Copies& copies, WeightFormat format, float* out, int64_t ld_out,
                                       const float* in, int64_t ld_in, const float* w, int64_t rows, int64_t C,
                                       int64_t OC) {
  if (format == WeightFormat::kBF16) {
    auto [it, added] = copies.bf16.try_emplace({w, OC, C});
    if (added) {
      it->second.resize(static_cast<size_t>(OC * C));
      cpu::quantize_bf16(it->second.data(), w, OC, C);
      quantized_bytes_ += static_cast<int64_t>(it->second.size() * sizeof(uint16_t));
    }
    cpu::matmul_bf16(out, ld_out, in, ld_in, it->second.data(), nullptr, rows, C, OC);
    return;
  }
  HYMBA_CHECK(format == WeightFormat::kQ8 || format == WeightFormat::kQ4, "a float32 product asked for a formatted copy");
  auto it = copies.blocks.find({w, OC, C});
  if (it == copies.blocks.end()) {
    const BlockFormat blocks = format == WeightFormat::kQ4 ? BlockFormat::kQ4 : BlockFormat::kQ8;
    // The float32 rows, once copied, are not read again by the decoder (a
    // tied head's are read a few rows a token, as the embedding): where
    // they are unwritten file pages (a mapped float32 checkpoint, a held
    // checkpoint's head) they leave the resident set a slice at a time, so
    // no float32 copy of a quantized matrix stays resident. Anonymous
    // memory (a file that could not be mapped) is left alone.
    it = copies.blocks.emplace(Key{w, OC, C}, packed_copy(blocks, w, OC, C, true)).first;
    quantized_bytes_ += it->second.bytes();
  }
  packed_product(it->second, out, ld_out, in, ld_in, rows);
}

void DecoderLinears::linear(float* out, int64_t ld_out, const float* in, int64_t ld_in, const float* w, int64_t rows,
                            int64_t C, int64_t OC) {
  if (!held_.empty() && held_linear(out, ld_out, in, ld_in, w, rows, C, OC)) return;
  if (format_ == WeightFormat::kF32 || (format_ == WeightFormat::kBF16 && rows >= kFloatRows && !quantize_all_rows_))
    cpu::decode_linear(out, ld_out, in, ld_in, w, rows, C, OC);
  else
    formatted_product(copies_, format_, out, ld_out, in, ld_in, w, rows, C, OC);
}

WeightFormat head_format_of(WeightFormat format) {
  return format == WeightFormat::kQ4 ? WeightFormat::kQ8 : format;
}

WeightFormat DecoderLinears::head_format() const {
  return head_in_format_ ? head_format_of(format_) : WeightFormat::kF32;
}

void DecoderLinears::head(float* logits, const float* in, const float* w, int64_t rows, int64_t C, int64_t V) {
  // A head held in blocks (a GGUF file's output or tied embedding) runs in its own format.
  if (!held_.empty() && held_linear(logits, V, in, C, w, rows, C, V)) return;
  const WeightFormat f = head_format();
  if (f == WeightFormat::kF32 || (f == WeightFormat::kBF16 && rows >= kFloatRows && !quantize_all_rows_))
    cpu::decode_linear(logits, V, in, C, w, rows, C, V);
  else
    formatted_product(head_copies_, f, logits, V, in, C, w, rows, C, V);
}

std::vector<std::tuple<const float*, int64_t, int64_t>> DecoderLinears::quantized_matrices() const {
  std::vector<Key> keys;
  for (const auto& kv : copies_.blocks) keys.push_back(kv.first);
  for (const auto& kv : copies_.bf16) keys.push_back(kv.first);
  for (const auto& kv : held_) keys.emplace_back(kv.first, kv.second.rows, kv.second.cols);
  return keys;
}

std::vector<float> DecoderLinears::dequantized(const float* w, int64_t OC, int64_t C) const {
  std::vector<float> out(static_cast<size_t>(OC * C));
  const auto widen = [&out](const Packed& p) {
    if (p.format == BlockFormat::kBF16)
      dequantize_matrix(p.bf16, out.data());
    else if (p.format == BlockFormat::kQ4)
      cpu::dequantize_packed_q4(out.data(), p.q4.data(), 0, p.rows, p.cols);
    else
      cpu::dequantize_packed_q8(out.data(), p.q8.data(), 0, p.rows, p.cols);
  };
  if (const auto it = copies_.blocks.find({w, OC, C}); it != copies_.blocks.end()) {
    widen(it->second);
  } else if (const auto itb = copies_.bf16.find({w, OC, C}); itb != copies_.bf16.end()) {
    for (size_t i = 0; i < out.size(); ++i) out[i] = bf16_to_f32(itb->second[i]);
  } else if (const auto ith = held_.find(w); ith != held_.end() && ith->second.rows == OC && ith->second.cols == C) {
    widen(ith->second);
  } else {
    std::copy_n(w, OC * C, out.begin());
  }
  return out;
}

}  // namespace hymba::infer
