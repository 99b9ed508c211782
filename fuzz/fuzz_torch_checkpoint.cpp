// pytorch_model.bin (torch.save's zip of data.pkl and storages), read
// without running the pickle. The first input byte picks what the rest is:
//   even: a whole file (zip directory, zip64 records, local headers, pickle);
//   odd:  a data.pkl pickle alone, stored by the harness in a well-formed zip
//         beside one 64-byte storage "0", so mutations reach the unpickler
//         and the tensor checks instead of breaking the zip framing.
#include <string>
#include <vector>

#include "fuzz_util.h"
#include "model/torch_checkpoint.h"

namespace {

void put(std::string& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}

// A stored (uncompressed) zip of the given entries, as torch.save writes.
// The reader does not check CRCs, so they are left 0.
std::string zip_of(const std::vector<std::pair<std::string, std::string>>& entries) {
  std::string out, central;
  for (const auto& [name, body] : entries) {
    const uint64_t local = out.size();
    put(out, 0x04034b50, 4);
    put(out, 20, 2), put(out, 0, 2), put(out, 0, 2), put(out, 0, 4), put(out, 0, 4);
    put(out, body.size(), 4), put(out, body.size(), 4), put(out, name.size(), 2), put(out, 0, 2);
    out += name;
    out += body;
    put(central, 0x02014b50, 4);
    put(central, 20, 2), put(central, 20, 2), put(central, 0, 2), put(central, 0, 2), put(central, 0, 4);
    put(central, 0, 4), put(central, body.size(), 4), put(central, body.size(), 4);
    put(central, name.size(), 2), put(central, 0, 2), put(central, 0, 2), put(central, 0, 2), put(central, 0, 2);
    put(central, 0, 4), put(central, local, 4);
    central += name;
  }
  const uint64_t cd_offset = out.size();
  out += central;
  put(out, 0x06054b50, 4);
  put(out, 0, 2), put(out, 0, 2), put(out, entries.size(), 2), put(out, entries.size(), 2);
  put(out, central.size(), 4), put(out, cd_offset, 4), put(out, 0, 2);
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string rest(hymba::fuzz::as_text(data + 1, size - 1));
  const std::string file =
      (data[0] & 1) == 0 ? rest
                         : zip_of({{"archive/data.pkl", rest}, {"archive/data/0", std::string(64, '\x01')},
                                   {"archive/version", "3\n"}});
  const std::string path = hymba::fuzz::write_input("pytorch_model.bin", file);
  hymba::fuzz::expect_clean([&] {
    const hymba::TorchCheckpoint c = hymba::TorchCheckpoint::open(path);
    for (const hymba::SafetensorsEntry& e : c.entries())
      if (e.is_float() && e.numel() <= (int64_t{1} << 20)) (void)c.read_f32(e.name);
  });
  return 0;
}
