import type { RouteFamily } from '../../../src/check/routes/route';
import type { MalformedUsageReason } from '../../../src/metering/usage';
import { usageOutcome } from '../../../src/metering/usage-estimate';
import { JSON_TYPE, SSE_TYPE, readUsage, response, tokens } from '../../support/usage-fixtures';

/**
 * Usage that contradicts itself, in each style, whole and streamed: each
 * breaks one relation its API defines (a part larger than its whole, a total
 * that is not its parts' sum, a split that does not sum to what it splits).
 * Such usage is malformed, with the relation as its reason, and is charged
 * the estimate, never the counts. Beside each, an answer that looks odd but
 * keeps every relation is billed as reported: no relation is invented.
 */
const encoder = new TextEncoder();
const bytesOf = (text: string) => encoder.encode(text);
const sse = (...events: unknown[]) => events.map((event) => `data: ${JSON.stringify(event)}\n\n`).join('');
const named = (...events: [string, unknown][]) =>
  events.map(([name, data]) => `event: ${name}\ndata: ${JSON.stringify(data)}\n\n`).join('');

const chatJson = response('chat-completions', '/v1/chat/completions', JSON_TYPE);
const chatSse = response('chat-completions', '/v1/chat/completions', SSE_TYPE);
const embeddingsJson = response('chat-completions', '/v1/embeddings', JSON_TYPE);
const responsesJson = response('chat-completions', '/v1/responses', JSON_TYPE);
const responsesSse = response('chat-completions', '/v1/responses', SSE_TYPE);
const messagesJson = response('messages', '/v1/messages', JSON_TYPE);
const messagesSse = response('messages', '/v1/messages', SSE_TYPE);
const geminiJson = response('generative-content', '/v1beta/models/gemini-2.5-flash:generateContent', JSON_TYPE);
const geminiSse = response('generative-content', '/v1beta/models/gemini-2.5-flash:streamGenerateContent', SSE_TYPE);
const geminiArray = response('generative-content', '/v1beta/models/gemini-2.5-flash:streamGenerateContent', JSON_TYPE);

const chatBody = (usage: unknown) =>
  JSON.stringify({ object: 'chat.completion', model: 'gpt-4o', choices: [{ index: 0, message: { content: 'Hello there!' } }], usage });
const chatStream = (usage: unknown) =>
  sse(
    { object: 'chat.completion.chunk', model: 'gpt-4o', choices: [{ index: 0, delta: { content: 'Hello there!' } }], usage: null },
    { object: 'chat.completion.chunk', model: 'gpt-4o', choices: [], usage },
  ) + 'data: [DONE]\n\n';
const responsesBody = (usage: unknown) =>
  JSON.stringify({
    object: 'response',
    model: 'gpt-4.1',
    status: 'completed',
    output: [{ type: 'message', content: [{ type: 'output_text', text: 'Hello there!' }] }],
    usage,
  });
const responsesStream = (usage: unknown) =>
  named(
    ['response.output_text.delta', { type: 'response.output_text.delta', delta: 'Hello there!' }],
    ['response.completed', { type: 'response.completed', response: { model: 'gpt-4.1', status: 'completed', usage } }],
  );
const messageBody = (usage: unknown) =>
  JSON.stringify({ type: 'message', model: 'claude-x', content: [{ type: 'text', text: 'Hello there!' }], usage });
const messageStream = (startUsage: unknown, deltaUsage: unknown) =>
  named(
    ['message_start', { type: 'message_start', message: { model: 'claude-x', usage: startUsage } }],
    ['content_block_delta', { type: 'content_block_delta', delta: { type: 'text_delta', text: 'Hello there!' } }],
    ['message_delta', { type: 'message_delta', delta: { stop_reason: 'end_turn' }, usage: deltaUsage }],
    ['message_stop', { type: 'message_stop' }],
  );
const geminiChunk = (text: string, usageMetadata: unknown, finishReason?: string) => ({
  candidates: [{ content: { parts: [{ text }] }, ...(finishReason ? { finishReason } : {}) }],
  usageMetadata,
  modelVersion: 'gemini-2.5-flash',
});
const geminiBody = (usage: unknown) => JSON.stringify(geminiChunk('Hello there!', usage, 'STOP'));
const geminiStream = (running: unknown, last: unknown) => sse(geminiChunk('Hello ', running), geminiChunk('there!', last, 'STOP'));
const geminiArrayStream = (running: unknown, last: unknown) =>
  `[${JSON.stringify(geminiChunk('Hello ', running))},\n${JSON.stringify(geminiChunk('there!', last, 'STOP'))}]`;

type Case = [name: string, description: ReturnType<typeof response>, body: string, reason: MalformedUsageReason];

const MALFORMED: Case[] = [
  // OpenAI Chat Completions: cached reads and writes are inside prompt_tokens, reasoning inside completion_tokens.
  [
    'chat: cached_tokens above prompt_tokens',
    chatJson,
    chatBody({ prompt_tokens: 10, completion_tokens: 5, total_tokens: 15, prompt_tokens_details: { cached_tokens: 1_000_000 } }),
    'cache-exceeds-prompt',
  ],
  [
    'chat: cached + cache writes above prompt_tokens',
    chatJson,
    chatBody({
      prompt_tokens: 10,
      completion_tokens: 5,
      total_tokens: 15,
      prompt_tokens_details: { cached_tokens: 6, cache_write_tokens: 5 },
    }),
    'cache-exceeds-prompt',
  ],
  [
    'chat: reasoning_tokens above completion_tokens',
    chatJson,
    chatBody({ prompt_tokens: 10, completion_tokens: 5, total_tokens: 15, completion_tokens_details: { reasoning_tokens: 6 } }),
    'reasoning-exceeds-output',
  ],
  [
    'chat: total_tokens not prompt + completion',
    chatJson,
    chatBody({ prompt_tokens: 10, completion_tokens: 5, total_tokens: 14 }),
    'total-mismatch',
  ],
  ['chat: a negative total_tokens', chatJson, chatBody({ prompt_tokens: 10, completion_tokens: 5, total_tokens: -15 }), 'invalid-count'],
  [
    'chat: a fractional reasoning count',
    chatJson,
    chatBody({ prompt_tokens: 10, completion_tokens: 5, total_tokens: 15, completion_tokens_details: { reasoning_tokens: 1.5 } }),
    'invalid-count',
  ],
  [
    'chat stream: cached_tokens above prompt_tokens',
    chatSse,
    chatStream({ prompt_tokens: 10, completion_tokens: 5, total_tokens: 15, prompt_tokens_details: { cached_tokens: 1_000_000 } }),
    'cache-exceeds-prompt',
  ],
  [
    'chat stream: total_tokens not prompt + completion',
    chatSse,
    chatStream({ prompt_tokens: 10, completion_tokens: 5, total_tokens: 99 }),
    'total-mismatch',
  ],
  [
    'embeddings: total_tokens not prompt_tokens',
    embeddingsJson,
    JSON.stringify({ object: 'list', model: 'text-embedding-3-small', usage: { prompt_tokens: 8, total_tokens: 80 } }),
    'total-mismatch',
  ],
  // OpenAI Responses: the same relations under input/output names.
  [
    'responses: cached_tokens above input_tokens',
    responsesJson,
    responsesBody({ input_tokens: 10, output_tokens: 5, total_tokens: 15, input_tokens_details: { cached_tokens: 11 } }),
    'cache-exceeds-prompt',
  ],
  [
    'responses: reasoning_tokens above output_tokens',
    responsesJson,
    responsesBody({ input_tokens: 10, output_tokens: 5, total_tokens: 15, output_tokens_details: { reasoning_tokens: 50 } }),
    'reasoning-exceeds-output',
  ],
  [
    'responses: total_tokens not input + output',
    responsesJson,
    responsesBody({ input_tokens: 10, output_tokens: 5, total_tokens: 16 }),
    'total-mismatch',
  ],
  [
    'responses stream: cached_tokens above input_tokens',
    responsesSse,
    responsesStream({ input_tokens: 10, output_tokens: 5, total_tokens: 15, input_tokens_details: { cached_tokens: 1_000_000 } }),
    'cache-exceeds-prompt',
  ],
  // Anthropic: the cache_creation split sums to cache_creation_input_tokens; thinking is a part of output_tokens.
  [
    'messages: a cache_creation split that does not sum to the writes',
    messagesJson,
    messageBody({
      input_tokens: 10,
      output_tokens: 5,
      cache_creation_input_tokens: 100,
      cache_creation: { ephemeral_5m_input_tokens: 100, ephemeral_1h_input_tokens: 900 },
    }),
    'cache-write-split-mismatch',
  ],
  [
    'messages: thinking_tokens above output_tokens',
    messagesJson,
    messageBody({ input_tokens: 10, output_tokens: 5, output_tokens_details: { thinking_tokens: 6 } }),
    'reasoning-exceeds-output',
  ],
  [
    'messages: a negative cache read count',
    messagesJson,
    messageBody({ input_tokens: 10, output_tokens: 5, cache_read_input_tokens: -1 }),
    'invalid-count',
  ],
  [
    'messages stream: message_start with a split that does not sum',
    messagesSse,
    messageStream(
      {
        input_tokens: 10,
        output_tokens: 1,
        cache_creation_input_tokens: 100,
        cache_creation: { ephemeral_5m_input_tokens: 0, ephemeral_1h_input_tokens: 1_000_000 },
      },
      { output_tokens: 5 },
    ),
    'cache-write-split-mismatch',
  ],
  [
    'messages stream: message_delta with thinking above output',
    messagesSse,
    messageStream({ input_tokens: 10, output_tokens: 1 }, { output_tokens: 5, output_tokens_details: { thinking_tokens: 500 } }),
    'reasoning-exceeds-output',
  ],
  // Gemini: promptTokenCount includes the cached content; totalTokenCount is prompt + candidates + toolUsePrompt + thoughts.
  [
    'gemini: cachedContentTokenCount above promptTokenCount',
    geminiJson,
    geminiBody({ promptTokenCount: 10, candidatesTokenCount: 5, cachedContentTokenCount: 1_000_000, totalTokenCount: 15 }),
    'cache-exceeds-prompt',
  ],
  [
    'gemini: totalTokenCount not the sum of its parts',
    geminiJson,
    geminiBody({ promptTokenCount: 10, candidatesTokenCount: 5, thoughtsTokenCount: 7, totalTokenCount: 15 }),
    'total-mismatch',
  ],
  ['gemini: a fractional count', geminiJson, geminiBody({ promptTokenCount: 10, candidatesTokenCount: 5.5 }), 'invalid-count'],
  [
    'gemini stream (SSE): the final chunk with cached above prompt',
    geminiSse,
    geminiStream(
      { promptTokenCount: 10, totalTokenCount: 10 },
      { promptTokenCount: 10, candidatesTokenCount: 5, cachedContentTokenCount: 11, totalTokenCount: 15 },
    ),
    'cache-exceeds-prompt',
  ],
  [
    'gemini stream (SSE): the final chunk with a total that is not its parts',
    geminiSse,
    geminiStream(
      { promptTokenCount: 10, totalTokenCount: 10 },
      { promptTokenCount: 10, candidatesTokenCount: 5, totalTokenCount: 1_000_000 },
    ),
    'total-mismatch',
  ],
  [
    'gemini stream (JSON array): a final chunk with a total that is not its parts',
    geminiArray,
    geminiArrayStream(
      { promptTokenCount: 10, candidatesTokenCount: 2, totalTokenCount: 12 },
      { promptTokenCount: 10, candidatesTokenCount: 5, totalTokenCount: 3 },
    ),
    'total-mismatch',
  ],
  // An output count is what a generation's answer always carries (only embeddings have none).
  ['chat: completion_tokens missing', chatJson, chatBody({ prompt_tokens: 10, total_tokens: 10 }), 'invalid-count'],
  ['chat stream: completion_tokens missing in the usage chunk', chatSse, chatStream({ prompt_tokens: 10 }), 'invalid-count'],
  // Gemini drops a count that is 0: a final answer that delivered text with no candidates count contradicts itself.
  [
    'gemini: text delivered, no candidatesTokenCount',
    geminiJson,
    geminiBody({ promptTokenCount: 10, totalTokenCount: 10 }),
    'invalid-count',
  ],
  [
    'gemini: prompt modalities that add up past the prompt',
    geminiJson,
    geminiBody({
      promptTokenCount: 1000,
      candidatesTokenCount: 5,
      totalTokenCount: 1005,
      promptTokensDetails: [
        { modality: 'TEXT', tokenCount: 900 },
        { modality: 'AUDIO', tokenCount: 600 },
      ],
    }),
    'modality-exceeds-total',
  ],
  // Audio and image counts are parts of the count they are listed under; a search count is a small whole number.
  [
    'chat: prompt audio_tokens above prompt_tokens',
    chatJson,
    chatBody({ prompt_tokens: 10, completion_tokens: 5, total_tokens: 15, prompt_tokens_details: { audio_tokens: 11 } }),
    'modality-exceeds-total',
  ],
  [
    'chat stream: completion audio_tokens above completion_tokens',
    chatSse,
    chatStream({ prompt_tokens: 10, completion_tokens: 5, total_tokens: 15, completion_tokens_details: { audio_tokens: 6 } }),
    'modality-exceeds-total',
  ],
  [
    'messages: a fractional web_search_requests',
    messagesJson,
    messageBody({ input_tokens: 10, output_tokens: 5, server_tool_use: { web_search_requests: 1.5 } }),
    'invalid-call-count',
  ],
  [
    'messages stream: server_tool_use that is not an object',
    messagesSse,
    messageStream({ input_tokens: 10, output_tokens: 1 }, { output_tokens: 5, server_tool_use: 3 }),
    'invalid-call-count',
  ],
  [
    'gemini: an AUDIO prompt count above promptTokenCount',
    geminiJson,
    geminiBody({
      promptTokenCount: 10,
      candidatesTokenCount: 5,
      totalTokenCount: 15,
      promptTokensDetails: [{ modality: 'AUDIO', tokenCount: 11 }],
    }),
    'modality-exceeds-total',
  ],
  [
    'gemini stream: an IMAGE candidates count above candidatesTokenCount',
    geminiSse,
    geminiStream(
      { promptTokenCount: 10, totalTokenCount: 10 },
      {
        promptTokenCount: 10,
        candidatesTokenCount: 5,
        totalTokenCount: 15,
        candidatesTokensDetails: [{ modality: 'IMAGE', tokenCount: 6 }],
      },
    ),
    'modality-exceeds-total',
  ],
  [
    'gemini: a modality list that is not a list',
    geminiJson,
    geminiBody({ promptTokenCount: 10, candidatesTokenCount: 5, totalTokenCount: 15, promptTokensDetails: { AUDIO: 3 } }),
    'invalid-count',
  ],
];

describe('usage that contradicts itself is malformed, with the relation it breaks', () => {
  it.each(MALFORMED)('%s', (_name, description, body, reason) => {
    expect(readUsage(description, bytesOf(body))).toMatchObject({ kind: 'none', reason: 'malformed-usage', malformed: reason });
  });

  it.each(MALFORMED)(
    '%s: charged the estimate from the text delivered and the request size, marked with its reason',
    (_name, description, body, reason) => {
      const outcome = usageOutcome(readUsage(description, bytesOf(body)), { family: description.family, requestBodyBytes: 400 });
      // 400 request bytes → 100 input tokens; a delivered 'Hello there!' (12 bytes) → 3 output tokens; nothing cached.
      const delivered = description.path.endsWith('/embeddings') ? 0 : 3;
      expect(outcome).toMatchObject({ kind: 'metered', usage: { tokens: tokens(100, delivered), estimated: true, malformed: reason } });
    },
  );
});

describe('answers that keep every relation are billed as reported', () => {
  it.each([
    [
      'chat: cached reads and writes inside the prompt, reasoning inside the completion',
      chatJson,
      chatBody({
        prompt_tokens: 2600,
        completion_tokens: 300,
        total_tokens: 2900,
        prompt_tokens_details: { cached_tokens: 2000, cache_write_tokens: 400 },
        completion_tokens_details: { reasoning_tokens: 128 },
      }),
      tokens(200, 300, 2000, 400),
    ],
    ['chat: no total_tokens to compare', chatJson, chatBody({ prompt_tokens: 10, completion_tokens: 5 }), tokens(10, 5)],
    // Gemini's OpenAI-compatible endpoint counts reasoning apart from completion_tokens, and in total_tokens: output is both.
    [
      'chat: reasoning reported apart, and counted in the total',
      chatSse,
      chatStream({ prompt_tokens: 7, completion_tokens: 5, total_tokens: 40, completion_tokens_details: { reasoning_tokens: 28 } }),
      tokens(7, 33),
    ],
    [
      'embeddings: total_tokens is the prompt',
      embeddingsJson,
      JSON.stringify({ model: 'text-embedding-3-small', usage: { prompt_tokens: 8, total_tokens: 8 } }),
      tokens(8, 0),
    ],
    [
      'responses: every part inside its whole',
      responsesSse,
      responsesStream({
        input_tokens: 10,
        output_tokens: 5,
        total_tokens: 15,
        input_tokens_details: { cached_tokens: 10 },
        output_tokens_details: { reasoning_tokens: 5 },
      }),
      tokens(0, 5, 10),
    ],
    // input_tokens excludes the cache: 3 of them beside 100,000 cache reads is an ordinary answer.
    [
      'messages: cache reads far above input_tokens',
      messagesJson,
      messageBody({
        input_tokens: 3,
        output_tokens: 5,
        cache_read_input_tokens: 100_000,
        cache_creation_input_tokens: 300,
        cache_creation: { ephemeral_5m_input_tokens: 100, ephemeral_1h_input_tokens: 200 },
        output_tokens_details: { thinking_tokens: 5 },
      }),
      { ...tokens(3, 5, 100_000, 300), cacheCreation1hTokens: 200 },
    ],
    [
      'messages stream: the delta updates the writes without the split',
      messagesSse,
      messageStream(
        {
          input_tokens: 3,
          output_tokens: 1,
          cache_creation_input_tokens: 300,
          cache_creation: { ephemeral_5m_input_tokens: 300, ephemeral_1h_input_tokens: 0 },
        },
        { output_tokens: 5, cache_creation_input_tokens: 300 },
      ),
      tokens(3, 5, 0, 300),
    ],
    [
      'gemini: thoughts and tool-use prompt in the total',
      geminiJson,
      geminiBody({
        promptTokenCount: 1200,
        cachedContentTokenCount: 1000,
        toolUsePromptTokenCount: 20,
        candidatesTokenCount: 5,
        thoughtsTokenCount: 300,
        totalTokenCount: 1525,
      }),
      tokens(220, 305, 1000),
    ],
    // Gemini omits a count that is 0: a chunk with thoughts and no candidates.
    [
      'gemini stream: running totals, absent counts are 0',
      geminiSse,
      geminiStream(
        { promptTokenCount: 21, thoughtsTokenCount: 60, totalTokenCount: 81 },
        { promptTokenCount: 21, candidatesTokenCount: 4, thoughtsTokenCount: 60, totalTokenCount: 85 },
      ),
      tokens(21, 64),
    ],
  ] as const)('%s', (_name, description, body, expected) => {
    expect(readUsage(description, bytesOf(body))).toMatchObject({ kind: 'reported', tokens: expected });
  });
});

describe('a stream judged by its latest usage, and counts derived where their parts are given', () => {
  it("gemini: a running chunk's slip does not outlive the final totals", () => {
    const body = geminiArrayStream(
      { promptTokenCount: 10, candidatesTokenCount: 2, totalTokenCount: 3 },
      { promptTokenCount: 10, candidatesTokenCount: 5, totalTokenCount: 15 },
    );
    expect(readUsage(geminiArray, bytesOf(body))).toMatchObject({ kind: 'reported', tokens: tokens(10, 5), final: true });
  });

  it('messages: a cache_creation split without its total is charged as the sum of its parts', () => {
    const body = messageBody({
      input_tokens: 10,
      output_tokens: 5,
      cache_creation: { ephemeral_5m_input_tokens: 100, ephemeral_1h_input_tokens: 50_000 },
    });
    expect(readUsage(messagesJson, bytesOf(body))).toMatchObject({
      kind: 'reported',
      tokens: { ...tokens(10, 5, 0, 50_100), cacheCreation1hTokens: 50_000 },
    });
  });

  it('embeddings: no completion_tokens is no output', () => {
    const body = JSON.stringify({ object: 'list', data: [], model: 'm', usage: { prompt_tokens: 8, total_tokens: 8 } });
    expect(readUsage(embeddingsJson, bytesOf(body))).toMatchObject({ kind: 'reported', tokens: tokens(8, 0) });
  });
});

describe('text that reached the client is never free', () => {
  // 'Hello there!' delivered, 400 request bytes: 3 output and 100 input tokens by the estimate.
  it.each([
    ['messages', messagesSse, sse({ type: 'content_block_delta', delta: { type: 'text_delta', text: 'Hello there!' } })],
    ['generative-content', geminiSse, sse(geminiChunk('Hello there!', undefined))],
    ['generative-content', geminiArray, `[${JSON.stringify(geminiChunk('Hello there!', undefined))}`],
  ] as const)('%s: an answer cut before any usage is estimated from its text', (family, description, body) => {
    const outcome = usageOutcome(readUsage(description, bytesOf(body)), { family, requestBodyBytes: 400 });
    expect(outcome).toMatchObject({ kind: 'metered', usage: { tokens: tokens(100, 3), estimated: true } });
  });

  it('gemini: a cut stream whose running count is behind its text is charged the text', () => {
    const text = 'word '.repeat(400); // 2,000 bytes: 500 tokens by the estimate
    const body = sse(
      geminiChunk('Sure', { promptTokenCount: 11, candidatesTokenCount: 1, totalTokenCount: 12 }),
      geminiChunk(text, undefined),
    );
    const outcome = usageOutcome(readUsage(geminiSse, bytesOf(body)), { family: 'generative-content', requestBodyBytes: 400 });
    expect(outcome).toMatchObject({ kind: 'metered', usage: { tokens: tokens(11, 501), estimated: true, final: false } });
  });

  it('gemini: reasoning the count reports is added to the text, not covered by it', () => {
    const text = 'word '.repeat(400); // 2,000 bytes + 'Sure' (4): 501 tokens by the estimate
    const running = { promptTokenCount: 11, thoughtsTokenCount: 3000, totalTokenCount: 3011 };
    const body = sse(geminiChunk('Sure', running), geminiChunk(text, undefined));
    const outcome = usageOutcome(readUsage(geminiSse, bytesOf(body)), { family: 'generative-content', requestBodyBytes: 400 });
    expect(outcome).toMatchObject({ kind: 'metered', usage: { tokens: { outputTokens: 3501, reasoningTokens: 3000 }, estimated: true } });
  });
});

describe('malformed usage is never free, in any family', () => {
  it.each(['chat-completions', 'messages', 'generative-content'] as RouteFamily[])('%s', (family) => {
    const reading = {
      kind: 'none',
      reason: 'malformed-usage',
      malformed: 'total-mismatch',
      streamComplete: true,
      deliveredTextBytes: 8,
    } as const;
    expect(usageOutcome(reading, { family, requestBodyBytes: 40 })).toEqual({
      kind: 'metered',
      usage: { tokens: tokens(10, 2), estimated: true, malformed: 'total-mismatch', final: true, streamComplete: true },
    });
  });
});

describe('a background response is charged when it is created: its usage is never seen later', () => {
  // 400 request bytes → 100 input tokens by the estimate.
  const context = { family: 'chat-completions' as RouteFamily, requestBodyBytes: 400 };
  const queued = (fields: object) =>
    JSON.stringify({ id: 'resp_1', object: 'response', status: 'queued', model: 'o3-deep-research', output: [], usage: null, ...fields });

  it('at its max_output_tokens, marked estimated', () => {
    const outcome = usageOutcome(readUsage(responsesJson, bytesOf(queued({ background: true, max_output_tokens: 20_000 }))), context);
    expect(outcome).toMatchObject({ kind: 'metered', usage: { tokens: tokens(100, 20_000), estimated: true } });
  });

  it('at the hold default without one', () => {
    const outcome = usageOutcome(readUsage(responsesJson, bytesOf(queued({ background: true, max_output_tokens: null }))), context);
    expect(outcome).toMatchObject({ kind: 'metered', usage: { tokens: tokens(100, 4096), estimated: true } });
  });

  it('a background stream the client left before its terminal event: the same, from its response.created event', () => {
    const created = { type: 'response.created', response: { id: 'resp_2', status: 'queued', background: true, max_output_tokens: 9_000 } };
    const delta = { type: 'response.output_text.delta', delta: 'Hello' };
    const outcome = usageOutcome(readUsage(responsesSse, bytesOf(sse(created, delta))), context);
    expect(outcome).toMatchObject({ kind: 'metered', usage: { tokens: tokens(100, 9_000), estimated: true } });
  });

  it('a background stream that completed reports its usage, and is charged that', () => {
    const created = { type: 'response.created', response: { id: 'resp_3', status: 'queued', background: true, max_output_tokens: 9_000 } };
    const completed = {
      type: 'response.completed',
      response: { id: 'resp_3', status: 'completed', background: true, usage: { input_tokens: 10, output_tokens: 5, total_tokens: 15 } },
    };
    const outcome = usageOutcome(readUsage(responsesSse, bytesOf(sse(created, completed))), context);
    expect(outcome).toMatchObject({ kind: 'metered', usage: { tokens: tokens(10, 5), estimated: false } });
  });

  it('a response in the foreground that reported nothing is estimated from its text alone', () => {
    const outcome = usageOutcome(readUsage(responsesJson, bytesOf(queued({ background: false, max_output_tokens: 20_000 }))), context);
    expect(outcome).toMatchObject({ kind: 'metered', usage: { tokens: tokens(100, 0), estimated: true } });
  });
});
