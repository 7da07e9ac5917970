// Tool calling through the official `openai` npm client: pagoda serve with the real Llama-3.1 chat template
// (tests/data/models/llama-3.1-8b/chat_template.jinja) over the tiny random Llama-3 checkpoint, with
// --tool-call-parser llama3_json. The model's output is random text, so these checks hold for any output:
// the template saw the tools (prompt_tokens grows, /tokenize agrees), responses and stream deltas have
// OpenAI's shape, and a stream adds up to the same message as the whole response. The case that needs a
// scripted output (a real llama3_json call parsed from the model's text) forces it with guided_regex (and
// skips itself on a server that refuses guided_regex).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import OpenAI from 'openai';
import { startServer } from './server.js';

const data = (p) => fileURLToPath(new URL(`../../data/${p}`, import.meta.url));
const MODEL = 'llama31-tools';

const tools = [
  {
    type: 'function',
    function: {
      name: 'get_weather',
      description: 'Get the current weather in a city',
      parameters: {
        type: 'object',
        properties: { city: { type: 'string', maxLength: 8 }, unit: { type: 'string', enum: ['celsius', 'fahrenheit'] } },
        required: ['city'],
        additionalProperties: false,
      },
    },
  },
  { type: 'function', function: { name: 'get_time', parameters: { type: 'object', properties: {} } } },
];
const question = [{ role: 'user', content: 'What is the weather in Paris?' }];
const greedy = { model: MODEL, temperature: 0, max_tokens: 12 };

let server;
let client;

before(async () => {
  server = await startServer([
    '-m', data('models/tiny-llama3-hf'),
    '--chat-template', data('models/llama-3.1-8b/chat_template.jinja'),
    '--served-model-name', MODEL,
    '--enable-auto-tool-choice', '--tool-call-parser', 'llama3_json',
  ]);
  client = new OpenAI({ baseURL: server.baseURL, apiKey: 'unused', maxRetries: 0 });
});

after(async () => {
  assert.equal(await server.stop(), 0);
});

function checkMessage(choice, { forced, named } = {}) {
  const m = choice.message;
  assert.equal(m.role, 'assistant');
  assert.ok(['stop', 'length', 'tool_calls'].includes(choice.finish_reason), choice.finish_reason);
  if (!m.tool_calls) {
    assert.equal(typeof m.content, 'string');
    assert.ok(!forced, 'a forced tool_choice always answers with a call');
    return;
  }
  assert.ok(m.tool_calls.length > 0);
  assert.ok(m.content === null || typeof m.content === 'string');
  for (const call of m.tool_calls) {
    assert.match(call.id, /^chatcmpl-tool-[0-9a-f]{32}$/);
    assert.equal(call.type, 'function');
    assert.equal(typeof call.function.name, 'string');
    assert.equal(typeof call.function.arguments, 'string');
  }
  // A call to a named function finishes with "stop", as in vLLM and OpenAI; other calls with "tool_calls".
  if (choice.finish_reason !== 'length') assert.equal(choice.finish_reason, named ? 'stop' : 'tool_calls');
}

// Reads a chat stream, checking each chunk's shape; returns the message it adds up to.
async function collect(stream) {
  let content = '';
  let role = null;
  let finish = null;
  const calls = [];
  for await (const chunk of stream) {
    assert.equal(chunk.object, 'chat.completion.chunk');
    for (const c of chunk.choices) {
      if (c.delta.role) role = c.delta.role;
      if (c.delta.content) content += c.delta.content;
      for (const t of c.delta.tool_calls ?? []) {
        if (t.id !== undefined) {
          // A call's first delta: its index, id, type and name, arguments "".
          assert.equal(t.index, calls.length);
          assert.equal(t.type, 'function');
          assert.equal(typeof t.function.name, 'string');
          assert.equal(t.function.arguments, '');
          assert.equal(c.delta.content, undefined);
          calls.push({ id: t.id, name: t.function.name, arguments: '' });
        } else {
          // Then only argument text for a call already started.
          assert.ok(t.index < calls.length);
          assert.equal(t.function.name, undefined);
          assert.equal(typeof t.function.arguments, 'string');
          calls[t.index].arguments += t.function.arguments;
        }
      }
      if (c.finish_reason) finish = c.finish_reason;
    }
  }
  assert.equal(role, 'assistant');
  return { content, calls, finish };
}

test('tools reach the chat template: prompt_tokens grows, and /tokenize counts the same prompt', async () => {
  const plain = await client.chat.completions.create({ ...greedy, messages: question });
  const withTools = await client.chat.completions.create({ ...greedy, messages: question, tools });
  assert.ok(
    withTools.usage.prompt_tokens > plain.usage.prompt_tokens + 100,
    `${withTools.usage.prompt_tokens} vs ${plain.usage.prompt_tokens}`,
  );
  checkMessage(withTools.choices[0]);
  const tokenized = await fetch(`${server.url}/tokenize`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: MODEL, messages: question, tools }),
  }).then((r) => r.json());
  assert.equal(tokenized.count, withTools.usage.prompt_tokens);
  // tool_choice "none": no calls are read, but the template still sees the tools (vLLM's default).
  const none = await client.chat.completions.create({ ...greedy, messages: question, tools, tool_choice: 'none' });
  assert.equal(none.usage.prompt_tokens, withTools.usage.prompt_tokens);
  assert.equal(none.choices[0].message.tool_calls, undefined);
});

test('a tool-call turn (content null, arguments as a JSON string) and its result render through the template', async () => {
  const turn = [
    ...question,
    {
      role: 'assistant',
      content: null,
      tool_calls: [{ id: 'chatcmpl-tool-1', type: 'function', function: { name: 'get_weather', arguments: '{"city": "Paris"}' } }],
    },
    { role: 'tool', tool_call_id: 'chatcmpl-tool-1', content: '{"temperature": 21}' },
  ];
  const first = await client.chat.completions.create({ ...greedy, messages: question, tools });
  const out = await client.chat.completions.create({ ...greedy, messages: turn, tools });
  assert.ok(out.usage.prompt_tokens > first.usage.prompt_tokens);
  checkMessage(out.choices[0]);
});

test('streamed with tools, the deltas have OpenAI shape and add up to the whole response', async () => {
  for (const tool_choice of ['auto', 'required', { type: 'function', function: { name: 'get_weather' } }]) {
    const whole = await client.chat.completions.create({ ...greedy, messages: question, tools, tool_choice });
    const named = typeof tool_choice === 'object';
    checkMessage(whole.choices[0], { forced: named, named });
    const streamed = await collect(
      await client.chat.completions.create({ ...greedy, messages: question, tools, tool_choice, stream: true }),
    );
    const m = whole.choices[0].message;
    assert.equal(streamed.content, m.content ?? '', JSON.stringify(tool_choice));
    assert.deepEqual(
      streamed.calls.map((c) => [c.name, c.arguments]),
      (m.tool_calls ?? []).map((c) => [c.function.name, c.function.arguments]),
    );
    assert.equal(streamed.finish, whole.choices[0].finish_reason);
  }
});

test('a named tool_choice answers with a call to that function, its arguments matching the parameters', async () => {
  const out = await client.chat.completions.create({
    ...greedy,
    max_tokens: 100,
    messages: question,
    tools,
    tool_choice: { type: 'function', function: { name: 'get_weather' } },
  });
  checkMessage(out.choices[0], { forced: true, named: true });
  const m = out.choices[0].message;
  assert.equal(m.tool_calls.length, 1);
  assert.equal(m.tool_calls[0].function.name, 'get_weather');
  assert.equal(m.content, null);
  // Constrained decoding holds the output to the parameters' schema; a model that ends it by itself has
  // written an object with a short string city (and perhaps a unit), nothing else.
  if (out.choices[0].finish_reason === 'stop') {
    const args = JSON.parse(m.tool_calls[0].function.arguments);
    assert.equal(typeof args.city, 'string');
    assert.ok(args.city.length <= 8);
    for (const key of Object.keys(args)) assert.ok(['city', 'unit'].includes(key), key);
  }
});

test('malformed tools and tool_choice are 400s naming the field', async () => {
  const cases = [
    [{ tools: [{ type: 'function', function: { description: 'no name' } }] }, 'tools[0].function.name'],
    [{ tools, tool_choice: { type: 'function', function: { name: 'nope' } } }, 'tool_choice'],
    [{ tool_choice: 'required' }, 'tool_choice'],
    [{ tools, tool_choice: 'sometimes' }, 'tool_choice'],
    [
      { messages: [...question, { role: 'assistant', content: null, tool_calls: [{ type: 'function', function: { name: 'f', arguments: '{oops' } }] }] },
      'messages[1].tool_calls[0].function.arguments',
    ],
  ];
  for (const [fields, param] of cases) {
    await assert.rejects(client.chat.completions.create({ ...greedy, messages: question, ...fields }), (e) => {
      assert.equal(e.status, 400);
      assert.equal(e.error.param, param, e.message);
      return true;
    });
  }
});

test('tool_choice "auto" needs --enable-auto-tool-choice and --tool-call-parser', async () => {
  const bare = await startServer(['-m', data('models/tiny-llama3-hf'), '--served-model-name', MODEL]);
  try {
    const c = new OpenAI({ baseURL: bare.baseURL, apiKey: 'unused', maxRetries: 0 });
    await assert.rejects(c.chat.completions.create({ ...greedy, messages: question, tools }), (e) => {
      assert.equal(e.status, 400);
      assert.equal(e.message, '400 "auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set');
      return true;
    });
    // Forced choices need no flags.
    const forced = await c.chat.completions.create({ ...greedy, messages: question, tools, tool_choice: 'required' });
    checkMessage(forced.choices[0]);
  } finally {
    assert.equal(await bare.stop(), 0);
  }
});

// A scripted model output: guided_regex forces the exact llama3_json text, which the parser must read into a
// call (whole and streamed). Skips itself while the server refuses guided_regex.
test('a llama3_json call in the output becomes tool_calls (forced with guided_regex)', async (t) => {
  const text = '{"name": "get_weather", "parameters": {"city": "Paris", "unit": "celsius"}}';
  const regex = text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  const request = { ...greedy, max_tokens: 64, messages: question, tools, guided_regex: regex };
  let whole;
  try {
    whole = await client.chat.completions.create(request);
  } catch (e) {
    if (e.status === 400 && e.error?.param === 'guided_regex') return t.skip('guided_regex is not supported yet');
    throw e;
  }
  const m = whole.choices[0].message;
  assert.equal(whole.choices[0].finish_reason, 'tool_calls');
  assert.equal(m.content, null);
  assert.equal(m.tool_calls.length, 1);
  assert.equal(m.tool_calls[0].function.name, 'get_weather');
  assert.deepEqual(JSON.parse(m.tool_calls[0].function.arguments), { city: 'Paris', unit: 'celsius' });
  const streamed = await collect(await client.chat.completions.create({ ...request, stream: true }));
  assert.equal(streamed.content, '');
  assert.deepEqual(streamed.calls.map((c) => [c.name, c.arguments]), [['get_weather', m.tool_calls[0].function.arguments]]);
  assert.equal(streamed.finish, 'tool_calls');
});
