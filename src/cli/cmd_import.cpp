// `hymba import`: a published checkpoint (official Hymba, HF or state-spaces
// Mamba, HF GPT-Neo; safetensors, sharded or not, or pytorch_model.bin; F32/BF16/F16) into our layout.
// `hymba import --in FILE.gguf`: a GGUF file (llama, mamba or hymba arch) likewise.
// `hymba export --format hf`: our checkpoint as a directory HF transformers loads.
// `hymba export --format gguf`: our checkpoint as one GGUF file llama.cpp loads (docs/gguf.md).
// `hymba quantize`: a checkpoint whose linear weights are stored in q8 / q4 blocks (docs/inference.md).
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "cli/commands.h"
#include "core/atomic_file.h"
#include "core/error.h"
#include "core/float_formats.h"
#include "tokenizer/tokenizer_files.h"
#include "formats/checkpoint.h"
#include "formats/hf_export.h"
#include "formats/gguf.h"
#include "formats/gguf_model.h"
#include "formats/gguf_tokenizer.h"
#include "formats/held_checkpoint.h"
#include "formats/hf_import.h"
#include "train/run_state.h"

namespace hymba::cli {

namespace fs = std::filesystem;

namespace {
// Copies a checkpoint directory's tokenizer files into out as they are
// (generate reads tokenizer.model or tokenizer.json); returns how many.
int copy_tokenizer_files(const std::string& dir, const std::string& out) {
  int copied = 0;
  for (const char* f : {kTokenizerFile, "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
                        gguf::kGgmlVocabFile}) {
    const fs::path p = fs::path(dir) / f;
    if (!fs::exists(p)) continue;
    write_text_atomic((fs::path(out) / f).string(), read_file(p.string()));
    ++copied;
  }
  return copied;
}
// `hymba import`: a published checkpoint or a GGUF file into a checkpoint of ours.
void register_import(CLI::App& app, const GlobalOptions& global) {
  struct Options {
    std::string in, out;
  };
  auto opts = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "import",
      "Convert a published checkpoint (HF Hymba, HF or state-spaces Mamba, HF GPT-Neo, or a GGUF file) into a "
      "hymba.cpp checkpoint");
  cmd->add_option("--in", opts->in, "Downloaded model directory (config.json + model.safetensors, its shards, or "
                                    "pytorch_model.bin), or a .gguf file (arch llama, mamba or hymba)")
      ->required();
  cmd->add_option("--out", opts->out, "Checkpoint directory to write (config.json, model.safetensors, tokenizer)")
      ->required();
  cmd->footer("Any command taking --ckpt also reads such a directory directly; import saves the conversion.");
  cmd->callback([opts, &global] {
    apply_global_options(global);
    HYMBA_CHECK(fs::weakly_canonical(opts->in) != fs::weakly_canonical(opts->out),
                "--out must differ from --in (import writes a new directory)");
    if (is_gguf_file(opts->in)) {
      const gguf::File file = gguf::File::open(opts->in);
      const std::string arch = file.get_string("general.architecture");
      // Q8_0 / Q4_0 linear weights stay blocks in the written checkpoint.
      auto model = load_model(opts->in, false, /*keep_blocks=*/true);
      save_model(opts->out, *model, {{"imported_from", "gguf " + arch}});
      std::string tokenizer = "no tokenizer";
      if (gguf::has_tokenizer(file)) {
        const CheckpointTokenizer tok = gguf::tokenizer_from_gguf(file);
        tokenizer = "tokenizer " + fs::path(save_tokenizer_files(*tok.tokenizer, opts->out)).filename().string();
        gguf::save_ggml_vocab(file, *tok.tokenizer, opts->out);
      }
      const std::string kept =
          model->held().empty() ? std::string()
                                : " (" + std::to_string(model->held().size()) + " weight matrices kept in " +
                                      to_string(*model->held_format()) + " blocks)";
      std::printf("imported GGUF (%s) %s: %lld parameters in %zu tensors%s, %s -> %s\n", arch.c_str(),
                  opts->in.c_str(), static_cast<long long>(model->params().num_params()),
                  model->params().rows().size(), kept.c_str(), tokenizer.c_str(), opts->out.c_str());
      return;
    }
    HYMBA_CHECK(fs::is_directory(opts->in), "--in ", opts->in, ": not a directory or a GGUF file");
    const std::string config_path = (fs::path(opts->in) / kConfigFile).string();
    const CheckpointLayout layout = detect_layout(read_json_file(config_path), config_path);
    auto model = load_model(opts->in, false);
    save_model(opts->out, *model, {{"imported_from", to_string(layout)}});
    const int copied = copy_tokenizer_files(opts->in, opts->out);
    std::printf("imported %s checkpoint %s: %lld parameters in %zu tensors, %d tokenizer file%s -> %s\n",
                to_string(layout), opts->in.c_str(), static_cast<long long>(model->params().num_params()),
                model->params().rows().size(), copied, copied == 1 ? "" : "s", opts->out.c_str());
  });
}

// `hymba quantize`: a checkpoint whose linear weights are stored as blocks or bf16.
void register_quantize(CLI::App& app, const GlobalOptions& global) {
  struct Options {
    std::string ckpt, out, weights;
  };
  auto opts = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "quantize", "Write a checkpoint whose linear weights are stored in q8 or q4 blocks or as bf16: inference "
                  "loads them by mmap and multiplies them as stored, without a float32 copy (float32 work such as "
                  "training is refused on it; keep the float32 checkpoint for that)");
  cmd->add_option("--ckpt", opts->ckpt, "Checkpoint or run directory, or a .gguf file")->required();
  cmd->add_option("--weights", opts->weights,
                  "q8 (blocks of 32: an f16 scale and 32 int8, GGUF's Q8_0) or q4 (an f16 scale and 32 4-bit "
                  "values, GGUF's Q4_0) or bf16 (BF16 tensors, each weight rounded to nearest even: half of "
                  "f32's bytes, the bf16 kernels' input); embeddings, norms, Mamba A/D/dt/conv and the output head "
                  "stay f32")
      ->required()
      ->check(CLI::IsMember({"q8", "q4", "bf16"}));
  cmd->add_option("--out", opts->out, "Checkpoint directory to write (config.json, model.safetensors, tokenizer)")
      ->required();
  cmd->callback([opts, &global] {
    apply_global_options(global);
    const std::string ckpt = resolve_checkpoint(opts->ckpt);
    HYMBA_CHECK(fs::weakly_canonical(ckpt) != fs::weakly_canonical(opts->out),
                "--out must differ from --ckpt (quantize writes a new directory)");
    const BlockFormat format = opts->weights == "bf16" ? BlockFormat::kBF16
                               : opts->weights == "q4"  ? BlockFormat::kQ4
                                                        : BlockFormat::kQ8;
    auto model = load_model(ckpt, false);  // float32 (a quantized one is widened, with a note)
    const int64_t n = hold_quantized(*model, format);
    int64_t bytes = 0;
    for (const auto& kv : model->held()) bytes += kv.second.bytes();
    save_model(opts->out, *model, {{"quantized_from", ckpt}, {"weights", to_string(format)}});
    // The tokenizer travels as it is (a checkpoint may have none, e.g. `hymba init`'s).
    int copied = 0;
    if (is_gguf_file(ckpt)) {
      const gguf::File file = gguf::File::open(ckpt);
      if (gguf::has_tokenizer(file)) {
        const CheckpointTokenizer tok = gguf::tokenizer_from_gguf(file);
        (void)save_tokenizer_files(*tok.tokenizer, opts->out);
        gguf::save_ggml_vocab(file, *tok.tokenizer, opts->out);
        ++copied;
      }
    } else {
      copied = copy_tokenizer_files(ckpt, opts->out);
    }
    std::printf("quantized %s: %lld weight matrices to %s%s (%.1f MB; %lld parameters in all), %d tokenizer "
                "file%s -> %s\n",
                ckpt.c_str(), static_cast<long long>(n), to_string(format),
                format == BlockFormat::kBF16 ? "" : " blocks", static_cast<double>(bytes) / 1e6,
                static_cast<long long>(model->params().num_params()), copied, copied == 1 ? "" : "s",
                opts->out.c_str());
  });
}

// `hymba export`: a directory HF transformers loads, or a GGUF file llama.cpp loads.
void register_export(CLI::App& app, const GlobalOptions& global) {
  struct Options {
    std::string ckpt, out, format = "hf", dtype = "f32";
  };
  auto opts = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "export", "Write a checkpoint as a directory HF transformers loads, or as a GGUF file llama.cpp loads");
  cmd->add_option("--ckpt", opts->ckpt, "Checkpoint or run directory")->required();
  cmd->add_option("--format", opts->format, "Output format (hf: config.json with architectures, HF tensor "
                                            "names, tokenizer files; gguf: one .gguf file, arch mamba, llama, qwen2 or "
                                            "hymba, docs/gguf.md)")
      ->capture_default_str();
  cmd->add_option("--dtype", opts->dtype,
                  "Weight dtype in model.safetensors: f32, bf16 or f16, rounded to nearest even (bf16 and f16 halve "
                  "the file; the released Hymba-1.5B is bf16; f16 refuses a weight that would round to inf, "
                  "|x| >= 65520). gguf: f32, f16, q8_0 or q4_0 (norms, conv, A, D and biases stay f32)")
      ->capture_default_str();
  cmd->add_option("--out", opts->out, "Directory to write (hf), or the .gguf file (gguf)")->required();
  cmd->callback([opts, &global] {
    apply_global_options(global);
    HYMBA_CHECK(opts->format == "hf" || opts->format == "gguf", "--format '", opts->format,
                "' is not supported (hf or gguf)");
    if (opts->format == "gguf") {
      const std::optional<gguf::ExportDtype> dtype = gguf::parse_export_dtype(opts->dtype);
      HYMBA_CHECK(dtype.has_value(), "--dtype '", opts->dtype, "' is not supported with --format gguf (f32, f16, "
                  "q8_0 or q4_0)");
      const std::string ckpt = resolve_checkpoint(opts->ckpt);
      HYMBA_CHECK(!fs::is_directory(opts->out), "--out ", opts->out, ": a directory; --format gguf writes one file");
      HYMBA_CHECK(fs::weakly_canonical(ckpt) != fs::weakly_canonical(opts->out),
                  "--out must differ from --ckpt (export writes a new file)");
      auto model = load_model(ckpt, false);
      const gguf::ExportSummary s = gguf::export_gguf(*model, ckpt, opts->out, *dtype);
      if (!s.note.empty()) std::fprintf(stderr, "hymba: note: %s\n", s.note.c_str());
      std::printf("exported %s (%lld parameters) as GGUF arch %s, %s, %lld tensors (%lld quantized) -> %s\n",
                  ckpt.c_str(), static_cast<long long>(model->params().num_params()), s.architecture.c_str(),
                  gguf::to_string(*dtype), static_cast<long long>(s.tensors), static_cast<long long>(s.quantized),
                  opts->out.c_str());
      return;
    }
    const std::optional<FloatFormat> dtype = float_format_from_name(opts->dtype);
    HYMBA_CHECK(dtype.has_value(), "--dtype '", opts->dtype, "' is not supported (f32, bf16 or f16)");
    const std::string ckpt = resolve_checkpoint(opts->ckpt);
    HYMBA_CHECK(fs::weakly_canonical(ckpt) != fs::weakly_canonical(opts->out),
                "--out must differ from --ckpt (export writes a new directory)");
    auto model = load_model(ckpt, false);
    const std::string note = export_hf(*model, ckpt, opts->out, *dtype);
    if (!note.empty()) std::fprintf(stderr, "hymba: note: %s\n", note.c_str());
    std::printf("exported %s (%lld parameters, %s) as HF %s -> %s\n", ckpt.c_str(),
                static_cast<long long>(model->params().num_params()), to_string(*dtype),
                read_json_file((fs::path(opts->out) / "config.json").string())["architectures"][0]
                    .get<std::string>()
                    .c_str(),
                opts->out.c_str());
  });
}

}  // namespace

void register_import_export(CLI::App& app, const GlobalOptions& global) {
  register_import(app, global);
  register_quantize(app, global);
  register_export(app, global);
}

}  // namespace hymba::cli
