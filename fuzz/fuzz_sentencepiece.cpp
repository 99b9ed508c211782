// tokenizer.model: a sentencepiece ModelProto (BPE or Unigram), read by the
// engine's own protobuf scan (model type) and by libsentencepiece; an
// accepted model then encodes and decodes a fixed text.
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_files.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // load_tokenizer sends '{' files to the tokenizer.json reader and
  // "hymba-byte-tokenizer" files to the byte reader; both have harnesses.
  const std::string_view text = hymba::fuzz::as_text(data, size);
  const std::string path = hymba::fuzz::write_input("tokenizer.model", text);
  hymba::fuzz::expect_clean([&] {
    const auto tok = hymba::load_tokenizer(path);
    const std::vector<int32_t> ids = tok->encode("Hello, world! 123 \xE2\x96\x81 \xFF\xFE x\n");
    for (int32_t id : ids)
      if (id < 0 || id >= tok->vocab_size()) {
        std::fprintf(stderr, "fuzz: encode gave id %d outside 0..%d\n", id, tok->vocab_size() - 1);
        std::abort();
      }
    (void)tok->decode(ids);
  });
  return 0;
}
