// safetensors files (model.safetensors, shards, optimizer.safetensors): the
// header (length, JSON, dtypes, shapes, offsets, overlaps) and the reads it
// then allows.
#include "core/safetensors.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = hymba::fuzz::write_input("model.safetensors", hymba::fuzz::as_text(data, size));
  hymba::fuzz::expect_clean([&] {
    const hymba::SafetensorsFile f = hymba::SafetensorsFile::open(path);
    for (const hymba::SafetensorsEntry& e : f.entries()) {
      // Every tensor the header accepted must read within the file.
      if (e.is_float() && e.numel() <= (int64_t{1} << 20)) (void)f.read_f32(e.name);
      (void)e.shape_str();
    }
  });
  return 0;
}
