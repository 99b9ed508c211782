// sentencepiece's ModelProto on the wire, without protobuf: the fields the
// GGUF tokenizer forms need (docs/gguf.md), read from a serialized model and
// written into a new one, and a bounds check of the normalizer's precompiled
// charsmap, which arrives as untrusted bytes (a GGUF file's
// tokenizer.ggml.precompiled_charsmap) and which the sentencepiece library
// walks without checking.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace hymba::spm {

// One field of a protobuf message: the first one numbered `number`
// (`varint` for wire type 0, `bytes` for wire type 2); nullopt when absent
// or when the message is malformed before it.
struct ProtoField {
  uint64_t varint = 0;
  std::string_view bytes;
};
std::optional<ProtoField> proto_field(std::string_view msg, uint32_t number);

// sentencepiece's piece types (ModelProto.SentencePiece.Type), the same
// numbers as llama.cpp's token types.
enum PieceType { kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6 };

// The model-wide settings of a serialized ModelProto, with sentencepiece's
// defaults for absent fields.
struct ModelSettings {
  uint64_t model_type = 1;  // TrainerSpec.model_type: 1 unigram, 2 bpe, 3 word, 4 char
  bool byte_fallback = false;
  bool treat_whitespace_as_suffix = false;
  std::string normalizer_name;  // NormalizerSpec.name ("nmt_nfkc", "identity", ...)
  std::string precompiled_charsmap;
  bool add_dummy_prefix = true;
  bool remove_extra_whitespaces = true;
  bool escape_whitespaces = true;
};
ModelSettings read_model_settings(std::string_view model);

// A Unigram model to serialize. The special pieces are named by their text
// ("" for none); sentencepiece looks their ids up from it.
struct UnigramModel {
  struct Piece {
    std::string text;
    float score = 0;
    int type = kNormal;
  };
  std::vector<Piece> pieces;
  ModelSettings settings;
  std::string unk_piece, bos_piece, eos_piece, pad_piece;
};
std::string write_unigram_model(const UnigramModel& m);

// The pieces of a serialized ModelProto in id order (sentencepiece's own
// API does not say which pieces are user-defined).
std::vector<UnigramModel::Piece> read_pieces(std::string_view model);

// Throws a one-line error starting with `where` unless `blob` is a charsmap
// every lookup of sentencepiece's normalizer stays inside: a u32 trie size,
// the darts-clone double array, then NUL-terminated replacement strings;
// every node reachable from the root by any byte is visited. An empty blob
// (no normalization) is fine.
void check_precompiled_charsmap(std::string_view blob, const std::string& where);

}  // namespace hymba::spm
