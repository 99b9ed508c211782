"""hymba.LanguageModel against the `hymba` command: generation token for
token, logits to the last bit, scores; numpy arrays without copies; errors."""

import gc
import json

import numpy as np
import pytest

import hymba
from conftest import TEXT, two_equal_blocks, read_safetensors


@pytest.fixture(scope="module")
def lm(workdir):
    return hymba.LanguageModel.load(workdir / "ck")


def test_load_and_facts(lm, workdir, cli):
    assert lm.source == str(workdir / "ck")
    assert lm.config["vocab_size"] == 259  # the byte tokenizer's
    info = json.loads(cli("info", "--config", str(workdir / "ck" / "config.json"), "--json").stdout)
    assert lm.num_parameters() == info["model"]["total_params"]
    assert lm.decode(lm.encode("héllo")) == "héllo"
    assert lm.decode(np.array(lm.encode("abc"), dtype=np.int64)) == "abc"
    assert "M parameters" in repr(lm)


def test_create_with_overrides_and_save(tmp_path):
    m = hymba.LanguageModel.create("mamba-only", scale="tiny", seed=1, num_hidden_layers=2)
    assert m.config["num_hidden_layers"] == 2
    base = hymba.LanguageModel.create("mamba-only", scale="tiny", seed=1)
    assert m.num_parameters() < base.num_parameters()
    m.save(tmp_path / "m")
    again = hymba.LanguageModel.load(tmp_path / "m")
    assert again.config == m.config
    ids = again.encode("the cat")
    assert np.array_equal(again.logits(ids), m.logits(ids))
    from_config = hymba.LanguageModel.create(config=m.config, seed=1)
    assert from_config.num_parameters() == m.num_parameters()


def test_generate_equals_the_cli_token_for_token(lm, workdir, cli):
    got = lm.generate("the cat", max_new_tokens=16, seed=7, details=True)
    out = cli("generate", "--ckpt", str(workdir / "ck"), "--prompt", "the cat", "--max-new-tokens", "16",
              "--seed", "7", "--json").stdout
    want = json.loads(out.splitlines()[0])
    assert got["ids"] == want["ids"]
    assert got["prompt_ids"] == want["prompt_ids"]
    assert got["finish_reason"] == want["finish_reason"]
    assert lm.generate("the cat", max_new_tokens=16, seed=7) == got["text"]


def test_penalties_and_logit_bias_equal_the_cli(lm, workdir, cli):
    flags = ["--min-p", "0.05", "--presence-penalty", "0.5", "--frequency-penalty", "0.3", "--repetition-penalty",
             "1.2", "--logit-bias", "7=-100", "--logit-bias", "9=2"]
    out = cli("generate", "--ckpt", str(workdir / "ck"), "--prompt", "the cat", "--max-new-tokens", "12",
              "--seed", "5", "--json", *flags).stdout
    got = lm.generate("the cat", max_new_tokens=12, seed=5, details=True, min_p=0.05, presence_penalty=0.5,
                      frequency_penalty=0.3, repetition_penalty=1.2, logit_bias={7: -100, 9: 2})
    assert got["ids"] == json.loads(out.splitlines()[0])["ids"]
    assert 7 not in got["ids"]
    with pytest.raises(hymba.HymbaError, match="logit_bias: token id 999999"):
        lm.generate("the cat", max_new_tokens=2, logit_bias={999999: 1})


def test_embeddings_pool_the_hidden_states(lm):
    ids = lm.encode("the cat sat")
    h = lm.hidden_states(ids)
    mean = lm.embed("the cat sat")
    last = lm.embed(ids, pooling="last")
    assert mean.dtype == np.float32 and mean.shape == last.shape == (h.shape[1],)
    assert np.allclose(mean, h.mean(axis=0), atol=1e-5)
    assert np.allclose(last, h[-1], atol=1e-6)
    assert len(lm.embed(["a", "b"])) == 2
    with pytest.raises(ValueError, match="pooling"):
        lm.embed("a", pooling="max")


def test_batched_generate_equals_the_cli(lm, workdir, cli, tmp_path):
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("the cat\na dog\n")
    out = cli("generate", "--ckpt", str(workdir / "ck"), "--prompt-file", str(prompts), "--batch", "2",
              "--max-new-tokens", "12", "--temperature", "1.2", "--top-k", "20", "--top-p", "0.9", "--seed", "3",
              "--json").stdout
    want = [json.loads(line)["ids"] for line in out.splitlines()]
    got = lm.generate(["the cat", "the cat", "a dog", "a dog"], max_new_tokens=12, temperature=1.2, top_k=20,
                      top_p=0.9, seed=3, details=True)
    assert [g["ids"] for g in got] == want


def test_stream_yields_the_same_text(lm):
    kwargs = dict(max_new_tokens=20, seed=4, stop_at_eos=False)
    whole = lm.generate("the dog", **kwargs)
    chunks = list(lm.generate("the dog", stream=True, **kwargs))
    assert len(chunks) > 1 and "".join(chunks) == whole
    pairs = list(lm.generate(["the dog", "a cat"], stream=True, **kwargs))
    texts = lm.generate(["the dog", "a cat"], **kwargs)
    for i in (0, 1):
        assert "".join(c for j, c in pairs if j == i) == texts[i]


def test_leaving_a_stream_early_frees_the_model(lm):
    g = lm.generate("the dog", max_new_tokens=200, seed=4, stop_at_eos=False, stream=True)
    next(g)
    with pytest.raises(hymba.HymbaError, match="another call is still using this model"):
        lm.logits([1, 2, 3])
    g.close()
    assert lm.logits([1, 2, 3]).shape == (3, 259)


def test_logits_equal_the_cli_forward_to_the_last_bit(lm, workdir, cli, tmp_path):
    batch = np.array([lm.encode("the cat sat"), lm.encode("a dog is on")], dtype=np.int32)
    ids_flag = ";".join(",".join(str(i) for i in row) for row in batch)
    cli("forward", "--ckpt", str(workdir / "ck"), "--ids", ids_flag, "--out", str(tmp_path / "f.safetensors"))
    want = read_safetensors(tmp_path / "f.safetensors")["logits"]
    got = lm.logits(batch)
    assert got.dtype == np.float32 and got.shape == want.shape == (2, 11, 259)
    assert np.array_equal(got, want)
    # One sequence: its [T, V] slice, from a forward of its own (another GEMM
    # blocking: equal to rounding).
    assert np.allclose(lm.logits(list(batch[1])), got[1], atol=1e-5)


def test_arrays_are_not_copied(lm):
    for out in (lm.logits([[1, 2, 3], [4, 5, 6]]), lm.hidden_states([[1, 2, 3], [4, 5, 6]])):
        # numpy wraps the engine's buffer: it does not own the data, its base (a capsule) does.
        assert not out.flags.owndata and out.base is not None
        assert out.flags.c_contiguous and out.flags.writeable
    one = lm.logits([1, 2, 3])  # a view of the [1, T, V] array: still no copy
    assert not one.flags.owndata and one.base is not None and one.base.base is not None
    lp = lm.token_logprobs([1, 2, 3])
    assert lp.dtype == np.float64 and not lp.flags.owndata


def test_arrays_outlive_the_model_and_later_calls(workdir):
    m = hymba.LanguageModel.load(workdir / "ck")
    a = m.logits([5, 6, 7])
    keep = a.copy()
    m.logits([9, 9, 9, 9])  # reuses the engine's arena: a is its own buffer
    del m
    gc.collect()
    assert np.array_equal(a, keep)


def test_hidden_states(lm):
    h = lm.hidden_states([1, 2, 3, 4])
    assert h.shape == (4, lm.config["hidden_size"]) and h.dtype == np.float32
    hb = lm.hidden_states([[1, 2, 3, 4], [1, 2, 3, 5]])
    assert np.allclose(hb[0], h, atol=1e-5)  # causal: the first sequence's rows
    assert np.allclose(hb[1, :3], h[:3], atol=1e-5) and not np.allclose(hb[1, 3], h[3], atol=1e-3)


def test_score_equals_the_cli_eval(lm, workdir, cli):
    r = lm.score(two_equal_blocks(), seq_len=32)
    want = json.loads(cli("eval", "--ckpt", str(workdir / "ck"), "--data", str(workdir / "text.txt"), "--split", "all",
                          "--seq-len", "32", "--json").stdout)
    assert r["tokens"] == want["tokens"]
    assert r["loss"] == pytest.approx(want["loss"], abs=1e-9)
    assert r["ppl"] == pytest.approx(want["ppl"], rel=1e-9)
    assert r["accuracy"] == pytest.approx(want["accuracy"], abs=1e-12)
    e = lm.evaluate(workdir / "text.txt", split="all", seq_len=32)
    assert e["loss"] == r["loss"] and e["seq_len"] == 32
    # One window: the mean negative log-probability of its targets.
    ids = lm.encode(TEXT[:33])
    assert lm.score(TEXT[:33])["loss"] == pytest.approx(-lm.token_logprobs(ids).mean(), abs=1e-4)
    assert [s["loss"] for s in lm.score([TEXT[:33], TEXT[:40]])] == [lm.score(TEXT[:33])["loss"],
                                                                     lm.score(TEXT[:40])["loss"]]


def test_errors_are_hymba_errors_with_the_cli_message(lm, cli, tmp_path):
    missing = str(tmp_path / "nowhere")
    with pytest.raises(hymba.HymbaError) as e:
        hymba.LanguageModel.load(missing)
    r = cli("generate", "--ckpt", missing, "--prompt", "x", check=False)
    assert r.returncode != 0
    assert r.stderr.strip() == "hymba: error: " + str(e.value)
    assert "\n" not in str(e.value)
    with pytest.raises(hymba.HymbaError, match="--top-p"):
        lm.generate("the cat", top_p=0)
    with pytest.raises(hymba.HymbaError, match="outside the vocabulary of 259"):
        lm.logits([1, 2, 300])
    with pytest.raises(hymba.HymbaError, match="num_hidden_layers"):
        hymba.LanguageModel.create("hybrid-official", scale="tiny", num_hidden_layers=-3)
    with pytest.raises(hymba.HymbaError, match="prompt 1 is empty"):
        lm.generate([""])
    with pytest.raises(ValueError):  # HymbaError is one
        lm.score("x")


def _rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


def test_no_leak_over_1000_generate_calls(lm):
    def burst(n):
        for i in range(n):
            lm.generate("the cat", max_new_tokens=2, seed=i)
    burst(100)  # warm-up: caches, allocator pools
    gc.collect()
    objects, rss = len(gc.get_objects()), _rss_bytes()
    burst(1000)
    gc.collect()
    assert len(gc.get_objects()) - objects < 100
    assert _rss_bytes() - rss < 8 << 20, f"RSS grew by {(_rss_bytes() - rss) / 2**20:.1f} MiB"
