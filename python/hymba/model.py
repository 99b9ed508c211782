"""hymba.LanguageModel: a model with its tokenizer (the C++ hymba::LanguageModel)."""

import os
import queue
import threading

import numpy as np

from . import _hymba
from .training import _run_training


def _path(p):
    return os.fspath(p)


def _ids_2d(ids):
    """Token ids as a C-contiguous int32 array [B, T] (no copy when it is one already)."""
    a = np.asarray(ids)
    if a.dtype != np.int32:
        if a.size and not np.issubdtype(a.dtype, np.integer):
            raise _hymba.HymbaError(f"ids: expected integer token ids (got dtype {a.dtype})")
        a = a.astype(np.int32)
    a = np.ascontiguousarray(a)
    if a.ndim == 1:
        return a[np.newaxis, :], True
    return a, False


class _Cancelled(Exception):
    """Raised from the text callback to stop a streaming generate the consumer left."""


class LanguageModel:
    """A language model with its tokenizer.

    ``LanguageModel.load(dir)`` reads any directory ``hymba --ckpt`` takes;
    ``LanguageModel.create(preset=..., scale=..., **overrides)`` builds a
    freshly initialised one with the byte tokenizer. Not for use from several
    threads at once (the kernels are parallel already).
    """

    def __init__(self, handle):
        self._m = handle

    # -- construction -------------------------------------------------------

    @classmethod
    def load(cls, path):
        """A training run (its latest checkpoint), a checkpoint of ours, or a
        published HF Hymba / HF or state-spaces Mamba directory."""
        return cls(_hymba._LanguageModel.load(_path(path)))

    @classmethod
    def create(cls, preset=None, scale="tiny", seed=1234, config=None, **overrides):
        """A freshly initialised model from a built-in preset (hymba.presets())
        at a scale (tiny, small, seed), or from a full model config dict, with
        config fields overridden by keyword (e.g. num_hidden_layers=2), and
        the byte tokenizer; as ``hymba init``."""
        return cls(_hymba._LanguageModel.create(preset or "", scale, seed, config, overrides))

    # -- facts --------------------------------------------------------------

    @property
    def config(self):
        """The model config as a dict (config.json's fields)."""
        return self._m.config()

    def num_parameters(self):
        return self._m.num_parameters()

    @property
    def source(self):
        """The checkpoint directory it was loaded from or last saved to ("" if none)."""
        return self._m.source()

    @property
    def vocab_size(self):
        """The tokenizer's vocabulary (the model's may be padded beyond it)."""
        return self._m.vocab_size()

    def __repr__(self):
        return (f"hymba.LanguageModel({self.source or 'unsaved'!r}, "
                f"{self.num_parameters() / 1e6:.3f}M parameters)")

    def save(self, path):
        """Writes config.json, model.safetensors and the tokenizer; every --ckpt reads it."""
        self._m.save(_path(path))

    # -- text ---------------------------------------------------------------

    def encode(self, text):
        """Plain text to a list of token ids (no bos/eos added)."""
        return self._m.encode(text)

    def decode(self, ids):
        """Token ids (list or numpy array) to text; special tokens decode to nothing."""
        return self._m.decode(np.asarray(ids, dtype=np.int32).ravel())

    # -- generation ---------------------------------------------------------

    def generate(self, prompts, max_new_tokens=128, temperature=0.8, top_k=0, top_p=0.95, seed=0,
                 stop=None, stop_at_eos=True, stream=False, details=False, min_p=0.0, presence_penalty=0.0,
                 frequency_penalty=0.0, repetition_penalty=1.0, logit_bias=None):
        """Continues each prompt as ``hymba generate --prompt`` does, defaults
        included; sequence i samples from stream i of ``seed``. min_p, the
        penalties and logit_bias ({token id: bias in [-100, 100]}) are the
        flags of the same names.

        A str prompt gives a str, a list of prompts a list. details=True gives
        dicts instead: text, ids, prompt_ids, finish_reason. stream=True gives
        a generator of text chunks as they become final ((index, chunk) pairs
        for a list of prompts); leaving it early stops the generation.
        """
        single = isinstance(prompts, str)
        texts = [prompts] if single else list(prompts)
        args = (texts, max_new_tokens, temperature, top_k, top_p, seed, list(stop or []), stop_at_eos)
        extras = (min_p, presence_penalty, frequency_penalty, repetition_penalty,
                  {int(k): float(v) for k, v in (logit_bias or {}).items()})
        if stream:
            return self._stream(args, extras, single)
        out = self._m.generate(*args, None, *extras)
        if not details:
            out = [g["text"] for g in out]
        return out[0] if single else out

    def _stream(self, args, extras, single):
        # The engine calls back as text becomes final; a thread runs it and
        # hands the chunks over, so the caller iterates at its own pace.
        chunks = queue.Queue(maxsize=4)  # the engine waits for a slow consumer
        done = object()
        cancel = threading.Event()
        failure = []

        def on_text(index, text):
            if cancel.is_set():
                raise _Cancelled()
            chunks.put((index, text))

        def run():
            try:
                self._m.generate(*args, on_text, *extras)
            except _Cancelled:
                pass
            except BaseException as e:  # handed to the consumer
                failure.append(e)
            finally:
                chunks.put(done)

        def generator():
            worker = threading.Thread(target=run, name="hymba-generate", daemon=True)
            worker.start()
            try:
                while True:
                    item = chunks.get()
                    if item is done:
                        break
                    yield item[1] if single else item
                if failure:
                    raise failure[0]
            finally:
                cancel.set()
                # Drain so a blocked put() can see the cancel, then wait.
                while worker.is_alive():
                    try:
                        chunks.get(timeout=0.05)
                    except queue.Empty:
                        pass
                worker.join()

        return generator()

    # -- forward ------------------------------------------------------------

    def logits(self, ids):
        """Logits of one forward: [T, V] for a sequence of ids, [B, T, V] for
        a batch of equal-length sequences. float32; numpy owns the engine's
        output buffer (no copy beyond the one out of the activation arena)."""
        a, one = _ids_2d(ids)
        out = self._m.forward(a, False)
        return out[0] if one else out

    def hidden_states(self, ids):
        """Final-norm hidden states of the token positions: [T, d] or [B, T, d]
        (the LM head's input), float32, as logits()."""
        a, one = _ids_2d(ids)
        out = self._m.forward(a, True)
        return out[0] if one else out

    def token_logprobs(self, ids):
        """log p(ids[i + 1] | ids[..i]) for every i (float64, len(ids) - 1 values)."""
        return self._m.token_logprobs(np.asarray(ids, dtype=np.int32).ravel())

    def embed(self, inputs, pooling="mean"):
        """The embedding of a text or of token ids (float32, hidden_size
        values): the final hidden states of its tokens averaged ("mean") or
        the last one's ("last"), as ``POST /v1/embeddings`` gives them. A list
        of texts gives a list."""
        if pooling not in ("mean", "last"):
            raise ValueError(f"pooling: must be 'mean' or 'last' (got {pooling!r})")
        if isinstance(inputs, (list, tuple)) and inputs and isinstance(inputs[0], str):
            return [self.embed(t, pooling) for t in inputs]
        ids = self.encode(inputs) if isinstance(inputs, str) else inputs
        return self._m.embedding(np.asarray(ids, dtype=np.int32).ravel(), pooling == "last")

    # -- scoring ------------------------------------------------------------

    def score(self, texts, seq_len=0, batch=8, max_windows=0):
        """Loss (nats per token), ppl and next-token accuracy of a text (a dict
        with loss, ppl, accuracy, tokens, windows), or a list of them for a
        list of texts. seq_len 0: one window over the whole text; otherwise
        non-overlapping windows of seq_len + 1 tokens, as ``hymba eval``."""
        if isinstance(texts, str):
            return self._m.score(texts, seq_len, batch, max_windows)
        return [self._m.score(t, seq_len, batch, max_windows) for t in texts]

    def evaluate(self, data=None, split="val", seq_len=0, batch=8, max_windows=0):
        """Exactly ``hymba eval --ckpt SOURCE [--data SPEC] --split val|all``:
        defaults (data, seq_len) from the training run when this is one of its
        checkpoints. Returns loss, ppl, accuracy, tokens, windows, data, seq_len."""
        if split not in ("val", "all"):
            raise _hymba.HymbaError(f"split: 'val' or 'all' (got {split!r})")
        return self._m.evaluate(_path(data) if data else "", split == "all", seq_len, batch, max_windows)

    # -- fine-tuning --------------------------------------------------------

    def finetune(self, data, out, steps=None, batch=None, seq_len=None, lr=None, callback=None,
                 progress=True, **options):
        """Fine-tunes from source() into a new training run in ``out``, as
        ``hymba train --init SOURCE --out OUT``; this object then holds the
        run's latest checkpoint. Other recipe options by their flag names
        (warmup, eval_interval, seed, resume, ...). callback(record) sees every
        step. Ctrl-C stops at the next step with a checkpoint and raises
        KeyboardInterrupt; resume=True continues the run.

        Returns the run summary as a dict, with "metrics" (metrics.jsonl as a
        list of dicts)."""
        opts = dict(options, data=_path(data), out=_path(out), steps=steps, batch=batch, seq_len=seq_len, lr=lr)
        return _run_training(lambda hook: _hymba._finetune(self._m, opts, hook), opts, callback, progress)
