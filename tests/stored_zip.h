// A stored (uncompressed) zip of named entries, as torch.save writes
// pytorch_model.bin; the reader does not check CRCs, so they are left 0.
// Shared by the security tests and the torch_checkpoint fuzz harness, which
// build hostile pickles and need them framed in a well-formed archive.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace hymba::test {

inline void put_le(std::string& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}

inline std::string stored_zip(const std::vector<std::pair<std::string, std::string>>& entries) {
  std::string out, central;
  for (const auto& [name, body] : entries) {
    const uint64_t local = out.size();
    put_le(out, 0x04034b50, 4);  // local file header
    put_le(out, 20, 2), put_le(out, 0, 2), put_le(out, 0, 2), put_le(out, 0, 4), put_le(out, 0, 4);
    put_le(out, body.size(), 4), put_le(out, body.size(), 4), put_le(out, name.size(), 2), put_le(out, 0, 2);
    out += name;
    out += body;
    put_le(central, 0x02014b50, 4);  // central directory entry
    put_le(central, 20, 2), put_le(central, 20, 2), put_le(central, 0, 2), put_le(central, 0, 2), put_le(central, 0, 4);
    put_le(central, 0, 4), put_le(central, body.size(), 4), put_le(central, body.size(), 4);
    put_le(central, name.size(), 2), put_le(central, 0, 2), put_le(central, 0, 2), put_le(central, 0, 2);
    put_le(central, 0, 2), put_le(central, 0, 4), put_le(central, local, 4);
    central += name;
  }
  const uint64_t cd_offset = out.size();
  out += central;
  put_le(out, 0x06054b50, 4);  // end of central directory
  put_le(out, 0, 2), put_le(out, 0, 2), put_le(out, entries.size(), 2), put_le(out, entries.size(), 2);
  put_le(out, central.size(), 4), put_le(out, cd_offset, 4), put_le(out, 0, 2);
  return out;
}

}  // namespace hymba::test
