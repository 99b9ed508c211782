#include "tokenizer/sentencepiece_model.h"

#include <cstring>

#include "core/error.h"

namespace hymba::spm {

namespace {

bool read_varint(std::string_view msg, size_t& pos, uint64_t& out) {
  out = 0;
  for (int shift = 0; shift < 64 && pos < msg.size(); shift += 7) {
    const auto b = static_cast<uint8_t>(msg[pos++]);
    out |= uint64_t{b & 0x7Fu} << shift;
    if ((b & 0x80) == 0) return true;
  }
  return false;
}

void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7F) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}
void put_key(std::string& out, uint32_t number, int wire) { put_varint(out, (uint64_t{number} << 3) | wire); }
void put_uint(std::string& out, uint32_t number, uint64_t v) {
  put_key(out, number, 0);
  put_varint(out, v);
}
void put_bytes(std::string& out, uint32_t number, std::string_view bytes) {
  put_key(out, number, 2);
  put_varint(out, bytes.size());
  out.append(bytes);
}
void put_float(std::string& out, uint32_t number, float v) {
  put_key(out, number, 5);
  uint32_t bits;
  std::memcpy(&bits, &v, 4);
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((bits >> (8 * i)) & 0xFF));
}

bool bool_field(std::string_view msg, uint32_t number, bool def) {
  const auto f = proto_field(msg, number);
  return f ? f->varint != 0 : def;
}

// darts-clone's packed unit (what sentencepiece's normalizer walks).
uint32_t unit_offset(uint32_t u) { return (u >> 10) << ((u & (1u << 9)) >> 6); }
uint32_t unit_label(uint32_t u) { return u & ((1u << 31) | 0xFF); }
bool unit_has_leaf(uint32_t u) { return ((u >> 8) & 1) != 0; }
uint32_t unit_value(uint32_t u) { return u & ((1u << 31) - 1); }

}  // namespace

namespace {

// Calls `visit(number, field)` for each varint or bytes field of `msg` in
// order until it returns false; false when the message is malformed.
template <typename Visit>
bool for_each_field(std::string_view msg, Visit visit) {
  size_t pos = 0;
  while (pos < msg.size()) {
    uint64_t key = 0, len = 0;
    if (!read_varint(msg, pos, key)) return false;
    ProtoField f;
    const int wire = static_cast<int>(key & 7);
    if (wire == 0) {
      if (!read_varint(msg, pos, f.varint)) return false;
    } else if (wire == 2) {
      if (!read_varint(msg, pos, len) || len > msg.size() - pos) return false;
      f.bytes = msg.substr(pos, len);
      pos += len;
    } else if (wire == 5 || wire == 1) {
      const size_t n = wire == 5 ? 4 : 8;
      if (n > msg.size() - pos) return false;
      pos += n;
    } else {
      return false;
    }
    if ((wire == 0 || wire == 2) && !visit(static_cast<uint32_t>(key >> 3), f)) return true;
  }
  return true;
}

}  // namespace

std::optional<ProtoField> proto_field(std::string_view msg, uint32_t number) {
  std::optional<ProtoField> found;
  const bool ok = for_each_field(msg, [&](uint32_t n, const ProtoField& f) {
    if (n == number) found = f;
    return n != number;
  });
  return ok ? found : std::nullopt;
}

std::vector<UnigramModel::Piece> read_pieces(std::string_view model) {
  std::vector<UnigramModel::Piece> pieces;
  for_each_field(model, [&](uint32_t n, const ProtoField& f) {
    if (n != 1) return true;
    UnigramModel::Piece p;
    if (const auto text = proto_field(f.bytes, 1)) p.text = std::string(text->bytes);
    if (const auto type = proto_field(f.bytes, 3)) p.type = static_cast<int>(type->varint);
    pieces.push_back(std::move(p));
    return true;
  });
  return pieces;
}

ModelSettings read_model_settings(std::string_view model) {
  ModelSettings s;
  // ModelProto: trainer_spec 2, normalizer_spec 3.
  if (const auto trainer = proto_field(model, 2)) {
    if (const auto t = proto_field(trainer->bytes, 3)) s.model_type = t->varint;
    s.treat_whitespace_as_suffix = bool_field(trainer->bytes, 24, false);
    s.byte_fallback = bool_field(trainer->bytes, 35, false);
  }
  if (const auto norm = proto_field(model, 3)) {
    if (const auto n = proto_field(norm->bytes, 1)) s.normalizer_name = std::string(n->bytes);
    if (const auto c = proto_field(norm->bytes, 2)) s.precompiled_charsmap = std::string(c->bytes);
    s.add_dummy_prefix = bool_field(norm->bytes, 3, true);
    s.remove_extra_whitespaces = bool_field(norm->bytes, 4, true);
    s.escape_whitespaces = bool_field(norm->bytes, 5, true);
  }
  return s;
}

std::string write_unigram_model(const UnigramModel& m) {
  std::string out;
  for (const auto& p : m.pieces) {
    std::string piece;
    put_bytes(piece, 1, p.text);
    put_float(piece, 2, p.score);
    put_uint(piece, 3, static_cast<uint64_t>(p.type));
    put_bytes(out, 1, piece);
  }
  const ModelSettings& s = m.settings;
  std::string trainer;
  put_uint(trainer, 3, 1);  // UNIGRAM
  put_uint(trainer, 4, m.pieces.size());
  put_uint(trainer, 24, s.treat_whitespace_as_suffix);
  put_uint(trainer, 35, s.byte_fallback);
  // The special ids follow the pieces' texts (unk_piece 45, bos 46, eos 47, pad 48).
  const std::string_view specials[] = {m.unk_piece, m.bos_piece, m.eos_piece, m.pad_piece};
  for (uint32_t i = 0; i < 4; ++i)
    if (!specials[i].empty()) put_bytes(trainer, 45 + i, specials[i]);
  put_bytes(out, 2, trainer);
  std::string norm;
  put_bytes(norm, 1, s.normalizer_name);
  if (!s.precompiled_charsmap.empty()) put_bytes(norm, 2, s.precompiled_charsmap);
  put_uint(norm, 3, s.add_dummy_prefix);
  put_uint(norm, 4, s.remove_extra_whitespaces);
  put_uint(norm, 5, s.escape_whitespaces);
  put_bytes(out, 3, norm);
  return out;
}

void check_precompiled_charsmap(std::string_view blob, const std::string& where) {
  if (blob.empty()) return;
  // The walk visits up to 256 units per reachable state; real charsmaps
  // (sentencepiece's nmt_nfkc, nfkc_cf) are about 240 KB.
  constexpr size_t kMaxBytes = size_t{16} << 20;
  HYMBA_CHECK(blob.size() <= kMaxBytes, where, ": precompiled charsmap of ", blob.size(),
              " bytes is larger than the 16 MiB the engine accepts");
  HYMBA_CHECK(blob.size() > 4, where, ": precompiled charsmap of ", blob.size(),
              " bytes is too short for its trie size header");
  uint32_t trie_bytes = 0;
  for (int i = 0; i < 4; ++i) trie_bytes |= uint32_t{static_cast<uint8_t>(blob[i])} << (8 * i);
  HYMBA_CHECK(trie_bytes >= 4 && trie_bytes % 4 == 0 && trie_bytes < blob.size() - 4, where,
              ": precompiled charsmap's trie size ", trie_bytes, " does not fit its ", blob.size(), " bytes");
  const size_t n = trie_bytes / 4;
  const std::string_view strings = blob.substr(4 + trie_bytes);
  auto unit = [&](size_t i) {
    uint32_t u = 0;
    for (int b = 0; b < 4; ++b) u |= uint32_t{static_cast<uint8_t>(blob[4 + 4 * i + b])} << (8 * b);
    return u;
  };
  // Walk every state the normalizer can reach: from a node's base, any
  // byte c leads to unit base ^ c, which must exist; a matching child moves
  // to its own base, and a leaf's value must start a NUL-terminated string.
  std::vector<bool> seen(n, false);
  std::vector<size_t> todo;
  const size_t root = unit_offset(unit(0));
  HYMBA_CHECK(root < n, where, ": precompiled charsmap's root points past its trie");
  seen[root] = true;
  todo.push_back(root);
  while (!todo.empty()) {
    const size_t base = todo.back();
    todo.pop_back();
    for (uint32_t c = 0; c < 256; ++c) {
      const size_t child = base ^ c;
      HYMBA_CHECK(child < n, where, ": precompiled charsmap's trie reaches unit ", child, " of ", n);
      const uint32_t u = unit(child);
      if (unit_label(u) != c) continue;
      const size_t next = child ^ unit_offset(u);
      HYMBA_CHECK(next < n, where, ": precompiled charsmap's trie reaches unit ", next, " of ", n);
      if (unit_has_leaf(u)) {
        const uint32_t value = unit_value(unit(next));
        HYMBA_CHECK(value < strings.size() && strings.find('\0', value) != std::string_view::npos, where,
                    ": precompiled charsmap's replacement at ", value, " is not a NUL-terminated string in its ",
                    strings.size(), " bytes");
      }
      if (!seen[next]) {
        seen[next] = true;
        todo.push_back(next);
      }
    }
  }
}

}  // namespace hymba::spm
