/* The llama.cpp side of bench/quant_peer.py: prefill and decode speed of a
 * GGUF file in llama.cpp's prebuilt CPU library (npm package
 * @node-llama-cpp/linux-x64, v0.5.0), as a user runs it: the context's
 * default cache types and attention, batch 1, the given thread count.
 * Never needed by the engine's build or tests.
 *
 *   llama_speed MODEL.gguf PROMPT_LEN NEW_TOKENS THREADS ROUNDS
 *
 * Each round clears the cache, prefills PROMPT_LEN token ids (one batch,
 * logits of the last position only) and decodes NEW_TOKENS greedy tokens
 * one at a time. Prints one JSON line: the load time, each round's prefill
 * and decode tok/s and the process's peak RSS.
 *
 * Build (peer.py and quant_peer.py do it):
 *   cc -O2 bench/llama_speed.c -I LLAMA_SRC/include -I LLAMA_SRC/ggml/include \
 *      -L LIBDIR -l:libllama.v0.5.0.so -l:libggml.v0.5.0.so -l:libggml-base.so \
 *      -Wl,-rpath,LIBDIR -o llama_speed */
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>

#include "ggml-backend.h"
#include "llama.h"

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

static void die(const char* what) {
  fprintf(stderr, "llama_speed: %s\n", what);
  exit(1);
}

static void put(struct llama_batch* b, int i, llama_token id, int pos, int logits) {
  b->token[i] = id;
  b->pos[i] = pos;
  b->n_seq_id[i] = 1;
  b->seq_id[i][0] = 0;
  b->logits[i] = (int8_t)logits;
}

static llama_token argmax(const float* logits, int n) {
  int best = 0;
  for (int i = 1; i < n; ++i)
    if (logits[i] > logits[best]) best = i;
  return best;
}

/* One round: returns the prefill and decode seconds. */
static void round_once(struct llama_context* ctx, int n_vocab, int prompt, int steps, double* t_prefill,
                       double* t_decode) {
  struct llama_batch batch = llama_batch_init(prompt, 0, 1);
  llama_memory_clear(llama_get_memory(ctx), 1);
  for (int i = 0; i < prompt; ++i) put(&batch, i, (llama_token)((i * 7919 + 13) % n_vocab), i, i == prompt - 1);
  batch.n_tokens = prompt;
  double t0 = now();
  if (llama_decode(ctx, batch) != 0) die("prefill failed");
  llama_token next = argmax(llama_get_logits_ith(ctx, -1), n_vocab);
  *t_prefill = now() - t0;
  t0 = now();
  for (int s = 0; s < steps; ++s) {
    batch.n_tokens = 1;
    put(&batch, 0, next, prompt + s, 1);
    if (llama_decode(ctx, batch) != 0) die("decode failed");
    next = argmax(llama_get_logits_ith(ctx, -1), n_vocab);
  }
  *t_decode = now() - t0;
  llama_batch_free(batch);
}

int main(int argc, char** argv) {
  if (argc != 6) die("usage: llama_speed MODEL.gguf PROMPT_LEN NEW_TOKENS THREADS ROUNDS");
  const int prompt = atoi(argv[2]), steps = atoi(argv[3]), threads = atoi(argv[4]), rounds = atoi(argv[5]);
  if (prompt < 1 || steps < 1 || threads < 1 || rounds < 1) die("PROMPT_LEN, NEW_TOKENS, THREADS and ROUNDS must be >= 1");
  ggml_backend_load_all_from_path(getenv("LLAMA_PEER_LIBDIR"));
  llama_backend_init();
  const double t_load = now();
  struct llama_model* model = llama_model_load_from_file(argv[1], llama_model_default_params());
  if (!model) die("llama.cpp could not load the model");
  struct llama_context_params cp = llama_context_default_params();
  cp.n_ctx = (uint32_t)(prompt + steps + 8);
  cp.n_batch = cp.n_ubatch = (uint32_t)prompt;
  cp.n_threads = cp.n_threads_batch = threads;
  struct llama_context* ctx = llama_init_from_model(model, cp);
  if (!ctx) die("could not create a context");
  const double load_s = now() - t_load;
  const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
  printf("{\"load_s\": %.3f, \"rounds\": [", load_s);
  for (int r = 0; r < rounds; ++r) {
    double tp, td;
    round_once(ctx, n_vocab, prompt, steps, &tp, &td);
    printf("%s{\"prefill_tok_s\": %.2f, \"decode_tok_s\": %.2f}", r ? ", " : "", prompt / tp, steps / td);
  }
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  printf("], \"peak_rss_bytes\": %ld}\n", ru.ru_maxrss * 1024L);
  llama_free(ctx);
  llama_model_free(model);
  return 0;
}
