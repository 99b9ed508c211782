// HF tokenizer.json (byte-level BPE): model, vocab, merges, added tokens,
// pre-tokenizer, decoder and normalizer fields; an accepted tokenizer then
// encodes and decodes a fixed text.
#include "tokenizer/hf_tokenizer.h"
#include "tokenizer/tokenizer.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Alone in its directory: no tokenizer_config.json beside it.
  const std::string path = (hymba::fuzz::work_dir() / "tj" / "tokenizer.json").string();
  const std::string contents(hymba::fuzz::as_text(data, size));
  hymba::fuzz::expect_clean([&] {
    std::filesystem::create_directories(hymba::fuzz::work_dir() / "tj");
    const auto tok = hymba::load_hf_tokenizer_json(path, contents);
    const std::vector<int32_t> ids = tok->encode("Hello, world! 123 \xC3\xA9t\xC3\xA9 <|endoftext|>\n\t x");
    for (int32_t id : ids)
      if (id < 0 || id >= tok->vocab_size()) {
        std::fprintf(stderr, "fuzz: encode gave id %d outside 0..%d\n", id, tok->vocab_size() - 1);
        std::abort();
      }
    (void)tok->decode(ids);
    (void)tok->decode({tok->bos_id(), tok->eos_id(), tok->pad_id(), tok->vocab_size() - 1});
  }, path + ": unexpected value (");
  return 0;
}
