#!/usr/bin/python3
"""Tables for docs/results.md from the study's committed results.

Reads results/<entry>/ (written by scripts/study: results.json and, for the
ablation suites, intervals.json) and prints markdown:

  * the verdicts: every question of every entry, its mean paired difference,
    95 % interval, repeats and verdict;
  * the noise: per entry and question, the standard deviation of the paired
    differences, the smallest difference 3 repeats can resolve
    (t(0.975, 2) * sd / sqrt(3)) and the repeats the measured mean would need
    to lie outside its interval;
  * the budget and machine time of each entry.

  tools/results_tables.py [results]       # the folder (default: results/)
"""
import json
import math
import os
import sys

T975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262, 10: 2.228,
        11: 2.201, 12: 2.179, 13: 2.160, 14: 2.145, 15: 2.131, 19: 2.093, 29: 2.045, 49: 2.010, 99: 1.984}


def t975(df):
    keys = sorted(T975)
    for k in keys:
        if df <= k:
            return T975[k]
    return 1.96


def repeats_needed(mean, sd, most=100):
    """The smallest n whose 95 % interval of a mean |mean| with this sd excludes 0."""
    if sd == 0:
        return 2
    for n in range(2, most + 1):
        if t975(n - 1) * sd / math.sqrt(n) < abs(mean):
            return n
    return None


def load(folder):
    entries = []
    for name in sorted(os.listdir(folder)):
        d = os.path.join(folder, name)
        res = os.path.join(d, "results.json")
        if not os.path.isfile(res):
            continue
        with open(res) as f:
            results = json.load(f)
        questions = results.get("questions", [])
        iv = os.path.join(d, "intervals.json")
        if os.path.isfile(iv):
            with open(iv) as f:
                questions = json.load(f)["questions"]
        entries.append((name, results, questions))
    return entries


def budget(results):
    s = results.get("settings", {})
    t = s.get("train", {})
    if t:  # ablate
        steps = f"{t['steps']} steps" if "steps" in t else f"{t.get('epochs')} epochs"
        axis = s.get("seq_axis")  # a T sweep: the batch follows T, the tokens per step do not
        if axis:
            return f"{results.get('scale', '?')} scale, {steps} of {axis['tokens_per_step']} tokens at each T"
        return f"{results.get('scale', '?')} scale, {steps} of {t.get('batch')} x {t.get('seq_len')}"
    tr = results.get("train", {})  # synth
    return f"{tr.get('epochs')} epochs of batch {tr.get('batch_size')}, {tr.get('num_train')} examples"


def wall_seconds(results):
    total = 0.0
    for r in results.get("rows", []):
        total += r.get("train_seconds", r.get("seconds", 0.0))
    return total


def fmt_ci(q):
    if "ci95" in q:
        return f"{q['mean']:+.4f} [{q['ci95'][0]:+.4f}, {q['ci95'][1]:+.4f}]"
    return f"{q['mean']:+.4f}" if q.get("n") else "—"


def main():
    folder = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "results")
    entries = load(folder)
    print("### Verdicts\n")
    print("| entry | question | seed says | metric | repeats | mean difference [95 % CI] | verdict |")
    print("|---|---|---|---|--:|---|---|")
    for name, _, qs in entries:
        for q in qs:
            verdict = q["verdict"] + (f" ({q['note']})" if q.get("note") else "")
            print(f"| {name} | {q['question']} | {q['seed_says']} | {q['metric']} | {q['n']} | {fmt_ci(q)} | {verdict} |")
    print("\n### Noise\n")
    print("| entry | question | sd of the paired difference | resolvable at 3 repeats | repeats the mean needs |")
    print("|---|---|--:|--:|--:|")
    for name, _, qs in entries:
        for q in qs:
            if q.get("n", 0) < 2:
                continue
            need = repeats_needed(q["mean"], q["sd"])
            print(f"| {name} | {q['id']} | {q['sd']:.4f} | {t975(2) * q['sd'] / math.sqrt(3):.4f} | "
                  f"{need if need else '> 100'} |")
    print("\n### Budgets\n")
    print("| entry | budget | runs | training time (sum over runs) |")
    print("|---|---|--:|--:|")
    for name, results, _ in entries:
        runs = len(results.get("rows", []))
        print(f"| {name} | {budget(results)} | {runs} | {wall_seconds(results) / 60:.0f} min |")


if __name__ == "__main__":
    main()
