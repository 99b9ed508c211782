"""hymba.classify: sequence classification heads on frozen or unfrozen
backbones, as ``hymba classify train`` / ``eval`` (docs/classify.md)."""

import os

from . import _hymba


def _paths(value):
    return os.fspath(value) if value is not None else None


def train(backbone, data, out, val=None, progress=False, **options):
    """Trains a classifier on labelled text (TSV ``label<TAB>text`` or JSONL)
    into ``out``, as ``hymba classify train --backbone B --data F --out OUT``.
    backbone: a checkpoint or run directory, or a list of two (fused with
    fusion="concat"|"gated"). Other options by their flag names with
    underscores: pooling, hidden, unfreeze, max_len, batch, epochs, steps, lr,
    backbone_lr, warmup, val_fraction, classes, seed, ... Returns
    summary.json as a dict (metrics, confusion matrix, curves)."""
    backbones = [backbone] if isinstance(backbone, (str, os.PathLike)) else list(backbone)
    opts = dict(options, backbones=[os.fspath(b) for b in backbones], data=os.fspath(data), out=os.fspath(out),
                val=_paths(val), progress=progress)
    return _hymba._classify_train(opts)


def evaluate(classifier, data, out=None, batch=8, **options):
    """Scores a saved classifier on labelled data, as ``hymba classify eval``;
    writes the report to out (default CLASSIFIER/eval). Returns its summary."""
    opts = dict(options, classifier=os.fspath(classifier), data=os.fspath(data), out=_paths(out), batch=batch)
    return _hymba._classify_eval(opts)
