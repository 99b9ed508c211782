// Ollama's official JavaScript client against a running `hymba serve`:
// every call a UI built on it makes (list, show, ps, version, generate and
// chat streamed or not, embed, JSON format) must work unchanged.
//   node check.mjs http://127.0.0.1:PORT MODEL
import { Ollama } from 'ollama';
import assert from 'node:assert/strict';

const [host, model] = process.argv.slice(2);
const ollama = new Ollama({ host });
const options = { temperature: 0, num_predict: 12, seed: 1 };
let checks = 0;
const check = async (name, fn) => {
  await fn();
  checks += 1;
  console.log(`ok ${name}`);
};

await check('list', async () => {
  const { models } = await ollama.list();
  assert.equal(models.length, 1);
  assert.equal(models[0].name, `${model}:latest`);
});
await check('show', async () => {
  const info = await ollama.show({ model });
  assert.ok(info.model_info['general.parameter_count'] > 0);
});
await check('ps', async () => assert.equal((await ollama.ps()).models.length, 1));
await check('version', async () => assert.ok((await ollama.version()).version));

let whole;
await check('generate', async () => {
  whole = await ollama.generate({ model, prompt: 'ROMEO:', options });
  assert.equal(whole.done, true);
  assert.ok(whole.eval_count >= 1 && whole.eval_count <= 12);
  assert.ok(Array.isArray(whole.context));
});
await check('generate streamed', async () => {
  let text = '';
  let last;
  for await (const part of await ollama.generate({ model, prompt: 'ROMEO:', options, stream: true })) {
    text += part.response;
    last = part;
  }
  assert.equal(text, whole.response);
  assert.equal(last.done, true);
});
const messages = [{ role: 'user', content: 'Hello' }];
let reply;
await check('chat', async () => {
  reply = await ollama.chat({ model, messages, options });
  assert.equal(reply.message.role, 'assistant');
});
await check('chat streamed', async () => {
  let text = '';
  for await (const part of await ollama.chat({ model, messages, options, stream: true })) text += part.message.content;
  assert.equal(text, reply.message.content);
});
await check('embed', async () => {
  const { embeddings } = await ollama.embed({ model, input: ['ROMEO:', 'JULIET:'] });
  assert.equal(embeddings.length, 2);
  const norm = Math.hypot(...embeddings[0]);
  assert.ok(Math.abs(norm - 1) < 1e-4, `norm ${norm}`);
});
await check('format json', async () => {
  const r = await ollama.generate({ model, prompt: '{', format: 'json', options: { num_predict: 64, seed: 2 } });
  if (r.done_reason === 'stop') JSON.parse(r.response);
});
await check('unknown model', async () => {
  await assert.rejects(ollama.generate({ model: 'no-such-model', prompt: 'x' }), (e) => e.status_code === 404);
});
console.log(`ollama client: ${checks} checks passed`);
