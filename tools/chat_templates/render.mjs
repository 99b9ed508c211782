// Renders every template of tests/fixtures/chat_templates/templates.json
// with every message list of messages.json, with and without
// add_generation_prompt, through @huggingface/jinja (the reference), into
// expected.json: the output, or that rendering failed. The C++ interpreter
// (src/data/jinja*.cpp) must give byte-identical text (tests/test_jinja.cpp).
// Usage: npm install && node render.mjs
import fs from "node:fs";
import path from "node:path";
import { Template } from "@huggingface/jinja";

const dir = path.resolve(import.meta.dirname, "../../tests/fixtures/chat_templates");
const templates = JSON.parse(fs.readFileSync(path.join(dir, "templates.json"), "utf8"));
const messages = JSON.parse(fs.readFileSync(path.join(dir, "messages.json"), "utf8"));
const cases = [];
for (const [name, t] of Object.entries(templates)) {
  let template = null, parseError = null;
  try {
    template = new Template(t.template);
  } catch (e) {
    parseError = String(e.message ?? e);
  }
  for (const [conversation, list] of Object.entries(messages)) {
    for (const add_generation_prompt of [false, true]) {
      const c = { template: name, messages: conversation, add_generation_prompt };
      try {
        if (parseError) throw new Error(parseError);
        const context = { messages: list, add_generation_prompt };
        if (t.bos_token !== null) context.bos_token = t.bos_token;
        if (t.eos_token !== null) context.eos_token = t.eos_token;
        c.output = template.render(context);
      } catch (e) {
        c.error = String(e.message ?? e);
      }
      cases.push(c);
    }
  }
}
fs.writeFileSync(path.join(dir, "expected.json"), JSON.stringify(cases, null, 1) + "\n");
console.log(`${cases.length} cases, ${cases.filter((c) => c.error).length} errors`);
