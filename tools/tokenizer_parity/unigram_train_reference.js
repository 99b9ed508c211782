#!/usr/bin/env node
// Reference for hymba.cpp's Unigram trainer (src/tokenizer/train/unigram_trainer.cpp):
// trains the real Hugging Face UnigramTrainer (Rust, through npm
// @anush008/tokenizers) with seed 002's pipeline (normalizer NFKC then
// Lowercase, Whitespace pre-tokenizer) and saves its tokenizer.json.
//
//   node unigram_train_reference.js [CORPUS] [OUT]
//
// The binding trains only with the model's default trainer,
// UnigramTrainer::default(): vocab_size 8000, n_sub_iterations 2,
// shrinking_factor 0.75, max_piece_length 16, seed_size 1e6, no special
// tokens, no unk token. Each line of the corpus (with its ending) is one
// sequence. HF's own result varies a little from run to run (hash-set order
// of the required characters, float sums split across threads), so run it
// with TOKENIZERS_PARALLELISM=false for the committed fixture.
'use strict';
const fs = require('fs');
const path = require('path');
const { Tokenizer, Unigram, sequenceNormalizer, nfkcNormalizer, lowercase, whitespacePreTokenizer } =
  require('@anush008/tokenizers');

const ROOT = path.resolve(__dirname, '..', '..');
const DIR = path.join(ROOT, 'tests', 'fixtures', 'tokenizers', 'unigram_train');
const corpus = process.argv[2] || path.join(DIR, 'corpus.txt');
const out = process.argv[3] || path.join(DIR, 'hf_reference.json');

if (!process.argv[2]) {
  // The default corpus: the parity texts, one per line (texts with newlines
  // span several lines), then made-up prose (seeded, so the file is the same
  // on every run) with enough distinct words that training starts from more
  // than 8000 * 1.1 seed pieces and prunes several times. Its words mix case,
  // NFKC-folded forms (ligatures, full-width letters) and punctuation.
  const texts = fs.readFileSync(path.join(ROOT, 'tests', 'fixtures', 'tokenizers', 'texts.jsonl'), 'utf8')
    .split('\n').filter((l) => l).map((l) => JSON.parse(l)).filter((t) => !t.includes('\u0000'));
  let state = 20250817;
  const rand = () => {  // mulberry32
    state = (state + 0x6D2B79F5) | 0;
    let t = Math.imul(state ^ (state >>> 15), 1 | state);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const onsets = ['', 'b', 'br', 'c', 'ch', 'd', 'dr', 'f', 'fl', 'g', 'gr', 'h', 'j', 'k', 'l', 'm', 'n', 'p', 'pl',
    'qu', 'r', 's', 'sh', 'st', 't', 'th', 'tr', 'v', 'w', 'wh', 'y', 'z'];
  const nuclei = ['a', 'e', 'i', 'o', 'u', 'ai', 'ea', 'ee', 'oo', 'ou', 'ie', 'y'];
  const codas = ['', '', '', 'n', 'r', 's', 't', 'l', 'nd', 'st', 'ng', 'ck', 'th', 'm', 'rk'];
  const syllable = () => onsets[Math.floor(rand() * onsets.length)] + nuclei[Math.floor(rand() * nuclei.length)] +
    codas[Math.floor(rand() * codas.length)];
  // Words are built like real ones: a stem, often with a prefix and suffixes,
  // so that pieces shorter than words keep their probability through EM.
  const stems = [];
  for (let i = 0; i < 9000; ++i) stems.push(syllable() + (rand() < 0.6 ? syllable() : ''));
  const prefixes = [];
  for (let i = 0; i < 40; ++i) prefixes.push(syllable());
  const suffixes = [];
  for (let i = 0; i < 60; ++i) suffixes.push(nuclei[Math.floor(rand() * nuclei.length)] + codas[Math.floor(rand() * codas.length)] + (rand() < 0.5 ? 's' : ''));
  const lexicon = [];
  for (let i = 0; i < 60000; ++i) {
    let w = stems[Math.floor(stems.length * Math.pow(rand(), 1.5))];
    if (rand() < 0.35) w = prefixes[Math.floor(prefixes.length * Math.pow(rand(), 1.5))] + w;
    if (rand() < 0.6) w += suffixes[Math.floor(suffixes.length * Math.pow(rand(), 1.5))];
    if (rand() < 0.2) w += suffixes[Math.floor(suffixes.length * Math.pow(rand(), 1.5))];
    lexicon.push(w);
  }
  const odd = (w) => {  // forms that NFKC and Lowercase fold
    const r = rand();
    if (r < 0.04) return w[0].toUpperCase() + w.slice(1);
    if (r < 0.05) return w.toUpperCase();
    if (r < 0.055) return w.replace('fi', '\uFB01');
    if (r < 0.06) return [...w].map((c) => String.fromCodePoint(c.codePointAt(0) + 0xFEE0)).join('');
    return w;
  };
  const punct = [',', ',', '.', '.', ';', ':', '!', '?', '\'s', ' -', '...'];
  const lines = [];
  for (let i = 0; i < 2500; ++i) {
    const words = [];
    const n = 4 + Math.floor(rand() * 12);
    for (let k = 0; k < n; ++k) {
      // Zipf-like: small indices far more often.
      let w = odd(lexicon[Math.floor(lexicon.length * Math.pow(rand(), 1.2))]);
      if (rand() < 0.12) w += punct[Math.floor(rand() * punct.length)];
      if (rand() < 0.02) w += String(Math.floor(rand() * 2000));
      words.push(w);
    }
    lines.push(words.join(' '));
  }
  fs.mkdirSync(DIR, { recursive: true });
  fs.writeFileSync(corpus, texts.join('\n') + '\n' + lines.join('\n') + '\n');
}

const tok = new Tokenizer(Unigram.empty());
tok.setNormalizer(sequenceNormalizer([nfkcNormalizer(), lowercase()]));
tok.setPreTokenizer(whitespacePreTokenizer());
tok.train([corpus]);
tok.save(out, false);
const j = JSON.parse(fs.readFileSync(out, 'utf8'));
console.log(`${path.relative(ROOT, out)}: vocab ${j.model.vocab.length}, unk_id ${j.model.unk_id}`);
