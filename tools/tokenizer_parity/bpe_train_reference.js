#!/usr/bin/env node
// Reference for hymba.cpp's byte-level BPE trainer (src/tokenizer/train/bpe_trainer.cpp):
// trains the real Hugging Face BpeTrainer (Rust, through npm
// @anush008/tokenizers) on a corpus and saves its tokenizer.json.
//
//   node bpe_train_reference.js [CORPUS] [OUT]
//
// The npm binding exposes training only through `Tokenizer.train(files)`,
// which uses the model's default trainer: BpeTrainer::default() (vocab_size
// 30000, min_frequency 0, no special tokens, no initial alphabet). On a small
// corpus that trains until no pair is left, so the whole merge order (and its
// tie-breaking) is compared; vocab_size and min_frequency only cut that list
// short. The files are read line by line, each line with its ending being
// one sequence for the pre-tokenizer.
'use strict';
const fs = require('fs');
const path = require('path');
const { Tokenizer, BPE, byteLevelPreTokenizer, byteLevelProcessing } = require('@anush008/tokenizers');

const ROOT = path.resolve(__dirname, '..', '..');
const DIR = path.join(ROOT, 'tests', 'fixtures', 'tokenizers', 'bpe_train');
const corpus = process.argv[2] || path.join(DIR, 'corpus.txt');
const out = process.argv[3] || path.join(DIR, 'hf_reference.json');

if (!process.argv[2]) {
  // The default corpus: the parity texts, one per line (texts with newlines
  // span several lines), so every script and whitespace case is trained on.
  const texts = fs.readFileSync(path.join(ROOT, 'tests', 'fixtures', 'tokenizers', 'texts.jsonl'), 'utf8')
    .split('\n').filter((l) => l).map((l) => JSON.parse(l)).filter((t) => !t.includes('\u0000'));
  fs.mkdirSync(DIR, { recursive: true });
  fs.writeFileSync(corpus, texts.join('\n') + '\n');
}

const tok = new Tokenizer(BPE.empty());
tok.setPreTokenizer(byteLevelPreTokenizer(false, true));
tok.setPostProcessor(byteLevelProcessing(false));
tok.train([corpus]);
tok.save(out, false);
const j = JSON.parse(fs.readFileSync(out, 'utf8'));
console.log(`${path.relative(ROOT, out)}: vocab ${Object.keys(j.model.vocab).length}, merges ${j.model.merges.length}`);
