// tokenizer_config.json beside a valid tokenizer.json, read as a checkpoint
// directory is loaded: special tokens (strings or AddedToken objects) and
// add_bos_token.
#include <string>

#include "tokenizer/hf_tokenizer.h"
#include "tokenizer/tokenizer_files.h"
#include "tokenizer/tokenizer.h"
#include "fuzz_util.h"

namespace {

// A minimal byte-level BPE tokenizer.json: the 256 byte characters, one
// merge and <|endoftext|>.
std::string minimal_tokenizer_json() {
  std::string vocab;
  int id = 0, extra = 0;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    const unsigned cp = printable ? static_cast<unsigned>(b) : 256u + static_cast<unsigned>(extra++);
    char esc[16];
    std::snprintf(esc, sizeof esc, "\\u%04x", cp);
    vocab += (vocab.empty() ? "" : ",") + std::string("\"") + esc + "\":" + std::to_string(id++);
  }
  vocab += ",\"he\":" + std::to_string(id++);
  const int eot = id++;
  return R"({"version":"1.0","added_tokens":[{"id":)" + std::to_string(eot) +
         R"(,"content":"<|endoftext|>","special":true}],"normalizer":null,)"
         R"("pre_tokenizer":{"type":"ByteLevel","add_prefix_space":false,"trim_offsets":true,"use_regex":true},)"
         R"("decoder":{"type":"ByteLevel"},"model":{"type":"BPE","vocab":{)" +
         vocab + R"(},"merges":["h e"]}})";
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string dir = [] {
    hymba::fuzz::write_input("tc/tokenizer.json", minimal_tokenizer_json());
    return (hymba::fuzz::work_dir() / "tc").string();
  }();
  hymba::fuzz::write_input("tc/tokenizer_config.json", hymba::fuzz::as_text(data, size));
  hymba::fuzz::expect_clean([&] {
    const hymba::CheckpointTokenizer t = hymba::load_checkpoint_tokenizer(dir);
    (void)t.tokenizer->encode("hello <|endoftext|>");
  });
  return 0;
}
