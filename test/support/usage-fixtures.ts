import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { RouteFamily } from '../../src/check/routes/route';
import type { TokenCounts, UsageReading } from '../../src/metering/usage';
import { createUsageExtractor, type ResponseDescription } from '../../src/metering/usage-extractor';

/** Upstream response bodies, byte for byte (test/fixtures/usage/README.md says where each comes from). */
export function usageFixture(name: string): Uint8Array {
  return new Uint8Array(readFileSync(join(__dirname, '..', 'fixtures', 'usage', name)));
}

export function tokens(inputTokens: number, outputTokens: number, cachedInputTokens = 0, cacheCreationTokens = 0): TokenCounts {
  return { inputTokens, outputTokens, cachedInputTokens, cacheCreationTokens };
}

export const JSON_TYPE = 'application/json';
export const SSE_TYPE = 'text/event-stream; charset=utf-8';

export function response(family: RouteFamily, path: string, contentType: string | undefined, status = 200): ResponseDescription {
  return { family, method: 'POST', path, status, contentType, contentEncoding: undefined };
}

export interface UsageFixtureCase {
  readonly fixture: string;
  readonly response: ResponseDescription;
  readonly expected: UsageReading;
}

const chat = (path = '/v1/chat/completions', contentType = JSON_TYPE) => response('chat-completions', path, contentType);
const messages = (contentType = JSON_TYPE) => response('messages', '/v1/messages', contentType);
const generative = (method: string, contentType: string) =>
  response('generative-content', `/v1beta/models/gemini-2.5-flash:${method}`, contentType);
const reported = (counts: TokenCounts, model: string): UsageReading => ({
  kind: 'reported',
  tokens: counts,
  model,
  final: true,
  streamComplete: true,
});

/** Every fixture with the reading the official APIs' documentation implies for it. */
export const USAGE_FIXTURE_CASES: readonly UsageFixtureCase[] = [
  { fixture: 'chat-completion.json', response: chat(), expected: reported(tokens(19, 10), 'gpt-4.1-2025-04-14') },
  // prompt_tokens 2,600 include 2,000 cached reads and 400 cache writes; the 128 reasoning tokens are inside completion_tokens.
  {
    fixture: 'chat-completion-cached.json',
    response: chat(),
    expected: reported({ ...tokens(200, 300, 2000, 400), reasoningTokens: 128 }, 'gpt-5.6'),
  },
  { fixture: 'chat-stream-usage.sse', response: chat('/v1/chat/completions', SSE_TYPE), expected: reported(tokens(9, 12), 'gpt-4o-mini') },
  {
    fixture: 'chat-stream-no-usage.sse',
    response: chat('/v1/chat/completions', SSE_TYPE),
    expected: { kind: 'none', reason: 'no-usage-reported', model: 'gpt-4o-mini', streamComplete: true, deliveredTextBytes: 40 },
  },
  {
    fixture: 'gemini-compat-chat-stream.sse',
    response: chat('/v1beta/openai/chat/completions', SSE_TYPE),
    // total_tokens 40 = 7 prompt + 5 completion + 28 reasoning: this endpoint reports reasoning apart, and it is output.
    expected: reported({ ...tokens(7, 33), reasoningTokens: 28 }, 'gemini-2.5-flash'),
  },
  { fixture: 'embeddings.json', response: chat('/v1/embeddings'), expected: reported(tokens(8, 0), 'text-embedding-3-small') },
  { fixture: 'responses.json', response: chat('/v1/responses'), expected: reported(tokens(36, 87), 'gpt-4.1-2025-04-14') },
  { fixture: 'responses-stream.sse', response: chat('/v1/responses', SSE_TYPE), expected: reported(tokens(37, 11), 'gpt-4.1-2025-04-14') },
  { fixture: 'messages.json', response: messages(), expected: reported(tokens(2095, 503), 'claude-sonnet-4-5-20250929') },
  { fixture: 'messages-cache.json', response: messages(), expected: reported(tokens(21, 393, 0, 188086), 'claude-sonnet-4-5-20250929') },
  { fixture: 'messages-stream.sse', response: messages(SSE_TYPE), expected: reported(tokens(25, 15), 'claude-opus-4-6') },
  // message_delta's cumulative input and cache counts replace message_start's; it reports one server-side web search.
  {
    fixture: 'messages-stream-cumulative.sse',
    response: messages(SSE_TYPE),
    expected: reported({ ...tokens(10682, 510, 2048, 0), webSearchCalls: 1 }, 'claude-opus-4-6'),
  },
  { fixture: 'gemini.json', response: generative('generateContent', JSON_TYPE), expected: reported(tokens(8, 12), 'gemini-2.0-flash') },
  // promptTokenCount 1,200 includes 1,000 cached; 20 tool-use prompt tokens are input; 300 thinking tokens are output (and its reasoning part).
  {
    fixture: 'gemini-thinking-cached.json',
    response: generative('generateContent', JSON_TYPE),
    expected: reported({ ...tokens(220, 350, 1000), reasoningTokens: 300 }, 'gemini-2.5-pro'),
  },
  // Running totals: the last chunk's 44 candidate and 120 thinking tokens, never a sum over chunks.
  {
    fixture: 'gemini-stream.sse',
    response: generative('streamGenerateContent', SSE_TYPE),
    expected: reported({ ...tokens(9, 164), reasoningTokens: 120 }, 'gemini-2.5-flash'),
  },
  {
    fixture: 'gemini-stream-array.json',
    response: generative('streamGenerateContent', 'application/json; charset=UTF-8'),
    expected: reported({ ...tokens(9, 164), reasoningTokens: 120 }, 'gemini-2.5-flash'),
  },
];

/** Feeds `bytes` to a fresh extractor in pieces cut at `cuts` (any order, duplicates allowed) and reads the usage. */
export function readUsage(description: ResponseDescription, bytes: Uint8Array, cuts: readonly number[] = []): UsageReading {
  const extractor = createUsageExtractor(description);
  let from = 0;
  for (const cut of [...new Set(cuts)].sort((a, b) => a - b)) {
    // A copy, as each ext_proc message brings its own buffer.
    extractor.write(bytes.slice(from, cut));
    from = cut;
  }
  extractor.write(bytes.slice(from));
  return extractor.finish();
}
