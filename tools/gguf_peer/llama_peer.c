/* Runs a GGUF file in llama.cpp's prebuilt CPU library (npm package
 * @node-llama-cpp/linux-x64) for the peer check of docs/gguf.md. Built and
 * driven by peer.py; never needed by the engine's build or tests.
 *
 *   llama_peer MODEL.gguf logits IDS.txt OUT.f32   all positions' logits, float32 [n, vocab]
 *   llama_peer MODEL.gguf greedy IDS.txt N OUT.txt N greedy tokens after the ids (one decode per token)
 *   llama_peer MODEL.gguf tokenize TEXT.txt OUT.txt  ids of the text (no bos/eos added; special-token text matched, as HF tokenizers do)
 *   llama_peer MODEL.gguf tokenize_plain TEXT.txt OUT.txt  the same with special-token text as plain text (as sentencepiece)
 *   llama_peer VOCAB.gguf tokenize_vocab TEXT.txt OUT.txt  tokenize_plain loading the vocabulary only (a file without tensors)
 *
 * The KV cache is F32 (llama.cpp's default F16 cache costs ~1e-3 in the logits). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ggml-backend.h"
#include "llama.h"

static int read_ids(const char* path, llama_token* ids, int max) {
  FILE* f = fopen(path, "r");
  if (!f) { fprintf(stderr, "cannot open %s\n", path); exit(2); }
  int n = 0;
  while (n < max && fscanf(f, "%d", &ids[n]) == 1) ++n;
  fclose(f);
  return n;
}

static void die(const char* what) { fprintf(stderr, "llama_peer: %s\n", what); exit(1); }

int main(int argc, char** argv) {
  if (argc < 5) die("usage: llama_peer MODEL.gguf logits|greedy|tokenize IN [N] OUT");
  const char* mode = argv[2];
  ggml_backend_load_all_from_path(getenv("LLAMA_PEER_LIBDIR"));
  llama_backend_init();
  struct llama_model_params mp = llama_model_default_params();
  const int vocab_only = strcmp(mode, "tokenize_vocab") == 0;
  mp.vocab_only = vocab_only;
  struct llama_model* model = llama_model_load_from_file(argv[1], mp);
  if (!model) die("llama.cpp could not load the model");
  const struct llama_vocab* vocab = llama_model_get_vocab(model);
  const int n_vocab = llama_vocab_n_tokens(vocab);

  if (strcmp(mode, "tokenize") == 0 || strcmp(mode, "tokenize_plain") == 0 || vocab_only) {
    FILE* f = fopen(argv[3], "rb");
    if (!f) die("cannot open the text");
    static char text[1 << 20];
    const int len = (int)fread(text, 1, sizeof text, f);
    fclose(f);
    static llama_token ids[1 << 20];
    const int n = llama_tokenize(vocab, text, len, ids, 1 << 20, false, strcmp(mode, "tokenize") == 0);
    if (n < 0) die("tokenize failed");
    FILE* out = fopen(argv[4], "w");
    for (int i = 0; i < n; ++i) fprintf(out, "%d\n", ids[i]);
    fclose(out);
    return 0;
  }

  static llama_token ids[8192];
  const int n = read_ids(argv[3], ids, 8192);
  const int n_new = strcmp(mode, "greedy") == 0 ? atoi(argv[4]) : 0;
  struct llama_context_params cp = llama_context_default_params();
  cp.n_ctx = (uint32_t)(n + n_new + 8);
  cp.n_batch = cp.n_ubatch = (uint32_t)(n + 8);
  cp.n_threads = cp.n_threads_batch = 2;
  cp.type_k = GGML_TYPE_F32;
  cp.type_v = GGML_TYPE_F32;
  cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
  struct llama_context* ctx = llama_init_from_model(model, cp);
  if (!ctx) die("could not create a context");
  struct llama_batch batch = llama_batch_init(n + 8, 0, 1);
  for (int i = 0; i < n; ++i) {
    batch.token[i] = ids[i];
    batch.pos[i] = i;
    batch.n_seq_id[i] = 1;
    batch.seq_id[i][0] = 0;
    batch.logits[i] = 1;
  }
  batch.n_tokens = n;
  if (llama_decode(ctx, batch) != 0) die("decode failed");
  if (strcmp(mode, "logits") == 0) {
    FILE* out = fopen(argv[4], "wb");
    for (int i = 0; i < n; ++i) fwrite(llama_get_logits_ith(ctx, i), sizeof(float), (size_t)n_vocab, out);
    fclose(out);
  } else {
    FILE* out = fopen(argv[5], "w");
    int last = n - 1;
    for (int t = 0; t < n_new; ++t) {
      const float* lg = llama_get_logits_ith(ctx, last);
      int best = 0;
      for (int v = 1; v < n_vocab; ++v) if (lg[v] > lg[best]) best = v;
      fprintf(out, "%d\n", best);
      batch.n_tokens = 1;
      batch.token[0] = best;
      batch.pos[0] = n + t;
      batch.n_seq_id[0] = 1;
      batch.seq_id[0][0] = 0;
      batch.logits[0] = 1;
      if (llama_decode(ctx, batch) != 0) die("decode failed");
      last = 0;
    }
    fclose(out);
  }
  llama_batch_free(batch);
  llama_free(ctx);
  llama_model_free(model);
  return 0;
}
