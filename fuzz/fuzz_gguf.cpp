// GGUF files (formats/gguf.h): the container (magic, version, counts,
// strings, arrays, tensor descriptions, alignment, offsets, overlaps), then
// what a loader does with an accepted file: the model config of its
// metadata (llama / mamba / hymba), every tensor decoded into the model, and
// the tokenizer of its metadata.
#include <algorithm>

#include "formats/gguf.h"
#include "formats/gguf_model.h"
#include "formats/gguf_tokenizer.h"
#include "fuzz_util.h"
#include "model/model.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  hymba::fuzz::expect_clean([&] {
    const hymba::gguf::File f = hymba::gguf::File::parse(data, size, "fuzz.gguf");
    for (const hymba::gguf::TensorInfo& t : f.tensors())
      if (t.numel() <= (int64_t{1} << 16)) (void)hymba::gguf::read_tensor_f32(f, t);
    if (hymba::gguf::has_tokenizer(f)) (void)hymba::gguf::tokenizer_from_gguf(f);
    if (!f.has("general.architecture")) return;
    const hymba::ModelConfig cfg = hymba::gguf::config_from_gguf(f);
    // A config may ask for any size: build only small models (the size
    // checks of a real load are the config's and the machine's).
    if (cfg.num_hidden_layers > 8 || cfg.hidden_size * cfg.vocab_size > (int64_t{1} << 18) ||
        cfg.hidden_size * std::max<int64_t>(cfg.intermediate_size, cfg.d_inner()) > (int64_t{1} << 18))
      return;
    hymba::Model model(cfg, false);
    (void)hymba::gguf::load_gguf_weights(f, model, /*keep_blocks=*/true);
  });
  return 0;
}
