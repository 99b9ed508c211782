// pytorch_model.bin (torch.save's zip of data.pkl and storages), read
// without running the pickle. The first input byte picks what the rest is:
//   even: a whole file (zip directory, zip64 records, local headers, pickle);
//   odd:  a data.pkl pickle alone, stored by the harness in a well-formed zip
//         beside one 64-byte storage "0", so mutations reach the unpickler
//         and the tensor checks instead of breaking the zip framing.
#include <string>
#include <vector>

#include "fuzz_util.h"
#include "formats/torch_checkpoint.h"
#include "stored_zip.h"  // in tests/: shared with the security tests

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string rest(hymba::fuzz::as_text(data + 1, size - 1));
  const std::string file = (data[0] & 1) == 0 ? rest
                                               : hymba::test::stored_zip({{"archive/data.pkl", rest},
                                                                          {"archive/data/0", std::string(64, '\x01')},
                                                                          {"archive/version", "3\n"}});
  const std::string path = hymba::fuzz::write_input("pytorch_model.bin", file);
  hymba::fuzz::expect_clean([&] {
    const hymba::TorchCheckpoint c = hymba::TorchCheckpoint::open(path);
    for (const hymba::SafetensorsEntry& e : c.entries())
      if (e.is_float() && e.numel() <= (int64_t{1} << 20)) (void)c.read_f32(e.name);
  });
  return 0;
}
