// Structured outputs through the official `openai` npm client: JSON mode and JSON schemas (streamed and
// not) on chat completions, and vLLM's guided_choice passed as an extra body field. Every output that ends
// by itself must parse, and match the schema (checked field by field: the schema is small and fixed).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { startServer } from './server.js';

let server;
let client;

before(async () => {
  server = await startServer(['--served-model-name', 'stories']);
  client = new OpenAI({ baseURL: server.baseURL, apiKey: 'unused', maxRetries: 0 });
});

after(async () => {
  assert.equal(await server.stop(), 0);
});

const schema = {
  type: 'object',
  properties: {
    name: { type: 'string', maxLength: 10 },
    legs: { type: 'integer', minimum: 0, maximum: 8 },
    color: { enum: ['red', 'brown', 'white'] },
  },
  required: ['name', 'legs', 'color'],
  additionalProperties: false,
};

function checkAnimal(text) {
  const v = JSON.parse(text);
  assert.deepEqual(Object.keys(v), ['name', 'legs', 'color']);
  assert.equal(typeof v.name, 'string');
  assert.ok([...v.name].length <= 10, text);
  assert.ok(Number.isInteger(v.legs) && v.legs >= 0 && v.legs <= 8, text);
  assert.ok(['red', 'brown', 'white'].includes(v.color), text);
}

const messages = [{ role: 'user', content: 'Describe an animal as JSON.' }];
const responseFormat = { type: 'json_schema', json_schema: { name: 'animal', schema, strict: true } };

test('json_schema response_format: every choice parses and matches', async () => {
  const out = await client.chat.completions.create({
    model: 'stories',
    messages,
    max_tokens: 200,
    temperature: 1,
    seed: 1,
    n: 4,
    response_format: responseFormat,
  });
  for (const c of out.choices) {
    assert.equal(c.finish_reason, 'stop', c.message.content);
    checkAnimal(c.message.content);
  }
});

test('json_schema streamed: the deltas join into the same valid object', async () => {
  const req = { model: 'stories', messages, max_tokens: 200, temperature: 1, seed: 2, response_format: responseFormat };
  const whole = await client.chat.completions.create(req);
  const stream = await client.chat.completions.create({ ...req, stream: true });
  let text = '';
  let finish = null;
  for await (const chunk of stream) {
    for (const c of chunk.choices) {
      text += c.delta.content ?? '';
      if (c.finish_reason) finish = c.finish_reason;
    }
  }
  assert.equal(text, whole.choices[0].message.content);
  assert.equal(finish, 'stop');
  checkAnimal(text);
});

test('json_object response_format gives a JSON object', async () => {
  const out = await client.chat.completions.create({
    model: 'stories',
    messages,
    max_tokens: 300,
    temperature: 1,
    seed: 3,
    n: 3,
    response_format: { type: 'json_object' },
  });
  // The bundled model rarely closes a free string within max_tokens: every output must open an object, and
  // the ones that ended by themselves must parse as one.
  for (const c of out.choices) assert.ok(c.message.content.trimStart().startsWith('{'), c.message.content);
  for (const c of out.choices.filter((c) => c.finish_reason === 'stop')) {
    const v = JSON.parse(c.message.content);
    assert.equal(typeof v, 'object');
    assert.ok(v !== null && !Array.isArray(v));
  }
});

test('guided_choice as an extra body field', async () => {
  const out = await client.completions.create({
    model: 'stories',
    prompt: 'The weather is',
    max_tokens: 10,
    n: 3,
    seed: 4,
    guided_choice: ['sunny', 'rainy', 'cloudy'],
  });
  for (const c of out.choices) assert.ok(['sunny', 'rainy', 'cloudy'].includes(c.text), c.text);
});

test('an unsupported schema keyword is a 400 naming the field', async () => {
  await assert.rejects(
    client.chat.completions.create({
      model: 'stories',
      messages,
      max_tokens: 5,
      response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'array', uniqueItems: true } } },
    }),
    (e) => e.status === 400 && e.param === 'response_format' && /uniqueItems/.test(e.message),
  );
});
