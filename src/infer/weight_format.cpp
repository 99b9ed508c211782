#include "infer/weight_format.h"

#include <algorithm>

#include "core/error.h"
#include "core/float_formats.h"
#include "infer/step_kernels.h"

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

void DecoderLinears::adopt(const float* w, const HeldMatrix& m) {
  HYMBA_CHECK(held_.emplace(w, m).second, "a held matrix was adopted twice");
  held_bytes_ += m.bytes();
}

namespace {

// A long product on held blocks (a prefill chunk, the meta prefix): the
// blocks' values widened to float32 a tile of weight rows at a time, then
// sgemm, which is 2-3x faster than the block kernels once many input rows
// share each weight. Only the widened tile is ever float32.
void widened_linear(float* out, int64_t ld_out, const float* in, int64_t ld_in, const HeldMatrix& m, int64_t rows) {
  constexpr int64_t kTileRows = 256;
  const int64_t C = m.cols;
  thread_local std::vector<float> tile;
  tile.resize(static_cast<size_t>(std::min(kTileRows, m.rows) * C));
  float* buf = tile.data();  // not `tile` in the loop: each worker has its own thread_local
  for (int64_t r0 = 0; r0 < m.rows; r0 += kTileRows) {
    const int64_t n = std::min(kTileRows, m.rows - r0);
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < n; ++r) {
      if (m.format == BlockFormat::kBF16)
        for (int64_t c = 0; c < C; ++c) buf[r * C + c] = bf16_to_f32(m.bf16()[(r0 + r) * C + c]);
      else if (m.format == BlockFormat::kQ4)
        cpu::dequantize_q4(buf + r * C, m.q4() + (r0 + r) * cpu::q4_blocks_per_row(C), 1, C);
      else
        cpu::dequantize_q8(buf + r * C, m.q8() + (r0 + r) * cpu::q8_blocks_per_row(C), 1, C);
    }
    infer::linear(out + r0, ld_out, in, ld_in, buf, rows, C, n);
  }
}

}  // namespace

bool DecoderLinears::held_linear(float* out, int64_t ld_out, const float* in, int64_t ld_in, const float* w,
                                 int64_t rows, int64_t C, int64_t OC) const {
  auto it = held_.find(w);
  if (it == held_.end()) return false;
  for (int64_t done = 0; done < OC;) {
    HYMBA_CHECK(it != held_.end() && it->first == w + done * C, "a product of ", OC, " rows starts at a held matrix ",
                "but its rows from ", done, " on are not held");
    const HeldMatrix& m = it->second;
    HYMBA_CHECK(m.cols == C && done + m.rows <= OC, "a held matrix of [", m.rows, ",", m.cols,
                "] does not fit a product of [", OC, ",", C, "]");
    if (rows >= kFloatRows && !quantize_all_rows_)
      widened_linear(out + done, ld_out, in, ld_in, m, rows);
    else if (m.format == BlockFormat::kBF16)
      cpu::matmul_bf16(out + done, ld_out, in, ld_in, m.bf16(), nullptr, rows, C, m.rows);
    else if (m.format == BlockFormat::kQ4)
      cpu::matmul_q4(out + done, ld_out, in, ld_in, m.q4(), nullptr, rows, C, m.rows);
    else
      cpu::matmul_q8(out + done, ld_out, in, ld_in, m.q8(), nullptr, rows, C, m.rows);
    done += m.rows;
    if (done < OC) it = held_.find(w + done * C);
  }
  return true;
}

// The blocks of matrix w [OC, C], made on first use and kept.
template <typename Block, typename Quantize>
const std::vector<Block>& DecoderLinears::quantized(std::map<Key, std::vector<Block>>& cache, const float* w,
                                                     int64_t OC, int64_t C, int64_t blocks_per_row,
                                                     Quantize quantize) {
  auto [it, added] = cache.try_emplace({w, OC, C});
  if (added) {
    it->second.resize(static_cast<size_t>(OC * blocks_per_row));
    quantize(it->second.data(), w, OC, C);
    quantized_bytes_ += static_cast<int64_t>(it->second.size() * sizeof(Block));
  }
  return it->second;
}

void DecoderLinears::formatted_product(Copies& copies, WeightFormat format, float* out, int64_t ld_out,
                                       const float* in, int64_t ld_in, const float* w, int64_t rows, int64_t C,
                                       int64_t OC) {
  if (format == WeightFormat::kBF16) {
    const auto round = [](uint16_t* b, const float* x, int64_t n, int64_t c) { cpu::quantize_bf16(b, x, n, c); };
    const auto& values = quantized(copies.bf16, w, OC, C, C, round);
    cpu::matmul_bf16(out, ld_out, in, ld_in, values.data(), nullptr, rows, C, OC);
  } else if (format == WeightFormat::kQ4) {
    const auto quantize = [](cpu::BlockQ4* b, const float* x, int64_t n, int64_t c) { cpu::quantize_q4(b, x, n, c); };
    const auto& blocks = quantized(copies.q4, w, OC, C, cpu::q4_blocks_per_row(C), quantize);
    cpu::matmul_q4(out, ld_out, in, ld_in, blocks.data(), nullptr, rows, C, OC);
  } else {
    HYMBA_CHECK(format == WeightFormat::kQ8, "a float32 product asked for a formatted copy");
    const auto quantize = [](cpu::BlockQ8* b, const float* x, int64_t n, int64_t c) { cpu::quantize_q8(b, x, n, c); };
    const auto& blocks = quantized(copies.q8, w, OC, C, cpu::q8_blocks_per_row(C), quantize);
    cpu::matmul_q8(out, ld_out, in, ld_in, blocks.data(), nullptr, rows, C, OC);
  }
}

void DecoderLinears::linear(float* out, int64_t ld_out, const float* in, int64_t ld_in, const float* w, int64_t rows,
                            int64_t C, int64_t OC) {
  if (!held_.empty() && held_linear(out, ld_out, in, ld_in, w, rows, C, OC)) return;
  if (format_ == WeightFormat::kF32 || (rows >= kFloatRows && !quantize_all_rows_))
    infer::linear(out, ld_out, in, ld_in, w, rows, C, OC);
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
  const WeightFormat f = head_format();
  if (f == WeightFormat::kF32 || (rows >= kFloatRows && !quantize_all_rows_))
    infer::linear(logits, V, in, C, w, rows, C, V);
  else
    formatted_product(head_copies_, f, logits, V, in, C, w, rows, C, V);
}

std::vector<std::tuple<const float*, int64_t, int64_t>> DecoderLinears::quantized_matrices() const {
  std::vector<Key> keys;
  for (const auto& kv : copies_.q8) keys.push_back(kv.first);
  for (const auto& kv : copies_.q4) keys.push_back(kv.first);
  for (const auto& kv : copies_.bf16) keys.push_back(kv.first);
  for (const auto& kv : held_) keys.emplace_back(kv.first, kv.second.rows, kv.second.cols);
  return keys;
}

std::vector<float> DecoderLinears::dequantized(const float* w, int64_t OC, int64_t C) const {
  std::vector<float> out(static_cast<size_t>(OC * C));
  if (const auto it = copies_.q8.find({w, OC, C}); it != copies_.q8.end()) {
    cpu::dequantize_q8(out.data(), it->second.data(), OC, C);
  } else if (const auto it4 = copies_.q4.find({w, OC, C}); it4 != copies_.q4.end()) {
    cpu::dequantize_q4(out.data(), it4->second.data(), OC, C);
  } else if (const auto itb = copies_.bf16.find({w, OC, C}); itb != copies_.bf16.end()) {
    for (size_t i = 0; i < out.size(); ++i) out[i] = bf16_to_f32(itb->second[i]);
  } else if (const auto ith = held_.find(w); ith != held_.end() && ith->second.rows == OC && ith->second.cols == C) {
    dequantize_matrix(ith->second, out.data());
  } else {
    std::copy_n(w, OC * C, out.begin());
  }
  return out;
}

}  // namespace hymba::infer
