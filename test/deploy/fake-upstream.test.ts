/**
 * tools/fake-upstream/server.js, run for real: node on a free loopback port,
 * called over HTTP. This is what the curl walkthrough of docs/getting-started/compose.md relies on to
 * show which headers reached the upstream behind Envoy.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';

import { repoPath } from './support/repo-files';

let child: ChildProcess;
let base: string;

beforeAll(async () => {
  child = spawn(process.execPath, [repoPath('tools', 'fake-upstream', 'server.js')], {
    env: { PATH: process.env.PATH ?? '', PORT: '0', HOST: '127.0.0.1' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const port = await new Promise<number>((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => reject(new Error(`fake-upstream did not start: ${stderr}`)), 10_000);
    child.stdout!.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      const match = /"port":(\d+)/.exec(out);
      if (match) {
        clearTimeout(timer);
        resolve(Number(match[1]));
      }
    });
    child.once('exit', (code) => reject(new Error(`fake-upstream exited with ${code}: ${stderr}`)));
  });
  base = `http://127.0.0.1:${port}`;
});

afterAll(async () => {
  if (child.exitCode === null) {
    const exited = once(child, 'exit');
    child.kill('SIGTERM');
    await exited;
  }
});

async function call(path: string, init: { method?: string; headers?: Record<string, string>; body?: unknown } = {}) {
  const response = await fetch(`${base}${path}`, {
    method: init.method ?? (init.body === undefined ? 'GET' : 'POST'),
    headers: { 'content-type': 'application/json', ...init.headers },
    ...(init.body === undefined ? {} : { body: typeof init.body === 'string' ? init.body : JSON.stringify(init.body) }),
  });
  const text = await response.text();
  const contentType = response.headers.get('content-type') ?? '';
  return {
    status: response.status,
    contentType,
    sawHeader: JSON.parse(response.headers.get('x-upstream-saw-headers') ?? 'null') as string[] | null,
    text,
    json: contentType.startsWith('application/json') ? (JSON.parse(text) as Record<string, unknown>) : undefined,
  };
}

describe('fake-upstream', () => {
  it('answers a chat completion and shows which headers (and query names) arrived, with gateway identity values', async () => {
    const r = await call('/v1/chat/completions?trace=1', {
      headers: { 'x-gateway-account-id': 'acme', 'x-gateway-key-prefix': 'gk_live_AbC4', 'x-request-id': 'req-1' },
      body: { model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] },
    });
    expect(r.status).toBe(200);
    expect(r.json).toMatchObject({
      object: 'chat.completion',
      model: 'gpt-4o-mini',
      choices: [{ message: { role: 'assistant' }, finish_reason: 'stop' }],
    });
    expect(r.sawHeader).toEqual(r.json!.received_headers);
    expect(r.sawHeader).toEqual(expect.arrayContaining(['content-type', 'x-gateway-account-id', 'x-gateway-key-prefix', 'x-request-id']));
    expect(r.sawHeader).not.toContain('authorization');
    expect([...r.sawHeader!].sort()).toEqual(r.sawHeader);
    expect(r.json!.gateway_identity).toEqual({ 'x-gateway-account-id': 'acme', 'x-gateway-key-prefix': 'gk_live_AbC4' });
    expect(r.json!.received_query_params).toEqual(['trace']);
  });

  it('would reveal a credential that reached it by name, but never echoes its value', async () => {
    const secret = 'Bearer not-a-real-key-but-secret-looking-0123456789';
    const r = await call('/v1/chat/completions?key=also-secret-query-value', {
      headers: { authorization: secret, 'x-api-key': 'xak-secret-value' },
      body: { model: 'gpt-4o' },
    });
    expect(r.sawHeader).toEqual(expect.arrayContaining(['authorization', 'x-api-key']));
    expect(r.json!.received_query_params).toEqual(['key']);
    expect(r.text).not.toContain('not-a-real-key');
    expect(r.text).not.toContain('xak-secret-value');
    expect(r.text).not.toContain('also-secret-query-value');
  });

  it('streams chat completions as SSE ending with [DONE]', async () => {
    const r = await call('/v1/chat/completions', { body: { model: 'gpt-4o', stream: true } });
    expect(r.status).toBe(200);
    expect(r.contentType).toBe('text/event-stream');
    expect(r.sawHeader).toContain('content-type');
    const events = r.text.trim().split('\n\n');
    expect(events[events.length - 1]).toBe('data: [DONE]');
    expect(JSON.parse(events[1]!.slice('data: '.length))).toMatchObject({
      object: 'chat.completion.chunk',
      choices: [{ delta: { content: expect.any(String) } }],
    });
  });

  it('answers the other OpenAI-style routes', async () => {
    expect((await call('/v1/completions', { body: { model: 'x', prompt: 'hi' } })).json).toMatchObject({ object: 'text_completion' });
    expect((await call('/v1/embeddings', { body: { model: 'e', input: 'hi' } })).json).toMatchObject({
      object: 'list',
      data: [{ object: 'embedding' }],
    });
    expect((await call('/v1/responses', { body: { model: 'gpt-4o', input: 'hi' } })).json).toMatchObject({
      object: 'response',
      status: 'completed',
    });
    expect((await call('/v1beta/openai/chat/completions', { body: { model: 'gemini-2.0-flash' } })).json).toMatchObject({
      object: 'chat.completion',
      model: 'gemini-2.0-flash',
    });
  });

  it('answers the Messages style, streamed or not', async () => {
    const headers = { 'anthropic-version': '2023-06-01' };
    const r = await call('/v1/messages', { headers, body: { model: 'claude-sonnet-4-5', max_tokens: 10, messages: [] } });
    expect(r.json).toMatchObject({
      type: 'message',
      role: 'assistant',
      model: 'claude-sonnet-4-5',
      content: [{ type: 'text' }],
      stop_reason: 'end_turn',
    });
    expect(r.sawHeader).toContain('anthropic-version');
    expect((await call('/v1/messages/count_tokens', { headers, body: { model: 'm', messages: [] } })).json).toMatchObject({
      input_tokens: 5,
    });
    const stream = await call('/v1/messages', { headers, body: { model: 'claude-sonnet-4-5', stream: true } });
    expect(stream.contentType).toBe('text/event-stream');
    expect(stream.text).toMatch(/^event: message_start\n/);
    expect(stream.text.trim()).toMatch(/event: message_stop\ndata: \{"type":"message_stop"\}$/);
  });

  it('answers the generative style', async () => {
    const r = await call('/v1beta/models/gemini-2.0-flash:generateContent', { body: { contents: [{ parts: [{ text: 'hi' }] }] } });
    expect(r.json).toMatchObject({
      candidates: [{ content: { role: 'model', parts: [{ text: expect.any(String) }] }, finishReason: 'STOP' }],
      modelVersion: 'gemini-2.0-flash',
    });
    expect((await call('/v1/models/gemini-2.0-flash:countTokens', { body: {} })).json).toMatchObject({ totalTokens: 5 });
    expect((await call('/v1beta/models/text-embedding-004:embedContent', { body: {} })).json).toMatchObject({
      embedding: { values: expect.any(Array) },
    });
  });

  it('lists models in the style of the caller', async () => {
    expect((await call('/v1/models')).json).toMatchObject({ object: 'list', data: [{ object: 'model' }, { object: 'model' }] });
    expect((await call('/v1/models/gpt-4o')).json).toMatchObject({ id: 'gpt-4o', object: 'model' });
    expect((await call('/v1/models', { headers: { 'anthropic-version': '2023-06-01' } })).json).toMatchObject({
      data: [{ type: 'model' }, { type: 'model' }],
      has_more: false,
    });
    expect((await call('/v1beta/models')).json).toMatchObject({
      models: [{ name: 'models/gemini-2.0-flash' }, { name: 'models/gemini-2.5-pro' }],
    });
  });

  it('answers health, unknown paths and bad JSON sensibly', async () => {
    expect((await call('/healthz')).json).toMatchObject({ status: 'ok' });
    const missing = await call('/v2/nothing', { body: {} });
    expect(missing.status).toBe(404);
    expect(missing.json).toMatchObject({ error: { code: 'not_found' }, received_headers: expect.any(Array) });
    const bad = await call('/v1/chat/completions', { body: '{not json' });
    expect(bad.status).toBe(400);
    expect(bad.sawHeader).toContain('content-type');
  });

  it('stops promptly on SIGTERM even with keep-alive connections open', async () => {
    const started = Date.now();
    const exited = once(child, 'exit');
    child.kill('SIGTERM');
    const [code] = (await exited) as [number | null, NodeJS.Signals | null];
    expect(code).toBe(0);
    expect(Date.now() - started).toBeLessThan(5_000);
  });
});
