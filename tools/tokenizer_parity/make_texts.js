#!/usr/bin/env node
// Writes tests/fixtures/tokenizers/texts.jsonl: the parity corpus of hymba.cpp's
// tokenizer suite, one JSON string per line. Every text is written here by hand
// (or derived from a hand-written one: CRLF, NFD, padded with spaces, repeated),
// so the file is reproducible: `node make_texts.js` rewrites it byte for byte.
'use strict';
const fs = require('fs');
const path = require('path');

const base = [];
const add = (...xs) => { for (const x of xs) base.push(x); };

// --- English prose, punctuation, contractions --------------------------------
add(
  'Hello world',
  'Hello, world!',
  'The quick brown fox jumps over the lazy dog.',
  "I'm sure you'll like it; they've said it's what we'd want, isn't it?",
  "I'M SURE YOU'LL LIKE IT; THEY'VE SAID IT'S WHAT WE'D WANT.",
  "Don't, won't, can't, shouldn't've, y'all, o'clock, rock 'n' roll.",
  'She said, "Nobody expects the Spanish Inquisition!" -- and left.',
  'First Citizen:\nBefore we proceed any further, hear me speak.\n\nAll:\nSpeak, speak.',
  'To be, or not to be, that is the question:\nWhether \'tis nobler in the mind to suffer\nThe slings and arrows of outrageous fortune,',
  'A sentence with  two spaces, three   spaces and four    spaces.',
  'e.g. i.e. etc. Mr. Smith vs. Dr. Jones at 5 p.m. on Jan. 3rd.',
  'CamelCaseIdentifiers and snake_case_identifiers and SCREAMING_SNAKE_CASE.',
  'URLs: https://example.com/path/to/page?query=1&lang=en#section and mailto:someone@example.org',
  'Hyphen-ated, en–dash, em—dash, ellipsis… and “curly quotes” with ‘single’ ones.',
  'Parentheses (like this), brackets [like that], braces {and these}, angles <too>.',
  'Question?! Exclamation!!! Interrobang‽ Multiple???',
  'supercalifragilisticexpialidocious antidisestablishmentarianism pneumonoultramicroscopicsilicovolcanoconiosis',
  'a',
  'I',
  ' ',
  '.',
  '!',
  "'",
  "'s",
  "it's",
  "IT'S",
  'a b c d e f g h i j k l m n o p q r s t u v w x y z',
  'ABCDEFGHIJKLMNOPQRSTUVWXYZ abcdefghijklmnopqrstuvwxyz',
  'Tokenization is the process of splitting text into tokens; detokenization reverses it.',
  'The year 1984 was not like "1984", and 2001 was no space odyssey.',
);

// --- numbers ----------------------------------------------------------------
add(
  '0', '7', '42', '123', '1234', '12345', '123456789', '3.14159265358979',
  '1,234,567.89', '-17 +42 1e10 6.022e23 0x1F 0b1010 0o777',
  'Call 555-0199 or +1 (800) 555-0100 before 23:59:59 on 2024-02-29.',
  'Version 1.2.3-beta.4+build.567 released 12/31/1999.',
  '100% of 50 is 50; 3/4 = 0.75; 2^10 = 1024; √2 ≈ 1.414',
  '١٢٣٤٥ ٦٧٨٩٠ (Arabic-Indic digits) ۱۲۳ (Persian) १२३४ (Devanagari) ๑๒๓ (Thai)',
  '①②③ Ⅻ ½ ¾ ² ³ ₁₂ (number-like symbols)',
  '１２３４５ full-width digits and ＡＢＣ full-width letters',
  '$1,000,000 €99.99 £5 ¥1000 ₹500 ₩10000 ₿0.001',
  '00000000001111111111222222222233333333334444444444',
);

// --- code ------------------------------------------------------------------
add(
  'def add(a, b):\n    return a + b\n',
  'def fib(n):\n\tif n < 2:\n\t\treturn n\n\treturn fib(n - 1) + fib(n - 2)\n',
  '#include <stdio.h>\n\nint main(void) {\n    printf("Hello, world!\\n");\n    return 0;\n}\n',
  'for (int i = 0; i < n; ++i) { sum += a[i] * b[i]; }',
  'const f = (x) => x?.y ?? z; let s = `template ${literal}`;',
  'SELECT id, name FROM users WHERE age >= 18 AND name LIKE \'%son\' ORDER BY id DESC;',
  '{"key": "value", "list": [1, 2, 3], "nested": {"a": null, "b": true}}',
  '<html>\n  <body class="main">\n    <p>Paragraph &amp; entity &lt;tag&gt;</p>\n  </body>\n</html>',
  'fn main() -> Result<(), Box<dyn Error>> {\n    let v: Vec<u8> = vec![0; 16];\n    Ok(())\n}',
  'x = [i**2 for i in range(10) if i % 2 == 0]  # squares of evens',
  '    indented with four spaces\n        and eight\n\t\tand two tabs\n',
  'if (a && b || !c) { x <<= 2; y >>= 1; z ^= 0xFF; }',
  '#!/bin/bash\nset -euo pipefail\necho "$HOME" | grep -q root && exit 1\n',
  'a==b!=c<=d>=e->f=>g::h...i///j',
  '// comment\n/* block\n   comment */\n-- sql comment\n# shell comment',
  '"""Docstring.\n\n    Args:\n        x: the input.\n    """',
  'regex: ^(?:[a-z0-9!#$%&\'*+/=?^_`{|}~-]+)@\\w+\\.\\w{2,}$',
  'matrix = [[1, 0, 0],\n          [0, 1, 0],\n          [0, 0, 1]]',
  'std::vector<std::unique_ptr<Node>> children_;',
  'print("Hello")\r\nprint("World")\r\n',
);

// --- whitespace ------------------------------------------------------------
add(
  '  leading two spaces',
  'trailing two spaces  ',
  '   both sides   ',
  '\tleading tab',
  'trailing tab\t',
  'tab\tseparated\tvalues\there',
  'col1\t\tcol3\t\t\tcol6',
  'line one\nline two\nline three',
  'line one\r\nline two\r\nline three\r\n',
  'old mac\rline endings\r',
  'blank lines\n\n\nbetween\n\n\n\nparagraphs',
  '\n',
  '\n\n',
  '\r\n',
  '\t',
  '  ',
  '    ',
  '                ',
  ' \n \n ',
  'space before newline \nand after\n next',
  'mixed \t \n \r\n whitespace \u000b\u000c run',
  'no\u00a0break\u00a0spaces\u00a0here',
  '\u00a0leading NBSP and trailing NBSP\u00a0',
  'thin\u2009space, hair\u200aspace, em\u2003space, ideographic\u3000space',
  'zero\u200bwidth\u200bspace and word\u2060joiner',
  'soft\u00adhyphen in hy\u00adphen\u00adation',
  'narrow\u202fno-break and figure\u2007space',
  'line\u2028separator and paragraph\u2029separator',
  'ends with newline\n',
  '\nstarts with newline',
  'x' + ' '.repeat(40) + 'y',
  '\t'.repeat(12) + 'deeply indented',
  '\n'.repeat(20),
);

// --- special-token strings --------------------------------------------------
add(
  '<|endoftext|>',
  'Hello<|endoftext|>World',
  'Hello <|endoftext|> World',
  '<|endoftext|><|endoftext|>',
  'text <|endoftext|>\n<|endoftext|> more',
  '<s>',
  '</s>',
  '<s> hello </s>',
  '<s>[INST] What is 2+2? [/INST] 4 </s>',
  '<unk> <pad> <mask> <bos> <eos>',
  '[CLS] [SEP] [MASK] [UNK] [PAD]',
  '<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi!<|eot_id|>',
  '<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nHello<|im_end|>',
  '<start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\n',
  '<|endofprompt|>',
  '<|end_of_text|> and <|endoftext|> and <|eot_id|>',
  '<｜begin▁of▁sentence｜>Hello',
  '<|endoftext',
  'endoftext|>',
  '<|ENDOFTEXT|>',
  '< s >',
  '<<s>>',
  '<s><s></s></s>',
  'a<s>b</s>c',
);

// --- emoji -------------------------------------------------------------------
add(
  '😀',
  'Hello 😀 world 🌍!',
  '👍🏽 thumbs up medium skin tone',
  '👨‍👩‍👧‍👦 family (ZWJ sequence)',
  '🏳️‍🌈 rainbow flag, 🏴‍☠️ pirate flag',
  '❤️ red heart with VS16, ❤ without, ☺️ ☺',
  '🇺🇸🇬🇧🇯🇵🇩🇪🇫🇷 flags',
  '🇺🇸 🇬🇧 🇯🇵 spaced flags',
  '1️⃣ 2️⃣ #️⃣ *️⃣ keycaps',
  '👩🏻‍💻 🧑🏿‍🚀 👩‍❤️‍💋‍👨',
  '🤖🤖🤖🤖🤖🤖🤖🤖',
  'emoji🙂inside🙃words',
  '🏴󠁧󠁢󠁳󠁣󠁴󠁿 Scotland (tag sequence)',
  '©️ ®️ ™️ ‼️ ⁉️',
  'Good morning ☀️🌅 — coffee ☕ and 🥐?',
);

// --- CJK ---------------------------------------------------------------------
add(
  '你好，世界！',
  '我爱自然语言处理。',
  '今天天气很好，我们去公园散步吧。',
  '北京是中华人民共和国的首都，也是一座历史悠久的城市。',
  '繁體中文與簡体中文混合',
  'こんにちは、世界！',
  '日本語のテキストです。ひらがな、カタカナ、漢字を含みます。',
  'ｶﾀｶﾅ half-width katakana ﾃｽﾄ',
  '東京タワーは333メートルです。',
  'Mixing 中文 and English 和 日本語 in one 文.',
  '「引用」『二重引用』【括弧】〈山括弧〉',
  '一二三四五六七八九十百千万亿',
  '𠀀𠀁𠀂 (CJK Extension B)',
  '漢字' + '字'.repeat(30),
);

// --- Korean ------------------------------------------------------------------
const koComposed = '안녕하세요 세계';
add(
  koComposed,
  koComposed.normalize('NFD'),
  '한국어 텍스트입니다. 자연어 처리를 공부합니다.',
  '한국어 텍스트입니다.'.normalize('NFD'),
  'ㄱㄴㄷㄹㅁㅂㅅㅇㅈㅊㅋㅌㅍㅎ ㅏㅑㅓㅕㅗㅛㅜㅠㅡㅣ',
  'ᄀᄁᄂᄃ ᅡᅢᅣ ᆨᆩᆪ (conjoining jamo)',
  'ㅋㅋㅋㅋ ㅎㅎ ㅠㅠ',
  '대한민국 서울특별시 2024년 1월 1일',
);

// --- Indic -------------------------------------------------------------------
add(
  'नमस्ते दुनिया',
  'हिन्दी भारत की राजभाषा है। यह देवनागरी लिपि में लिखी जाती है।',
  'क्षत्रिय ज्ञान श्री द्वार',
  'মাতৃভাষা বাংলা। আমি বাংলায় কথা বলি।',
  'தமிழ் ஒரு பழமையான மொழி.',
  'తెలుగు భాష',
  'ಕನ್ನಡ ಭಾಷೆ',
  'മലയാളം',
  'ગુજરાતી',
  'ਪੰਜਾਬੀ ਭਾਸ਼ਾ',
  'संस्कृतम् — वसुधैव कुटुम्बकम्॥',
);

// --- Thai, Lao, Khmer, Myanmar ------------------------------------------------
add(
  'สวัสดีครับ',
  'ภาษาไทยไม่มีการเว้นวรรคระหว่างคำ',
  'กรุงเทพมหานคร อมรรัตนโกสินทร์',
  'ຂໍ້ຄວາມພາສາລາວ',
  'ភាសាខ្មែរ',
  'မြန်မာဘာသာ',
);

// --- Arabic, Hebrew, Persian, Urdu -------------------------------------------
add(
  'مرحبا بالعالم',
  'اللغة العربية جميلة جداً.',
  'بِسْمِ اللَّهِ الرَّحْمَٰنِ الرَّحِيمِ',
  'شكراً جزيلاً! ١٠٠٪',
  'שלום עולם',
  'עִבְרִית עם ניקוד',
  'سلام دنیا، حال شما چطور است؟',
  'اردو زبان',
  'Mixed RTL: العربية and English and עברית.',
  'ﷺ ﷲ ﻻ (presentation forms)',
);

// --- Vietnamese and Latin with diacritics -------------------------------------
const viet = 'Tiếng Việt có dấu: Xin chào, tôi là người Việt Nam.';
add(
  viet,
  viet.normalize('NFD'),
  'Đường phố Hà Nội rất đông đúc vào giờ cao điểm.',
  'Thủ đô Hà Nội; ngữ pháp tiếng Việt; phở bò',
  'Ngọc Trinh, Nguyễn Văn A, Trần Thị B',
);
const accented = [
  'café crème brûlée naïve façade résumé',
  'Ångström Øresund Æsir Þórr ðæt',
  'Straße Größe Übermäßig ÄÖÜ äöü ß ẞ',
  'señor niño mañana ¿Qué tal? ¡Hola!',
  'Český Krumlov, Łódź, Kraków, Złoty, Şişli, Ğ',
  'façade coöperate zoë',
  'İstanbul ıi İI (Turkish dotted and dotless i)',
  'Ελληνικά: Καλημέρα κόσμε, ΑΒΓΔ αβγδ ς',
  'Русский язык: Привет, мир! Ёжик в тумане.',
  'Українська: Ґанок, їжак, єнот.',
  'ქართული ენა',
  'Հայերեն լեզու',
  'ﬁ ﬂ ﬀ ligatures and Ⅸ roman and ℌ fraktur',
  'ǅ ǈ ǋ titlecase digraphs',
  'e\u0301 a\u0300 o\u0302 u\u0308 n\u0303 c\u0327 (combining marks)',
  'Z\u0351\u036b\u0343\u036a\u0302\u036b\u033d\u034f\u0334\u0319\u0324\u031e\u0349\u035a\u032f\u031e\u0320\u034dA\u036b\u0357\u0334\u0362\u0335\u031c\u0330\u0354L\u0368\u0367\u0369\u0358\u0320G\u0311\u0357\u030e\u0305\u035b\u0341\u0334\u033b\u0348\u034d\u0354\u0339O\u0342\u030c\u030c\u0358\u0328\u0335\u0339\u033b\u031d\u0333 zalgo',
];
for (const a of accented) add(a, a.normalize('NFD'));

// --- other scripts and symbols -------------------------------------------------
add(
  'አማርኛ ቋንቋ',
  'ᐃᓄᒃᑎᑐᑦ',
  'ᚠᚢᚦᚨᚱᚲ runes',
  '𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𝕞𝕒𝕥𝕙 𝐛𝐨𝐥𝐝',
  '∀x∈ℝ: x² ≥ 0 ⇒ ∑ᵢ aᵢ ≤ ∞',
  '→ ← ↑ ↓ ⇄ ★ ☆ ♠ ♣ ♥ ♦ ✓ ✗',
  '┌─┬─┐\n│a│b│\n└─┴─┘',
  '°C °F µm Ω ‰ § ¶ † ‡ •',
  'ʻOkina and ʼapostrophe modifier letters',
  '\u0000 null and \u0001 control and \u007f delete',
  '\ufeffbyte order mark at start',
  'replacement char \ufffd and private use \ue000',
  'lone combining mark at start: \u0301x',
);

// --- multi-line mixed documents -----------------------------------------------
add(
  '# Title\n\nSome *markdown* with `code` and a [link](http://x.y).\n\n- item 1\n- item 2\n',
  'Dear Sir,\n\nThank you for your letter of 3 March.\n\nYours faithfully,\nJ. Smith',
  'Q: What is the capital of France?\nA: Paris.\nQ: And of Japan?\nA: Tokyo (東京).',
  'User: hi\nAssistant: Hello! How can I help?\nUser: translate "cat" to French\nAssistant: chat',
  'first line\nsecond line',
  ' first line\n second line\n',
  'ROMEO:\nBut, soft! what light through yonder window breaks?\nIt is the east, and Juliet is the sun.\n',
  'Name,Age,City\r\nAlice,30,"New York"\r\nBob,25,Zürich\r\n',
  'Poem:\n\tRoses are red,\n\tViolets are blue,\n\t🌹 and 💙\n',
  'Multilingual:\nEnglish: hello\nFrançais: bonjour\nDeutsch: hallo\n中文：你好\n日本語：こんにちは\n한국어: 안녕\nहिन्दी: नमस्ते\nไทย: สวัสดี\nالعربية: مرحبا',
);

// --- long runs ------------------------------------------------------------------
add(
  'a'.repeat(2000),
  'abcdefghijklmnopqrstuvwxyz'.repeat(77),
  'ab'.repeat(500),
  ' '.repeat(300),
  '!'.repeat(200),
  '1234567890'.repeat(30),
  'The cat sat on the mat. '.repeat(40),
  '🙂'.repeat(100),
  'ा'.repeat(50),
  'ก'.repeat(200),
  '\n'.repeat(3) + 'x' + '\n'.repeat(3),
);

// --- derived variants ------------------------------------------------------------
const derived = [];
const pick = base.filter((t) => t.length > 3 && t.length < 200);
for (let i = 0; i < pick.length; i += 3) derived.push(' ' + pick[i]);        // leading space
for (let i = 1; i < pick.length; i += 4) derived.push(pick[i] + ' ');        // trailing space
for (let i = 2; i < pick.length; i += 5) derived.push('  ' + pick[i] + '\n'); // both
for (const t of base) if (t.includes('\n') && !t.includes('\r')) derived.push(t.replace(/\n/g, '\r\n'));
for (let i = 0; i < pick.length; i += 6) derived.push(pick[i] + '\n' + pick[(i + 7) % pick.length]);
for (let i = 0; i < pick.length; i += 9) derived.push(pick[i].toUpperCase());

const seen = new Set();
const texts = [];
for (const t of [...base, ...derived]) {
  if (seen.has(t)) continue;
  seen.add(t);
  texts.push(t);
}

const out = process.argv[2] ||
  path.join(__dirname, '..', '..', 'tests', 'fixtures', 'tokenizers', 'texts.jsonl');
fs.mkdirSync(path.dirname(out), { recursive: true });
fs.writeFileSync(out, texts.map((t) => JSON.stringify(t)).join('\n') + '\n');
console.log(`wrote ${texts.length} texts to ${out}`);
