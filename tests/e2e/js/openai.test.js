// pagoda serve through the official `openai` npm client: completions and chat, streaming and not, n = 2,
// logprobs, stop strings, usage, and error objects.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import OpenAI from 'openai';
import { startServer } from './server.js';

let server;
let client;
let reference; // `pagoda generate --json` for the same greedy request

before(async () => {
  server = await startServer(['--served-model-name', 'stories']);
  client = new OpenAI({ baseURL: server.baseURL, apiKey: 'unused', maxRetries: 0 });
  reference = JSON.parse(
    execFileSync(process.env.PAGODA, ['generate', '--json', '--max-tokens', '32', '--prompt', 'Once upon a time'], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'ignore'],
    }),
  );
});

after(async () => {
  assert.equal(await server.stop(), 0);
});

test('models lists the served name', async () => {
  const models = await client.models.list();
  assert.deepEqual(
    models.data.map((m) => m.id),
    ['stories'],
  );
});

test('greedy completion equals pagoda generate', async () => {
  const out = await client.completions.create({ model: 'stories', prompt: 'Once upon a time', max_tokens: 32, temperature: 0 });
  assert.equal(out.object, 'text_completion');
  assert.equal(out.choices[0].text, reference.text);
  assert.equal(out.choices[0].finish_reason, reference.finish_reason);
  assert.equal(out.usage.prompt_tokens, reference.prompt_ids.length);
  assert.equal(out.usage.completion_tokens, reference.output_ids.length);
  assert.equal(out.usage.total_tokens, out.usage.prompt_tokens + out.usage.completion_tokens);
});

test('streamed completion concatenates to the same text, with usage', async () => {
  const stream = await client.completions.create({
    model: 'stories',
    prompt: 'Once upon a time',
    max_tokens: 32,
    temperature: 0,
    stream: true,
    stream_options: { include_usage: true },
  });
  let text = '';
  let usage = null;
  let finish = null;
  let chunks = 0;
  for await (const chunk of stream) {
    chunks++;
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) {
      text += c.text;
      if (c.finish_reason) finish = c.finish_reason;
    }
  }
  assert.ok(chunks > 2);
  assert.equal(text, reference.text);
  assert.equal(finish, reference.finish_reason);
  assert.equal(usage.completion_tokens, reference.output_ids.length);
});

test('n = 2 gives two seeded, reproducible choices', async () => {
  const req = { model: 'stories', prompt: 'Once upon a time', max_tokens: 16, temperature: 1, seed: 7, n: 2 };
  const a = await client.completions.create(req);
  const b = await client.completions.create(req);
  assert.deepEqual(
    a.choices.map((c) => c.index),
    [0, 1],
  );
  assert.deepEqual(
    a.choices.map((c) => c.text),
    b.choices.map((c) => c.text),
  );
  assert.notEqual(a.choices[0].text, a.choices[1].text);
});

test('logprobs on completions and chat', async () => {
  const out = await client.completions.create({ model: 'stories', prompt: 'Once upon a time', max_tokens: 6, temperature: 0, logprobs: 2 });
  const lp = out.choices[0].logprobs;
  assert.equal(lp.tokens.length, 6);
  for (let i = 0; i < 6; i++) {
    assert.ok(lp.token_logprobs[i] <= 0);
    assert.equal(Object.keys(lp.top_logprobs[i]).length, 2);
    assert.ok(Math.abs(lp.token_logprobs[i] - Math.max(...Object.values(lp.top_logprobs[i]))) < 1e-5);
  }
  const chat = await client.chat.completions.create({
    model: 'stories',
    messages: [{ role: 'user', content: 'Hello' }],
    max_tokens: 5,
    temperature: 0,
    logprobs: true,
    top_logprobs: 3,
  });
  const content = chat.choices[0].logprobs.content;
  assert.equal(content.length, chat.usage.completion_tokens);
  assert.equal(content[0].top_logprobs.length, 3);
  assert.ok(Array.isArray(content[0].bytes));
});

test('stop strings cut the text and never leak, streamed or not', async () => {
  const cut = Math.floor(reference.text.length / 2);
  const stop = reference.text.slice(cut, cut + 3);
  const expected = reference.text.slice(0, reference.text.indexOf(stop));
  const out = await client.completions.create({ model: 'stories', prompt: 'Once upon a time', max_tokens: 32, temperature: 0, stop: [stop] });
  assert.equal(out.choices[0].text, expected);
  assert.equal(out.choices[0].finish_reason, 'stop');
  const stream = await client.completions.create({
    model: 'stories',
    prompt: 'Once upon a time',
    max_tokens: 32,
    temperature: 0,
    stop,
    stream: true,
  });
  let text = '';
  for await (const chunk of stream) for (const c of chunk.choices) text += c.text;
  assert.equal(text, expected);
});

test('chat completion, streamed and not, agree', async () => {
  const messages = [
    { role: 'system', content: 'You tell stories.' },
    { role: 'user', content: 'Tell me about a cat.' },
  ];
  const out = await client.chat.completions.create({ model: 'stories', messages, max_tokens: 20, temperature: 0 });
  assert.equal(out.object, 'chat.completion');
  assert.equal(out.choices[0].message.role, 'assistant');
  assert.ok(out.usage.prompt_tokens > 0);
  const stream = await client.chat.completions.create({ model: 'stories', messages, max_tokens: 20, temperature: 0, stream: true });
  let text = '';
  let role = null;
  for await (const chunk of stream) {
    const d = chunk.choices[0]?.delta;
    if (d?.role) role = d.role;
    if (d?.content) text += d.content;
  }
  assert.equal(role, 'assistant');
  assert.equal(text, out.choices[0].message.content);
});

test('errors arrive as OpenAI error objects with the right status', async () => {
  await assert.rejects(client.completions.create({ model: 'nope', prompt: 'x' }), (e) => {
    assert.ok(e instanceof OpenAI.NotFoundError);
    assert.equal(e.status, 404);
    assert.equal(e.error.param, 'model');
    return true;
  });
  await assert.rejects(client.completions.create({ model: 'stories', prompt: 'x', temperature: -1 }), (e) => {
    assert.ok(e instanceof OpenAI.BadRequestError);
    assert.equal(e.status, 400);
    assert.equal(e.error.param, 'temperature');
    assert.ok(e.message.includes('temperature'));
    return true;
  });
  await assert.rejects(client.completions.create({ model: 'stories', prompt: 'x', max_tokens: 1000000 }), (e) => {
    assert.equal(e.status, 400);
    assert.match(e.message, /maximum context length/);
    return true;
  });
  await assert.rejects(client.chat.completions.create({ model: 'stories', messages: 'hi' }), (e) => {
    assert.equal(e.status, 400);
    assert.equal(e.error.param, 'messages');
    return true;
  });
});

test('a wrong API key is refused with 401', async () => {
  const keyed = await startServer(['--api-key', 'secret']);
  try {
    const bad = new OpenAI({ baseURL: keyed.baseURL, apiKey: 'wrong', maxRetries: 0 });
    await assert.rejects(bad.models.list(), (e) => {
      assert.ok(e instanceof OpenAI.AuthenticationError);
      return true;
    });
    const good = new OpenAI({ baseURL: keyed.baseURL, apiKey: 'secret', maxRetries: 0 });
    const out = await good.completions.create({ model: 'stories260K.gguf', prompt: 'Hi', max_tokens: 2 });
    assert.equal(out.choices.length, 1);
  } finally {
    assert.equal(await keyed.stop(), 0);
  }
});
