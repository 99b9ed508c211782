// The weight format the decoder runs its linear layers in (issue 19): f32,
// bf16 (kernels/cpu/matmul_bf16.h), q8 blocks (kernels/cpu/quant_q8.h, GGUF's Q8_0) or q4 blocks
// (kernels/cpu/quant_q4.h, GGUF's Q4_0). The format covers every projection
// and FFN matrix that prefill chunks and decode steps multiply by, and the
// output head (q8 for q4); the embedding, the norms and the Mamba conv / A /
// D / dt bias stay in float32. docs/inference.md describes the formats,
// docs/benchmarks.md has the figures.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string_view>
#include <tuple>
#include <vector>

#include "kernels/cpu/matmul_bf16.h"
#include "kernels/cpu/quant_packed.h"
#include "kernels/cpu/quant_q4.h"
#include "kernels/cpu/quant_q8.h"
#include "model/held_weights.h"

namespace hymba::infer {

enum class WeightFormat { kF32, kBF16, kQ8, kQ4 };

// "f32", "bf16", "q8" or "q4"; nullopt for anything else.
std::optional<WeightFormat> parse_weight_format(std::string_view name);
const char* to_string(WeightFormat format);
WeightFormat weight_format_of(BlockFormat format);
// The block format of q8 / q4; none for f32 and bf16 (whose decoder keeps
// the float32 weights: load_model's hold_floats_as).
std::optional<BlockFormat> block_format_of(WeightFormat format);
// The output head's format when the linears run in `format`: the same, but
// q8 for q4 (DecoderLinears::head).
WeightFormat head_format_of(WeightFormat format);

// The decoder's linear layers in one weight format. f32 is the plain
// product; bf16, q8 and q4 round each weight matrix the first time it is used
// and keep it for the decoder's life. q8 and q4 run every product on their
// blocks and drop the float32 rows' file pages once copied (a mapped float32
// checkpoint then keeps no float32 copy of a quantized matrix resident); bf16
// keeps the float32 weights for long products.
class DecoderLinears {
 public:
  explicit DecoderLinears(WeightFormat format) : format_(format) {}
  WeightFormat format() const { return format_; }

  // bf16: products of at least kFloatRows rows (prefill chunks; decode
  // steps set quantized_rows(true) for their products) by a matrix the
  // decoder formats itself run on its float32 weights, which stay resident
  // (bf16's row kernels are slower than sgemm there). Scoring sets
  // quantized_rows(true) so every product uses the format. q8 and q4 run
  // products of any row count on their blocks (the many-row block kernels,
  // kernels/cpu/quant_gemm.cpp), so the flag does not change them. Held
  // matrices have no float32 weights (see adopt()).
  static constexpr int64_t kFloatRows = 16;
  void quantized_rows(bool all) { quantize_all_rows_ = all; }
  bool quantized_rows() const { return quantize_all_rows_; }

  // Takes a matrix the model holds in a block format (model/held_weights.h):
  // w is its (never written) float32 row block, the key the graph passes.
  // The blocks are repacked for the kernels (kernels/cpu/quant_packed.h);
  // pages of a file mapping they came from are dropped once copied.
  // Every product by it, and by a stack of held matrices starting at w (the
  // graph's stacked q/k/v or gate/up), runs on the held blocks, one product
  // per held matrix: q8 / q4 at any row count (on packed blocks the integer
  // kernels are as fast as sgemm on float32, q4 faster, with no float32
  // copy); bf16 on its row kernel below kFloatRows rows (unless scoring),
  // else sgemm on its values widened a tile of rows at a time.
  // A mapped matrix is repacked a slice of rows at a time, each slice's
  // file pages dropped once copied, so the two copies never coexist whole.
  void adopt(const float* w, const HeldMatrix& m);
  int64_t held_bytes() const { return held_bytes_; }
  // Rows ids[0..n) of the q8 / q4 matrix held at w, widened from the
  // repacked copy (the same values as the held rows): a tied head's
  // embedding looks its tokens up here, so the file's pages of it are not
  // read again. False when w holds no q8 / q4 matrix.
  bool held_rows(float* out, const int32_t* ids, int64_t n, const float* w) const;

  // The output head: logits[rows, V] = in[rows, C] @ w[V, C]^T. In the
  // format too (q4's head in q8, as llama.cpp keeps its output matrix at a
  // higher precision), unless head_in_format(false): for 1.5B models the
  // float32 head is 11-20 % of a quantized step's bytes, for 125M half.
  // For bf16, long products (kFloatRows rows, unless scoring) use the float32 head.
  void head(float* logits, const float* in, const float* w, int64_t rows, int64_t C, int64_t V);
  void head_in_format(bool on) { head_in_format_ = on; }
  // The head's format: f32, bf16 or q8.
  WeightFormat head_format() const;

  // out[rows, OC] = in[rows, C] @ w[OC, C]^T (row strides ld_out, ld_in).
  void linear(float* out, int64_t ld_out, const float* in, int64_t ld_in, const float* w, int64_t rows, int64_t C,
              int64_t OC);
  // Bytes of quantized weights made so far, the head's included (held ones not).
  int64_t quantized_bytes() const { return quantized_bytes_; }
  // The matrices quantized so far, as (weights, OC, C), and the float32
  // values one of them stands for: what the format computes with, for
  // checking a quantized decoder against a float forward on those values.
  std::vector<std::tuple<const float*, int64_t, int64_t>> quantized_matrices() const;
  std::vector<float> dequantized(const float* w, int64_t OC, int64_t C) const;

 private:
  WeightFormat format_;
  bool quantize_all_rows_ = false;
  bool head_in_format_ = true;
  using Key = std::tuple<const float*, int64_t, int64_t>;  // (w, OC, C)
  // Leaves the elements of resize() unwritten: the packing writes every
  // block, so a packed copy's pages become resident a slice at a time as it
  // is made, while a file's slices leave, instead of all at once (zeroed)
  // beside the whole file (Mamba-130M's embedding: 41 MB more at load).
  template <typename T>
  struct Unwritten : std::allocator<T> {
    template <typename U>
    struct rebind {
      using other = Unwritten<U>;
    };
    Unwritten() = default;
    template <typename U>
    Unwritten(const Unwritten<U>&) noexcept {}  // NOLINT: rebinding, as std::allocator
    template <typename U>
    void construct(U* p) noexcept {
      ::new (static_cast<void*>(p)) U;
    }
  };
  // A q8 or q4 matrix repacked for the kernels (kernels/cpu/quant_packed.h);
  // a bf16 one as held (its rows are the kernel's layout).
  struct Packed {
    BlockFormat format = BlockFormat::kQ8;
    int64_t rows = 0, cols = 0;
    std::vector<cpu::PackedQ8, Unwritten<cpu::PackedQ8>> q8;
    std::vector<cpu::PackedQ4, Unwritten<cpu::PackedQ4>> q4;
    HeldMatrix bf16;
    int64_t bytes() const;
  };
  // drop_file_pages: m is mapped; each slice's pages leave the resident set once repacked.
  static Packed pack(const HeldMatrix& m, bool drop_file_pages);
  // pack(quantize_matrix(format, w, rows, cols)) for q8 and q4, made a slice
  // of rows at a time; drop_file_pages: each slice's unwritten file pages
  // then leave the resident set (core/system_memory.h).
  static Packed packed_copy(BlockFormat format, const float* w, int64_t rows, int64_t cols,
                            bool drop_file_pages = false);
  // out = in @ p^T on the block kernels.
  static void packed_product(const Packed& p, float* out, int64_t ld_out, const float* in, int64_t ld_in,
                             int64_t rows);
  // Copies of float32 matrices in a format, made on first use and kept.
  struct Copies {
    std::map<Key, Packed> blocks;
    std::map<Key, std::vector<uint16_t>> bf16;
  };
  // The linears', and the head's apart (a tied head is the embedding, which
  // stays float32 for lookups and is no linear matrix).
  Copies copies_, head_copies_;
  // out = in @ w^T on w's copy in `format` (bf16, q8 or q4), made on first use.
  void formatted_product(Copies& copies, WeightFormat format, float* out, int64_t ld_out, const float* in,
                         int64_t ld_in, const float* w, int64_t rows, int64_t C, int64_t OC);
  int64_t quantized_bytes_ = 0;
  std::map<const float*, Packed> held_;
  int64_t held_bytes_ = 0;
  // Runs a product on held blocks; false when w starts no held matrix.
  bool held_linear(float* out, int64_t ld_out, const float* in, int64_t ld_in, const float* w, int64_t rows,
                   int64_t C, int64_t OC) const;
};

}  // namespace hymba::infer
