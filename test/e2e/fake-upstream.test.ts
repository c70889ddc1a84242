/**
 * The fake upstream's answers report exactly the usage it is given, in each
 * style's own fields, whole and streamed: read back by the real usage
 * extractor (src/metering/) from the bytes it wrote. Error answers report
 * none; slow streams really are slow; fixture answers are the fixtures.
 */
import type { RouteFamily } from '../../src/check/routes/route';
import type { TokenCounts } from '../../src/metering/usage';
import { createUsageExtractor } from '../../src/metering/usage-extractor';
import { USAGE_FIXTURE_CASES } from '../support/usage-fixtures';
import { sendHttp } from './envoy-front';
import { SLOW_STREAM_PIECES, startFakeUpstream, type FakeUpstream } from './fake-upstream';

const USAGE: TokenCounts = { inputTokens: 120, outputTokens: 45, cachedInputTokens: 30, cacheCreationTokens: 12 };
const GEMINI_USAGE: TokenCounts = { ...USAGE, cacheCreationTokens: 0 };
const SLOW_GAP_MS = 10;

let upstream: FakeUpstream;

beforeAll(async () => {
  upstream = await startFakeUpstream({ usage: USAGE, slowEventGapMs: SLOW_GAP_MS });
});

afterAll(async () => {
  await upstream?.close();
});

beforeEach(() => {
  upstream.usage = USAGE;
});

interface Case {
  name: string;
  family: RouteFamily;
  path: string;
  body: object;
  contentType: RegExp;
  expected: TokenCounts | undefined;
}

const chat = (body: object) => ({ model: 'gpt-x', messages: [{ role: 'user', content: 'hi' }], ...body });
const CASES: Case[] = [
  {
    name: 'chat completion',
    family: 'chat-completions',
    path: '/v1/chat/completions',
    body: chat({}),
    contentType: /^application\/json/,
    expected: USAGE,
  },
  {
    name: 'chat stream with include_usage',
    family: 'chat-completions',
    path: '/v1/chat/completions',
    body: chat({ stream: true, stream_options: { include_usage: true } }),
    contentType: /^text\/event-stream/,
    expected: USAGE,
  },
  {
    name: 'chat stream without include_usage: no usage',
    family: 'chat-completions',
    path: '/v1/chat/completions',
    body: chat({ stream: true }),
    contentType: /^text\/event-stream/,
    expected: undefined,
  },
  {
    name: "Gemini's OpenAI-compatible chat",
    family: 'chat-completions',
    path: '/v1beta/openai/chat/completions',
    body: chat({}),
    contentType: /^application\/json/,
    expected: USAGE,
  },
  {
    name: 'completion',
    family: 'chat-completions',
    path: '/v1/completions',
    body: { model: 'x', prompt: 'hi' },
    contentType: /^application\/json/,
    expected: USAGE,
  },
  {
    name: 'embeddings: input only',
    family: 'chat-completions',
    path: '/v1/embeddings',
    body: { model: 'x', input: 'hi' },
    contentType: /^application\/json/,
    expected: { inputTokens: 120, outputTokens: 0, cachedInputTokens: 0, cacheCreationTokens: 0 },
  },
  {
    name: 'Responses API',
    family: 'chat-completions',
    path: '/v1/responses',
    body: { model: 'x', input: 'hi' },
    contentType: /^application\/json/,
    expected: USAGE,
  },
  {
    name: 'Responses API stream',
    family: 'chat-completions',
    path: '/v1/responses',
    body: { model: 'x', input: 'hi', stream: true },
    contentType: /^text\/event-stream/,
    expected: USAGE,
  },
  {
    name: 'message',
    family: 'messages',
    path: '/v1/messages',
    body: { model: 'claude-x', max_tokens: 8 },
    contentType: /^application\/json/,
    expected: USAGE,
  },
  {
    name: 'message stream',
    family: 'messages',
    path: '/v1/messages',
    body: { model: 'claude-x', max_tokens: 8, stream: true },
    contentType: /^text\/event-stream/,
    expected: USAGE,
  },
  {
    name: 'generateContent (no cache writes in Gemini)',
    family: 'generative-content',
    path: '/v1beta/models/gemini-x:generateContent',
    body: {},
    contentType: /^application\/json/,
    expected: GEMINI_USAGE,
  },
  {
    name: 'streamGenerateContent?alt=sse',
    family: 'generative-content',
    path: '/v1beta/models/gemini-x:streamGenerateContent?alt=sse',
    body: {},
    contentType: /^text\/event-stream/,
    expected: GEMINI_USAGE,
  },
  {
    name: 'streamGenerateContent as a JSON array',
    family: 'generative-content',
    path: '/v1/models/gemini-x:streamGenerateContent',
    body: {},
    contentType: /^application\/json/,
    expected: GEMINI_USAGE,
  },
];

async function readBack(c: { family: RouteFamily; path: string; body: object }) {
  const reply = await sendHttp(upstream.url, {
    method: 'POST',
    path: c.path,
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(c.body),
  });
  const record = upstream.requests[upstream.requests.length - 1]!;
  const extractor = createUsageExtractor({
    family: c.family,
    method: 'POST',
    path: c.path.split('?', 1)[0]!,
    status: reply.status,
    contentType: reply.headers['content-type'],
    contentEncoding: reply.headers['content-encoding'],
  });
  for (const chunk of record.responseChunks) extractor.write(chunk);
  return { reply, record, reading: extractor.finish() };
}

describe('usage, in every style, whole and streamed', () => {
  it.each(CASES)('$name', async (c) => {
    const { reply, record, reading } = await readBack(c);
    expect(reply.status).toBe(200);
    expect(reply.headers['content-type']).toMatch(c.contentType);
    expect(record.completed).toBe(true);
    expect(record.reportedUsage).toEqual(c.expected);
    if (c.expected) expect(reading).toMatchObject({ kind: 'reported', tokens: c.expected, final: true, streamComplete: true });
    else expect(reading).toMatchObject({ kind: 'none', reason: 'no-usage-reported', deliveredTextBytes: 2 });
  });

  it('streams write one piece per event (or array element), a pause apart', async () => {
    const { record } = await readBack(CASES.find((c) => c.name === 'streamGenerateContent as a JSON array')!);
    expect(record.responseChunks.map((chunk) => chunk.toString()[0])).toEqual(['[', ',']);
    expect(record.responseChunks[1]!.toString().endsWith(']')).toBe(true);
  });

  it('the usage can be changed between requests', async () => {
    upstream.usage = { inputTokens: 1, outputTokens: 2, cachedInputTokens: 0, cacheCreationTokens: 0 };
    const { reading } = await readBack(CASES[0]!);
    expect(reading).toMatchObject({ kind: 'reported', tokens: upstream.usage });
  });
});

describe('error answers: the status, the style body, no usage', () => {
  it.each([
    ['chat-completions', '/v1/chat/completions', { model: 'gpt-error-429' }, 429, { error: { type: 'invalid_request_error' } }],
    ['messages', '/v1/messages', { model: 'claude-error-529' }, 529, { type: 'error', error: { type: 'overloaded_error' } }],
    ['generative-content', '/v1beta/models/gemini-error-503:generateContent', {}, 503, { error: { code: 503, status: 'UNAVAILABLE' } }],
  ] as const)('%s %s', async (family, path, body, status, shape) => {
    const { reply, record, reading } = await readBack({ family, path, body });
    expect(reply.status).toBe(status);
    expect(reply.json).toMatchObject(shape);
    expect(record.reportedUsage).toBeUndefined();
    expect(reading).toMatchObject({ kind: 'none', reason: 'error-status' });
  });
});

describe('slow streams, for clients that go away mid-answer', () => {
  it('writes SLOW_STREAM_PIECES text pieces slowEventGapMs apart, usage as usual', async () => {
    const started = Date.now();
    const { record, reading } = await readBack({ family: 'messages', path: '/v1/messages', body: { model: 'claude-slow', stream: true } });
    expect(Date.now() - started).toBeGreaterThanOrEqual(SLOW_STREAM_PIECES * SLOW_GAP_MS);
    expect(record.responseChunks.filter((chunk) => chunk.toString().includes('text_delta'))).toHaveLength(SLOW_STREAM_PIECES);
    expect(reading).toMatchObject({ kind: 'reported', tokens: USAGE });
  });
});

describe('fixture answers', () => {
  it.each(USAGE_FIXTURE_CASES.filter((c) => c.response.family !== 'generative-content'))('fixture-$fixture', async (c) => {
    const { reply, record, reading } = await readBack({
      family: c.response.family,
      path: c.response.path,
      body: { model: `fixture-${c.fixture.replace(/\.(sse|json)$/, '')}`, stream: c.fixture.endsWith('.sse') },
    });
    expect(reply.headers['content-type']).toBe(c.response.contentType);
    expect(reading).toEqual(c.expected);
    expect(record.reportedUsage).toEqual(c.expected.kind === 'reported' ? c.expected.tokens : undefined);
  });

  it.each(USAGE_FIXTURE_CASES.filter((c) => c.response.family === 'generative-content'))(
    'fixture-$fixture (Gemini: the model is in the path)',
    async (c) => {
      const name = c.fixture.replace(/\.(sse|json)$/, '');
      const method = c.response.path.split(':')[1]!;
      const { reading } = await readBack({ family: 'generative-content', path: `/v1beta/models/fixture-${name}:${method}`, body: {} });
      expect(reading).toEqual(c.expected);
    },
  );
});
