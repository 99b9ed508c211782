#include "formats/gguf_pre_tokenizers.h"

#include <array>

namespace hymba::gguf {

namespace {

// The patterns below are llama.cpp's (src/llama-vocab.cpp), written for
// PCRE2 with llama.cpp's matching rules: it runs \p{...} patterns on text
// whose non-ASCII characters are replaced by one byte per category, so
// \p{Lu}, \p{Ll}, \p{Lt}, \p{Lm} and \p{Lo} all stand for \p{L} (every
// letter, either case), \d and $ are ASCII digits and the end of the piece,
// and the few types it splits by hand (kimi-k2, afmoe and tiny_aya digits)
// are the regexes its code computes.

#define CONTRACTIONS "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"

constexpr const char* kGpt2 = R"re('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))re";
constexpr const char* kLlama3 =
    CONTRACTIONS R"re(|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
constexpr const char* kQwen2 =
    CONTRACTIONS R"re(|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
constexpr const char* kFinnish = R"re( ?[^(\s|.,!?…。，、।۔،)]+)re";
constexpr const char* kNewlineRuns = R"re([^\n]+|[\n]+)re";
// Runs of digits cut into groups of three from the right (1234567: 1, 234, 567).
constexpr const char* kDigitsFromRight = R"re(\p{N}{1,3}(?=(?:\p{N}{3})*(?!\p{N})))re";
constexpr const char* kHyMain =
    R"re([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
constexpr const char* kCjkKana = R"re([一-龥぀-ゟ゠-ヿ]+)re";
constexpr const char* kGpt4o =
    R"re([^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+)re" CONTRACTIONS
    R"re(?|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*)re" CONTRACTIONS
    R"re(?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
// llama.cpp's Han ranges (unicode_cpt_is_han).
#define HAN                                                                                                   \
  R"re(\x{4E00}-\x{9FFF}\x{3400}-\x{4DBF}\x{20000}-\x{2A6DF}\x{2A700}-\x{2B73F}\x{2B740}-\x{2B81F}\x{2B820}-)re" \
  R"re(\x{2CEAF}\x{2CEB0}-\x{2EBEF}\x{F900}-\x{FAFF}\x{2F800}-\x{2FA1F})re"

struct Entry {
  const char* type;
  std::vector<const char*> names;
  std::vector<const char*> regexes;
  bool byte_encode = true, ignore_merges = false, add_bos = false;
};

const std::vector<Entry>& table() {
  static const std::vector<Entry> t = {
      {"default", {"default"}, {R"re([\p{P}\$\+<=>\^~\|]+)re", kGpt2, R"re(\p{N}+)re", "[0-9][0-9][0-9]"}},
      {"minicpm5", {"minicpm5"},
       {R"re(\p{N}{1,3})re",
        CONTRACTIONS R"re(|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}+| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re"},
       true, true},
      {"llama3",
       {"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2", "jina-v5-nano"},
       {kLlama3}, true, true, true},
      {"deepseek-llm", {"deepseek-llm"},
       {R"re([\r\n])re", R"re(\s?[A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓʕ-ʯͰ-ͳͶͷͻ-ͽͿΆΈ-ΊΌΎ-ΡΣ-ϵϷ-ҁҊ-ԯԱ-ՖႠ-ჅᎠ-Ᏽᏸ-ᏽᲐ-ᲺᲽ-Ჿᴀ-ᴫᵫ-ᵷᵹ-ᶚḀ-ἕἘ-Ἕἠ-ὅὈ-Ὅὐ-ὗὙὛὝὟ-ώᾀ-ᾴᾶ-ᾼιῂ-ῄῆ-ῌῐ-ΐῖ-Ίῠ-Ῥῲ-ῴῶ-ῼℂℇℊ-ℓℕℙ-ℝℤΩℨK-ℭℯ-ℴℹℼ-ℿⅅ-ⅉⅎↃↄⰀ-ⱻⱾ-ⳤⳫ-ⳮⳲⳳꙀ-ꙭꚀ-ꚛꜢ-ꝯꝱ-ꞇꞋ-ꞎꭰ-ꮿﬀ-ﬆﬓ-ﬗＡ-Ｚａ-ｚ𐐀-𐑏𐒰-𐓓𐓘-𐓻𐲀-𐲲𐳀-𐳲𑢠-𑣟𞤀-𞥃]+)re", R"re(\s?[!-/:-~！-／：-～‘-‟　-。]+)re", R"re(\s+\z)re", R"re([一-龥ࠀ-一가-퟿]+)re", R"re(\p{N}+)re"}},
      {"deepseek-coder", {"deepseek-coder"},
       {R"re([\r\n])re", R"re(\s?\p{L}+)re", R"re(\s?\p{P}+)re", R"re([一-龥ࠀ-一가-퟿]+)re", R"re(\p{N})re"}},
      {"deepseek3-llm", {"deepseek-v3", "hunyuan-dense", "joyai-llm", "hy_v4"},
       {R"re(\p{N}{1,3})re", kCjkKana, kHyMain}},
      {"spark2_5", {"spark2_5"},
       {R"re(\p{N}{1,3})re", kCjkKana,
        R"re([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+|[\r\n]|\s+(?!\S)|\s+)re",
        R"re(\p{N})re"}},
      {"youtu", {"youtu"},
       {R"re([가-힣ㄱ-ㆎ]+|[！…“”‘’—：；，、-〿︰-﹏]+|[ㄅ-ㄯ]+|[一-龥぀-ゟ゠-ヿ]+)re",
        R"re([^\r\n\p{L}\p{N}]?[\p{L}\p{M}]*[\p{L}\p{M}]+)re" CONTRACTIONS
        R"re(?|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+[\p{L}\p{M}]*)re" CONTRACTIONS
        R"re(?|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)re"},
       true, true},
      {"falcon", {"falcon"}, {R"re([\p{P}\$\+<=>\^~\|`]+)re", kGpt2, "[0-9][0-9][0-9]"}},
      {"mpt", {"mpt"}, {kGpt2}},
      {"starcoder", {"starcoder"}, {R"re(\p{N})re", kGpt2}},
      {"gpt2",
       {"gpt-2", "phi-2", "jina-es", "jina-de", "gigachat", "jina-v2-es", "jina-v2-de", "a.x-4.0", "mellum",
        "modern-bert", "jina-v1-en", "jina-v2-code", "roberta-bpe", "exaone4"},
       {kGpt2}},
      {"jais-2", {"jais-2"},
       {CONTRACTIONS R"re(|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s{512}(?!\S)|)re"
                     R"re(\s{256}(?!\S)|\s{128}(?!\S)|\s{64}(?!\S)|\s{32}(?!\S)|\s{16}(?!\S)|\s{8}(?!\S)|\s{4}(?!\S)|)re"
                     R"re(\s{1,2}(?!\S)|\s{1})re"}},
      {"gemma4", {"gemma4", "granite-embed-multi-311m"}, {kNewlineRuns}, false},
      {"sarvam-moe", {"sarvam-moe"}, {kNewlineRuns}, false},
      {"whitespace", {"whitespace"}, {R"re(\S+)re"}, false},
      {"refact", {"refact"}, {R"re(\p{N})re", kGpt2}},
      {"command-r", {"command-r"}, {R"re(\p{N})re", kGpt2}},
      {"qwen2", {"qwen2", "deepseek-r1-qwen", "kormo", "f2llmv2", "megrez"}, {kQwen2}},
      {"qwen35", {"qwen35"},
       {CONTRACTIONS
        R"re(|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re"}},
      {"stablelm2", {"stablelm2"}, {kQwen2}},
      {"olmo", {"olmo"}, {kGpt2}},
      {"dbrx", {"dbrx"}, {kLlama3}},
      {"smaug", {"smaug-bpe"}, {kLlama3}},
      {"poro", {"poro-chat"}, {kFinnish}},
      {"chatglm4", {"glm4", "chatglm-bpe"}, {kLlama3}},
      {"viking", {"viking"}, {kFinnish, R"re(\p{N})re"}},
      {"jais", {"jais"}, {kGpt2}},
      {"tekken", {"tekken"},
       {R"re([^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)re"},
       true, true, true},
      {"smollm", {"smollm"}, {R"re(\p{N})re", kGpt2}},
      {"codeshell", {"codeshell"}, {R"re(\p{N})re", kGpt2}},
      {"bloom", {"bloom"}, {kFinnish}},
      {"gpt3-finnish", {"gpt3-finnish"}, {kFinnish}},
      {"exaone", {"exaone"}, {R"re(\p{N})re", kGpt2}},
      {"exaone-moe", {"exaone-moe"},
       {CONTRACTIONS
        R"re(|[^\r\n\p{L}\p{N}]?(?:\p{L}\p{M}*(?: \p{L}\p{M}*)*)+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]?|\s*[\r\n]|\s+(?!\S)|\s+)re"}},
      {"chameleon", {"chameleon"},
       {"<sentinel:[0-9]+>", "(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z", R"re(([\t\n]|    |  ))re", R"re(\p{N})re",
        R"re([\p{P}!-/:-@\[-`{-~])re", kGpt2},
       true, false, true},
      {"minerva", {"minerva-7b"}, {R"re(\p{N})re", kGpt2}},
      {"gpt-4o", {"gpt-4o", "llama4", "kanana2", "talkie", "minimax-m2"}, {kGpt4o}},
      {"granite-embed-multi", {"granite-embed-multi-97m"},
       {R"re([^\r\n\p{L}\p{N}]?((?=[\p{L}\p{M}])([^a-z]))*((?=[\p{L}\p{M}])([^A-Z]))+)re" CONTRACTIONS
        R"re(?|[^\r\n\p{L}\p{N}]?((?=[\p{L}\p{M}])([^a-z]))+((?=[\p{L}\p{M}])([^A-Z]))*)re" CONTRACTIONS
        R"re(?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)re"},
       true, true},
      {"tiny_aya", {"tiny_aya", "cohere2moe"},
       {kDigitsFromRight,
        R"re([^\r\n\p{L}\p{N}]?[\p{L}\p{M}]*[\p{L}\p{M}]+)re" CONTRACTIONS
        R"re(?|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+[\p{L}\p{M}]*)re" CONTRACTIONS
        R"re(?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)re"}},
      {"superbpe", {"superbpe"}, {R"re(\p{N}+)re", R"re((?=([0-9]{3})+(?![0-9])))re"}},
      {"trillion", {"trillion"}, {kGpt2}},
      {"granite-docling", {"granite-docling"}, {kGpt2}},
      {"bailingmoe", {"bailingmoe", "bailingmoe2", "llada-moe"},
       {R"re('(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+)re"}},
      {"seed-coder", {"seed-coder"},
       {CONTRACTIONS
        R"re(|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1}| ?[^\s\p{L}\p{N}\r\n]+|\s*[\r\n]+|\s+(?!\S)|\s+)re"}},
      {"hunyuan", {"hunyuan"}, {kQwen2}},
      {"kimi-k2", {"kimi-k2"},
       {"[" HAN "]+|[^\\r\\n\\p{L}\\p{N}]?(?:(?![" HAN "])\\p{L})+" CONTRACTIONS
        R"re(?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re"}},
      {"ufakzeka", {"ufakzeka"},
       {R"re([^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re"}},
      {"grok-2", {"grok-2"}, {kQwen2}},
      {"afmoe", {"afmoe"}, {kDigitsFromRight, R"re([一-鿿㐀-䶿豈-﫿぀-ゟ゠-ヿ･-ﾟ⼀-⿟เ-๿຀-໿ក-៿က-႟ꩠ-ꩿꧠ-꧿가-힯ᄀ-ᇿ]+)re", kHyMain}},
      {"laguna", {"laguna"}, {kNewlineRuns, kQwen2}},
      {"solar-open", {"solar-open"}, {kQwen2}},
      {"mellum2", {"mellum2"}, {R"re(\p{N})re", kGpt2}},
  };
  return t;
}

}  // namespace

std::optional<BpePreTokenizer> bpe_pre_tokenizer(std::string_view pre) {
  if (pre.empty()) pre = "default";
  for (const Entry& e : table())
    for (const char* name : e.names)
      if (pre == name) {
        BpePreTokenizer p;
        p.type = e.type;
        p.regexes.assign(e.regexes.begin(), e.regexes.end());
        p.byte_encode = e.byte_encode;
        p.ignore_merges = e.ignore_merges;
        p.add_bos = e.add_bos;
        p.escape_whitespaces = p.type == "gemma4" || p.type == "sarvam-moe";
        return p;
      }
  return std::nullopt;
}

std::optional<std::string> pre_of_published_regex(std::string_view regex) {
  static const std::array<std::pair<const char*, const char*>, 3> published = {{
      {"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
       "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
       "llama-bpe"},
      {"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
       "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
       "qwen2"},
      {"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+"
       "[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
       "qwen35"},
  }};
  for (const auto& [r, name] : published)
    if (regex == r) return std::string(name);
  return std::nullopt;
}

std::vector<std::string> bpe_pre_tokenizer_names() {
  std::vector<std::string> names;
  for (const Entry& e : table()) names.insert(names.end(), e.names.begin(), e.names.end());
  return names;
}

}  // namespace hymba::gguf
