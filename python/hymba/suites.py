"""hymba.ablate and hymba.synth: suites whose rows load straight into pandas."""

import os

from . import _hymba


class Results(list):
    """A list of row dicts (pandas.DataFrame(results) is the report's table)
    with the suite's files as attributes: report_md, report_html, out."""

    def __init__(self, rows, **attrs):
        super().__init__(rows)
        for k, v in attrs.items():
            setattr(self, k, v)


# `hymba ablate` recipe flags accepted as keyword arguments (the recipe's keys).
_ABLATE_RECIPE = {"steps", "epochs", "stop_epochs", "batch", "seq_len", "lr", "warmup", "eval_interval",
                  "eval_windows", "seed", "tokenizer_vocab"}


def ablate(suite, out, scale="", data="default", transformer="", seq_lens=None, prompts=None, cache_context=4096,
           sample_tokens=100, plots=True, progress=False, train=None, model=None, sampling=None, tokenizer_type=None,
           repeats=1, **recipe):
    """Trains every row of a suite under one recipe and writes its report, as
    ``hymba ablate --suite SUITE --out OUT``; rows already measured in OUT are
    skipped on a rerun. Recipe flags by keyword (steps, batch, seq_len, lr,
    warmup, eval_interval, eval_windows, seed, epochs, stop_epochs,
    tokenizer_vocab, tokenizer_type), or dicts of train / model / sampling
    overrides. repeats=N trains every row N times (seeds seed + 0 .. N-1).
    Returns Results: one dict per row with results.csv's columns (unrounded;
    with repeats, each row's mean), plus .runs (a dict per run), .questions
    (the suite's questions answered over the repeats), .columns,
    .skipped_rows, .report_md, .report_html."""
    unknown = set(recipe) - _ABLATE_RECIPE
    if unknown:
        raise _hymba.HymbaError(f"ablate: unknown option {sorted(unknown)[0]!r} (recipe options: "
                                f"{', '.join(sorted(_ABLATE_RECIPE))}, tokenizer_type)")
    train = dict(train or {})
    train.update({k: v for k, v in recipe.items() if v is not None})
    if tokenizer_type is not None:
        train["tokenizer"] = tokenizer_type
    options = dict(suite=os.fspath(suite), out=os.fspath(out), scale=scale, data=os.fspath(data),
                   transformer=transformer, seq_lens=seq_lens, prompts=prompts, cache_context=cache_context,
                   sample_tokens=sample_tokens, plots=plots, progress=progress, train=train, model=dict(model or {}),
                   sampling=dict(sampling or {}), repeats=repeats)
    r = _hymba._ablate(options)
    return Results(r["rows"], columns=r["columns"], skipped_rows=r["skipped_rows"], trained=r["trained"],
                   runs=r["runs"], questions=r["questions"], report_md=r["report_md"], report_html=r["report_html"],
                   out=os.fspath(out))


# `hymba synth` settings by group (docs/synth.md), as keyword arguments.
_SYNTH_GROUPS = {
    "task": {"vocab_size", "seq_len", "num_tokens_to_copy", "noise_vocab_size", "frac_noise", "max_key_len",
             "max_value_len", "num_kv_pairs", "mqar_power_a", "num_passes", "random_non_queries", "multi_query",
             "memorization_seed", "train_scores"},
    "model": {"model", "hidden_size", "num_layers", "num_heads", "num_blocks", "trans_layers", "mamba_layers",
              "link", "ffn_mult", "d_state", "init_std", "init_scheme"},
    "train": {"epochs", "batch_size", "eval_batch", "lr", "weight_decay", "beta2", "schedule", "warmup",
              "grad_clip", "seed", "num_train", "num_test", "stop_at_acc", "stop_metric", "test_num_kv_pairs",
              "test_seq_len", "decoder_width"},
}


def synth(task=None, preset=None, suite=None, out=None, plots=True, progress=False, callback=None, repeats=1,
          **settings):
    """Synthetic tasks, as ``hymba synth``: one run of a task or task preset
    (model="transformer"|"mamba"|"hymba"|"hybrid" and the other settings by
    their flag names with underscores), or a suite (built-in name or .json
    file, with out=DIR) whose settings the keywords override.

    One run without out: Results of per-epoch dicts (epoch, train_loss,
    eval_loss, eval_acc, eval_macro_acc, lr, seconds); callback(epoch_dict)
    sees each. A suite, or a run with out: one dict per row with results.csv's
    columns plus "curve" (its epochs), and .report_md / .report_html; with
    repeats=N each row runs N times (.runs has every run, .questions the
    suite's questions answered over them)."""
    groups = {g: {} for g in _SYNTH_GROUPS}
    for k, v in settings.items():
        group = next((g for g, keys in _SYNTH_GROUPS.items() if k in keys), None)
        if group is None:
            raise _hymba.HymbaError(f"synth: unknown setting {k!r} (see docs/synth.md)")
        if v is not None:
            groups[group][k] = v
    options = dict(suite=os.fspath(suite) if suite else "", task=task or "", preset=preset or "",
                   out=os.fspath(out) if out else "", plots=plots, progress=progress,
                   task_options=groups["task"], train_options=groups["train"], model_options=groups["model"],
                   repeats=repeats)
    r = _hymba._synth(options, callback)
    attrs = {k: v for k, v in r.items() if k != "rows"}
    return Results(r["rows"], out=options["out"], **attrs)
