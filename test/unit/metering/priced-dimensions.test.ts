import { JSON_TYPE, SSE_TYPE, readUsage, response, tokens } from '../../support/usage-fixtures';

/**
 * Every dimension an upstream prices apart, read from each style's usage,
 * whole and streamed (field names from the official SDKs: openai-node
 * CompletionUsage, @anthropic-ai/sdk Usage, @google/genai UsageMetadata and
 * GroundingMetadata). Each is recorded as a part of the count it lies in, so
 * totals and budgets are unchanged and the cost can price it apart.
 */
const encoder = new TextEncoder();
const bytesOf = (text: string) => encoder.encode(text);
const sse = (...events: unknown[]) => events.map((event) => `data: ${JSON.stringify(event)}\n\n`).join('');
const named = (...events: [string, unknown][]) =>
  events.map(([name, data]) => `event: ${name}\ndata: ${JSON.stringify(data)}\n\n`).join('');

const chatJson = response('chat-completions', '/v1/chat/completions', JSON_TYPE);
const chatSse = response('chat-completions', '/v1/chat/completions', SSE_TYPE);
const responsesJson = response('chat-completions', '/v1/responses', JSON_TYPE);
const messagesJson = response('messages', '/v1/messages', JSON_TYPE);
const messagesSse = response('messages', '/v1/messages', SSE_TYPE);
const geminiJson = response('generative-content', '/v1beta/models/gemini-2.5-pro:generateContent', JSON_TYPE);
const geminiSse = response('generative-content', '/v1beta/models/gemini-2.5-pro:streamGenerateContent', SSE_TYPE);

describe('OpenAI: reasoning and audio tokens', () => {
  const usage = {
    prompt_tokens: 1_000,
    completion_tokens: 500,
    total_tokens: 1_500,
    prompt_tokens_details: { cached_tokens: 200, audio_tokens: 300 },
    completion_tokens_details: { reasoning_tokens: 100, audio_tokens: 250 },
  };
  const expected = { ...tokens(800, 500, 200), reasoningTokens: 100, inputAudioTokens: 300, outputAudioTokens: 250 };

  it('chat completions, whole and streamed', () => {
    const body = JSON.stringify({ model: 'gpt-4o-audio-preview', choices: [{ index: 0, message: { content: 'Hi' } }], usage });
    expect(readUsage(chatJson, bytesOf(body))).toMatchObject({ kind: 'reported', tokens: expected });
    const stream =
      sse(
        { model: 'gpt-4o-audio-preview', choices: [{ index: 0, delta: { content: 'Hi' } }], usage: null },
        { model: 'gpt-4o-audio-preview', choices: [], usage },
      ) + 'data: [DONE]\n\n';
    expect(readUsage(chatSse, bytesOf(stream))).toEqual({
      kind: 'reported',
      tokens: expected,
      model: 'gpt-4o-audio-preview',
      final: true,
      streamComplete: true,
    });
  });

  it('audio beyond the uncached prompt is priced as the cache reads it then was', () => {
    const cachedAudio = { ...usage, prompt_tokens_details: { cached_tokens: 900, audio_tokens: 300 } };
    const body = JSON.stringify({ model: 'gpt-4o-audio-preview', choices: [], usage: cachedAudio });
    expect(readUsage(chatJson, bytesOf(body))).toMatchObject({
      tokens: { inputTokens: 100, inputAudioTokens: 100, cachedInputTokens: 900 },
    });
  });

  it('the Responses API: reasoning', () => {
    const body = JSON.stringify({
      model: 'o4-mini',
      output: [],
      usage: { input_tokens: 10, output_tokens: 64, total_tokens: 74, output_tokens_details: { reasoning_tokens: 40 } },
    });
    expect(readUsage(responsesJson, bytesOf(body))).toMatchObject({ tokens: { ...tokens(10, 64), reasoningTokens: 40 } });
  });
});

describe('Anthropic: 5-minute and 1-hour cache writes, thinking, web searches', () => {
  const usage = {
    input_tokens: 12,
    output_tokens: 900,
    cache_read_input_tokens: 4_000,
    cache_creation_input_tokens: 3_000,
    cache_creation: { ephemeral_5m_input_tokens: 1_000, ephemeral_1h_input_tokens: 2_000 },
    output_tokens_details: { thinking_tokens: 600 },
    server_tool_use: { web_search_requests: 3, web_fetch_requests: 1 },
  };
  const expected = { ...tokens(12, 900, 4_000, 3_000), cacheCreation1hTokens: 2_000, reasoningTokens: 600, webSearchCalls: 3 };

  it('a whole message', () => {
    const body = JSON.stringify({ type: 'message', model: 'claude-sonnet-4-5', content: [], usage });
    expect(readUsage(messagesJson, bytesOf(body))).toEqual({
      kind: 'reported',
      tokens: expected,
      model: 'claude-sonnet-4-5',
      final: true,
      streamComplete: true,
    });
  });

  it('a stream: message_delta carries the cumulative searches and thinking', () => {
    const { output_tokens_details: _thinking, server_tool_use: _tools, ...start } = usage;
    const stream = named(
      ['message_start', { type: 'message_start', message: { model: 'claude-sonnet-4-5', usage: { ...start, output_tokens: 1 } } }],
      [
        'message_delta',
        {
          type: 'message_delta',
          delta: { stop_reason: 'end_turn' },
          usage: { output_tokens: 900, output_tokens_details: { thinking_tokens: 600 }, server_tool_use: { web_search_requests: 3 } },
        },
      ],
      ['message_stop', { type: 'message_stop' }],
    );
    expect(readUsage(messagesSse, bytesOf(stream))).toMatchObject({ kind: 'reported', tokens: expected, final: true });
  });
});

describe('Gemini: per-modality counts, thoughts, grounding queries', () => {
  const usageMetadata = {
    promptTokenCount: 2_000,
    cachedContentTokenCount: 500,
    candidatesTokenCount: 1_400,
    thoughtsTokenCount: 100,
    totalTokenCount: 3_500,
    promptTokensDetails: [
      { modality: 'TEXT', tokenCount: 900 },
      { modality: 'AUDIO', tokenCount: 800 },
      { modality: 'IMAGE', tokenCount: 300 },
    ],
    cacheTokensDetails: [
      { modality: 'TEXT', tokenCount: 400 },
      { modality: 'AUDIO', tokenCount: 100 },
    ],
    candidatesTokensDetails: [
      { modality: 'TEXT', tokenCount: 110 },
      { modality: 'IMAGE', tokenCount: 1_290 },
    ],
  };
  // Uncached: 1,500 input of which 700 audio and 300 image; output 1,500 = 1,400 candidates (1,290 image) + 100 thoughts.
  const expected = {
    ...tokens(1_500, 1_500, 500),
    reasoningTokens: 100,
    inputAudioTokens: 700,
    inputImageTokens: 300,
    outputImageTokens: 1_290,
    webSearchCalls: 2,
  };
  const grounded = (finishReason?: string) => ({
    content: { parts: [{ text: 'Hi' }] },
    groundingMetadata: { webSearchQueries: ['weather today', 'weather tomorrow'] },
    ...(finishReason ? { finishReason } : {}),
  });

  it('a whole answer', () => {
    const body = JSON.stringify({ candidates: [grounded('STOP')], usageMetadata, modelVersion: 'gemini-2.5-pro' });
    expect(readUsage(geminiJson, bytesOf(body))).toEqual({
      kind: 'reported',
      tokens: expected,
      model: 'gemini-2.5-pro',
      final: true,
      streamComplete: true,
    });
  });

  it('a stream that repeats its grounding metadata counts the queries once', () => {
    const stream = sse(
      {
        candidates: [grounded()],
        usageMetadata: { promptTokenCount: 2_000, cachedContentTokenCount: 500, totalTokenCount: 2_000 },
        modelVersion: 'gemini-2.5-pro',
      },
      { candidates: [grounded('STOP')], usageMetadata, modelVersion: 'gemini-2.5-pro' },
    );
    expect(readUsage(geminiSse, bytesOf(stream))).toMatchObject({ kind: 'reported', tokens: expected, final: true });
  });

  it('an answer without details or grounding has no parts', () => {
    const body = JSON.stringify({
      candidates: [{ content: { parts: [{ text: 'Hi' }] }, finishReason: 'STOP' }],
      usageMetadata: { promptTokenCount: 5, candidatesTokenCount: 2, totalTokenCount: 7 },
    });
    expect(readUsage(geminiJson, bytesOf(body))).toMatchObject({ tokens: tokens(5, 2) });
    expect((readUsage(geminiJson, bytesOf(body)) as { tokens: object }).tokens).toEqual(tokens(5, 2));
  });
});
