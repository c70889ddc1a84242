import type { RouteFamily } from '../../../src/check/routes/route';
import { MAX_TOKEN_COUNT, type NoUsageReason, type UsageReading } from '../../../src/metering/usage';
import { ESTIMATE_BYTES_PER_TOKEN, estimateTokens, usageOutcome } from '../../../src/metering/usage-estimate';
import { SSE_TYPE, readUsage, response, tokens, usageFixture } from '../../support/usage-fixtures';

const none = (reason: NoUsageReason, deliveredTextBytes = 0, streamComplete = true): UsageReading => ({
  kind: 'none',
  reason,
  model: 'gpt-4o-mini',
  streamComplete,
  deliveredTextBytes,
});

describe('the estimate rule: one token per 4 bytes, rounded up', () => {
  it('output from the delivered text, input from the request body, no cache counts', () => {
    expect(ESTIMATE_BYTES_PER_TOKEN).toBe(4);
    expect(estimateTokens(40, 1000)).toEqual(tokens(250, 10));
    expect(estimateTokens(41, 1001)).toEqual(tokens(251, 11));
    expect(estimateTokens(1, 1)).toEqual(tokens(1, 1));
    expect(estimateTokens(0, 0)).toEqual(tokens(0, 0));
  });

  it('never exceeds the token bound, and treats nonsense sizes as nothing', () => {
    expect(estimateTokens(Number.MAX_SAFE_INTEGER, 8 * MAX_TOKEN_COUNT)).toEqual(tokens(MAX_TOKEN_COUNT, MAX_TOKEN_COUNT));
    expect(estimateTokens(-5, Number.NaN)).toEqual(tokens(0, 0));
    expect(estimateTokens(1.5, Infinity)).toEqual(tokens(0, 0));
  });
});

describe('what is counted for a response', () => {
  const chat = { family: 'chat-completions' as RouteFamily, requestBodyBytes: 400 };

  it('reported usage is counted as reported, not estimated', () => {
    const reading = readUsage(response('chat-completions', '/v1/chat/completions', SSE_TYPE), usageFixture('chat-stream-usage.sse'));
    expect(usageOutcome(reading, chat)).toEqual({
      kind: 'metered',
      usage: { tokens: tokens(9, 12), model: 'gpt-4o-mini', estimated: false, final: true, streamComplete: true },
    });
  });

  it('a chat-completions stream without include_usage is never free: it is estimated and marked so', () => {
    const reading = readUsage(response('chat-completions', '/v1/chat/completions', SSE_TYPE), usageFixture('chat-stream-no-usage.sse'));
    expect(usageOutcome(reading, chat)).toEqual({
      kind: 'metered',
      // 40 bytes of delivered text → 10 output tokens; 400 request bytes → 100 input tokens.
      usage: { tokens: tokens(100, 10), model: 'gpt-4o-mini', estimated: true, final: true, streamComplete: true },
    });
  });

  it('a chat-completions stream cut off before its usage chunk is estimated from what it delivered', () => {
    expect(usageOutcome(none('no-usage-reported', 9, false), chat)).toEqual({
      kind: 'metered',
      usage: { tokens: tokens(100, 3), model: 'gpt-4o-mini', estimated: true, final: false, streamComplete: false },
    });
  });

  it.each(['malformed-usage', 'malformed-body', 'empty-body', 'unsupported-content-type', 'unsupported-content-encoding'] as const)(
    'a successful chat-completions answer whose usage cannot be read (%s) is estimated too',
    (reason) => {
      expect(usageOutcome(none(reason), chat)).toMatchObject({ kind: 'metered', usage: { estimated: true, tokens: tokens(100, 0) } });
    },
  );

  it.each(['error-status', 'not-success-status', 'not-metered-request', 'no-response'] as const)(
    '%s costs nothing, in every family',
    (reason) => {
      for (const family of ['chat-completions', 'messages', 'generative-content'] as RouteFamily[]) {
        expect(usageOutcome(none(reason), { family, requestBodyBytes: 400 })).toEqual({ kind: 'free', reason });
      }
    },
  );

  it.each(['messages', 'generative-content'] as RouteFamily[])(
    '%s answers always carry usage: one without it and without text costs nothing, with its reason',
    (family) => {
      expect(usageOutcome(none('no-usage-reported', 0), { family, requestBodyBytes: 400 })).toEqual({
        kind: 'free',
        reason: 'no-usage-reported',
      });
    },
  );

  it.each(['messages', 'generative-content'] as RouteFamily[])(
    '%s: one without usage that delivered text is charged the estimate of that text',
    (family) => {
      expect(usageOutcome(none('no-usage-reported', 100), { family, requestBodyBytes: 400 })).toMatchObject({
        kind: 'metered',
        usage: { tokens: tokens(100, 25), estimated: true },
      });
    },
  );
});

describe('a stream cut off before its final usage is charged at least the text it delivered', () => {
  const messagesSse = response('messages', '/v1/messages', SSE_TYPE);
  const start =
    'event: message_start\ndata: {"type":"message_start","message":{"model":"claude-x","usage":{"input_tokens":25,"output_tokens":1}}}\n\n';
  const delta = (text: string) =>
    `event: content_block_delta\ndata: ${JSON.stringify({ type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text } })}\n\n`;
  const thinking = (text: string) =>
    `event: content_block_delta\ndata: ${JSON.stringify({ type: 'content_block_delta', index: 0, delta: { type: 'thinking_delta', thinking: text } })}\n\n`;
  const messages = { family: 'messages' as RouteFamily, requestBodyBytes: 400 };
  const encoder = new TextEncoder();

  it('messages: a client that leaves after the whole text, before message_delta, pays for that text, marked estimated', () => {
    // 400 bytes of text and 40 of thinking delivered; message_start's early count says 1 output token.
    const body = start + thinking('t'.repeat(40)) + delta('x'.repeat(200)) + delta('y'.repeat(200));
    expect(usageOutcome(readUsage(messagesSse, encoder.encode(body)), messages)).toEqual({
      kind: 'metered',
      usage: { tokens: tokens(25, 110), model: 'claude-x', estimated: true, final: false, streamComplete: false },
    });
  });

  it('messages: raising the output keeps the cache writes and their 1-hour part as reported', () => {
    const cached =
      'event: message_start\ndata: {"type":"message_start","message":{"model":"claude-x","usage":{"input_tokens":25,' +
      '"cache_creation_input_tokens":300,"cache_creation":{"ephemeral_5m_input_tokens":100,"ephemeral_1h_input_tokens":200},"output_tokens":1}}}\n\n';
    expect(usageOutcome(readUsage(messagesSse, encoder.encode(cached + delta('x'.repeat(400)))), messages)).toMatchObject({
      usage: { tokens: { ...tokens(25, 100, 0, 300), cacheCreation1hTokens: 200 }, estimated: true, final: false },
    });
  });

  it('messages: the reported counts stand when they are the higher, or final', () => {
    const stop = 'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":3}}\n\n';
    expect(usageOutcome(readUsage(messagesSse, encoder.encode(start + delta('x'.repeat(400)) + stop)), messages)).toMatchObject({
      usage: { tokens: tokens(25, 3), estimated: false, final: true },
    });
    expect(usageOutcome(readUsage(messagesSse, encoder.encode(start + delta('x'))), messages)).toMatchObject({
      usage: { tokens: tokens(25, 1), estimated: false, final: false },
    });
    // A message_delta without a stop reason is a running count of its own: it stands.
    const running = 'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":null},"usage":{"output_tokens":30}}\n\n';
    expect(usageOutcome(readUsage(messagesSse, encoder.encode(start + delta('x'.repeat(400)) + running)), messages)).toMatchObject({
      usage: { tokens: tokens(25, 30), estimated: false, final: false },
    });
  });

  it('generative-content: a model that reports its candidates only at the end, cut before it', () => {
    const chunk = (text: string) =>
      `data: ${JSON.stringify({ candidates: [{ content: { parts: [{ text }] } }], usageMetadata: { promptTokenCount: 9 }, modelVersion: 'gemini-2.5-flash' })}\r\n\r\n`;
    const gemini = response('generative-content', '/v1beta/models/gemini-2.5-flash:streamGenerateContent', SSE_TYPE);
    const reading = readUsage(gemini, encoder.encode(chunk('a'.repeat(100)) + chunk('b'.repeat(100))));
    expect(usageOutcome(reading, { family: 'generative-content', requestBodyBytes: 400 })).toEqual({
      kind: 'metered',
      usage: { tokens: tokens(9, 50), model: 'gemini-2.5-flash', estimated: true, final: false, streamComplete: false },
    });
    // Running candidates counts are the upstream's own: they stand.
    const counted = readUsage(gemini, usageFixture('gemini-stream.sse').slice(0, 900));
    expect(usageOutcome(counted, { family: 'generative-content', requestBodyBytes: 400 })).toMatchObject({
      usage: { estimated: false, final: false },
    });
  });
});

describe("Gemini's embeddings, whose answers carry no usage", () => {
  const embed = response('generative-content', '/v1beta/models/text-embedding-004:embedContent', 'application/json');
  const reading = () => readUsage(embed, new TextEncoder().encode('{"embedding":{"values":[0.25,-0.5]}}'));

  it('are read (metered requests), and report nothing', () => {
    expect(reading()).toMatchObject({ kind: 'none', reason: 'no-usage-reported' });
  });

  it('are charged the estimate of their input, marked estimated, never free', () => {
    const context = { family: 'generative-content' as RouteFamily, requestBodyBytes: 400, answersWithoutUsage: true };
    expect(usageOutcome(reading(), context)).toMatchObject({ kind: 'metered', usage: { tokens: tokens(100, 0), estimated: true } });
  });
});
