// Cutting a published tokenizer.json down to a small one with the same
// components: the vocabulary shrinks, everything else stays as published.
'use strict';

// Maps a merge entry ("a b" or ["a","b"]) to its two parts.
function mergeParts(m) {
  if (Array.isArray(m)) return m;
  const i = m.indexOf(' ', 1); // "Ġ Ġ" style: the separator is the first space after position 0
  return [m.slice(0, i), m.slice(i + 1)];
}

function isByteFallbackToken(t) { return /^<0x[0-9A-F]{2}>$/.test(t); }

// Cuts a BPE tokenizer.json object.
//   used:    Set of model tokens the full tokenizer produced on the corpus
//   budget:  target size of the written file in bytes
//   addedKeep(tokenObj) -> bool: which added tokens stay
// Keeps: every single-character / byte-fallback token that is used or is one
// of the 256 byte-level characters, every used token and the merges that build
// it (recursively), then the highest-ranked merges until the budget is met.
// A merge stays when both parts and the result are kept.
function cutBpeTop(j, used, topN, addedKeep, opts = {}) {
  const m = j.model;
  const vocab = m.vocab;                         // token -> id
  const prefix = m.continuing_subword_prefix || '';
  if (!j.__merges) {
    j.__merges = m.merges.map(mergeParts);
    j.__producer = new Map();                    // result token -> merge index
    j.__merges.forEach(([a, b], i) => {
      const bb = prefix && b.startsWith(prefix) ? b.slice(prefix.length) : b;
      const r = a + bb;
      if (!j.__producer.has(r)) j.__producer.set(r, i);
    });
  }
  const merges = j.__merges;
  const producer = j.__producer;

  const keep = new Set();
  const addClosure = (t) => {
    const stack = [t];
    while (stack.length) {
      const x = stack.pop();
      if (keep.has(x) || !(x in vocab)) continue;
      keep.add(x);
      const i = producer.get(x);
      if (i !== undefined) stack.push(merges[i][0], merges[i][1]);
    }
  };
  // Base alphabet.
  for (const t of Object.keys(vocab)) {
    if (isByteFallbackToken(t)) keep.add(t);
    if (opts.byteLevel && [...t].length === 1 && opts.byteLevel.has(t)) keep.add(t);
  }
  // Added tokens that are also vocabulary entries.
  const added = j.added_tokens.filter(addedKeep);
  for (const a of added) if (a.content in vocab) keep.add(a.content);
  if (m.unk_token && m.unk_token in vocab) keep.add(m.unk_token);
  for (const t of used) addClosure(t);

  let i = 0;
  while (i < merges.length && i < topN) {
    const [a, b] = merges[i];
    const bb = prefix && b.startsWith(prefix) ? b.slice(prefix.length) : b;
    addClosure(a + bb);
    i++;
  }

  const newVocab = {};
  for (const [t, id] of Object.entries(vocab)) if (keep.has(t)) newVocab[t] = id;
  const newMerges = [];
  m.merges.forEach((raw, k) => {
    const [a, b] = merges[k];
    const bb = prefix && b.startsWith(prefix) ? b.slice(prefix.length) : b;
    if (keep.has(a) && keep.has(b) && keep.has(a + bb)) newMerges.push(raw);
  });
  const { __merges, __producer, ...rest } = j;
  const out = JSON.parse(JSON.stringify({ ...rest, model: { ...m, vocab: {}, merges: [] } }));
  out.model.vocab = newVocab;
  out.model.merges = newMerges;
  out.added_tokens = added;
  return out;
}

// Cuts a WordPiece tokenizer.json object: keeps ids below `keepBelow` (special,
// unused and single-character tokens in BERT's layout), every used token, and
// the lowest ids after that until `maxTokens`.
function cutWordPiece(j, used, keepBelow, maxTokens) {
  const vocab = j.model.vocab;
  const entries = Object.entries(vocab).sort((x, y) => x[1] - y[1]);
  const keep = new Set();
  for (const [t, id] of entries) if (id < keepBelow || used.has(t)) keep.add(t);
  for (const [t] of entries) { if (keep.size >= maxTokens) break; keep.add(t); }
  const newVocab = {};
  for (const [t, id] of entries) if (keep.has(t)) newVocab[t] = id;
  const out = JSON.parse(JSON.stringify({ ...j, model: { ...j.model, vocab: {} } }));
  out.model.vocab = newVocab;
  return out;
}

// The largest cut whose pretty-printed file stays within `budget` bytes.
function cutBpe(j, used, budget, addedKeep, opts = {}) {
  let lo = 0, hi = j.model.merges.length, best = cutBpeTop(j, used, 0, addedKeep, opts);
  while (lo < hi) {
    const mid = Math.ceil((lo + hi) / 2);
    const c = cutBpeTop(j, used, mid, addedKeep, opts);
    if (Buffer.byteLength(JSON.stringify(c)) <= budget) { best = c; lo = mid; } else hi = mid - 1;
  }
  return best;
}

module.exports = { cutBpe, cutWordPiece, mergeParts };
