import * as grpc from '@grpc/grpc-js';
import Redis from 'ioredis';
import type { Currency } from '../../src/accounts/money';
import type { PriceTable, TokenPrices } from '../../src/metering/price-table';
import { priceTableHash } from '../../src/metering/pricing';
import { configFileSchema } from '../../src/platform/config-file';
import { redisKeys } from '../../src/store/redis/redis-keys';
import { createProcessClient, EXT_PROC_ATTRIBUTES_KEY, headerMap, observed, type ProcessClient } from '../support/ext-proc-official';
import { startTestRedis, type TestRedis } from '../support/redis-server';
import { startAppUnderTest, type AppUnderTest } from '../support/running-app';
import { until } from '../support/waiting';

/**
 * Issue 35 §4 and §5 on real Redis, over real gRPC: a mixed set of answers
 * (all three styles, whole and streamed; 5-minute and 1-hour cache writes,
 * reasoning, audio, image, web searches and grounding, long context at and
 * above its threshold, an unpriced model) is metered the way Envoy's ext_proc
 * filter hands it over, and every billing stream entry is then re-priced from
 * the entry alone plus the price table its hash names. The re-pricing here is
 * written from the documented rules (docs/concepts/pricing.md), not with the code that
 * priced it: each part at its price, the rest of its count at the count's,
 * the tier the prompt is above, one rounding up. It must give the recorded
 * exact cost and the recorded cost, to the unit.
 */
jest.setTimeout(60_000);

// Micro-dollars per million tokens (per call for webSearchCall); odd prices make exact costs that are not whole units.
const PRICING = {
  models: [
    {
      model: 'gpt-4o-audio*',
      input: 2_500_000,
      output: 10_000_000,
      cachedInput: 1_250_000,
      inputAudio: 40_000_000,
      outputAudio: 80_000_000,
    },
    { model: 'o4-mini*', input: 1_100_003, output: 4_400_000, reasoning: 4_400_007 },
    {
      model: 'claude-sonnet-4-5*',
      input: 3_000_000,
      output: 15_000_000,
      cachedInput: 300_000,
      cacheCreation: 3_750_000,
      cacheCreation1h: 6_000_000,
      tiers: [
        {
          aboveInputTokens: 200_000,
          input: 6_000_000,
          output: 22_500_000,
          cachedInput: 600_000,
          cacheCreation: 7_500_000,
          cacheCreation1h: 12_000_000,
        },
      ],
    },
    {
      model: 'gemini-2.5-pro*',
      input: 1_250_000,
      output: 10_000_000,
      cachedInput: 125_000,
      outputImage: 30_000_000,
      webSearchCall: 35_000,
      tiers: [{ aboveInputTokens: 200_000, input: 2_500_000, output: 15_000_000, cachedInput: 250_000 }],
    },
    { model: 'gemini-2.5-flash*', input: 300_000, output: 2_500_000, cachedInput: 75_000, inputAudio: 1_000_000 },
  ],
  default: { input: 10_000_001, output: 30_000_000, webSearchCall: 10_000 },
  unpricedModels: 'charge-default',
};
const CURRENCY: Currency = { code: 'EUR', exponent: 6 };

let redis: TestRedis;
let server: AppUnderTest;
let client: ProcessClient;
let keyId: string;
let keyPrefix: string;

beforeAll(async () => {
  redis = await startTestRedis();
  server = await startAppUnderTest({ redisUrl: redis.url, config: { pricing: PRICING, currency: CURRENCY } });
  expect(
    (await server.admin('POST', '/admin/accounts', { id: 'acme', name: 'Acme', billing: { creditBalance: 1_000_000_000_000 } })).status,
  ).toBe(201);
  const key = await server.admin('POST', '/admin/accounts/acme/keys', { name: 'metered' });
  keyId = key.body.id;
  keyPrefix = key.body.prefix;
  client = createProcessClient(server.grpcAddress);
});

afterAll(async () => {
  client?.close();
  await server?.close();
  await redis?.stop();
});

interface Answer {
  requestId: string;
  path: string;
  family: 'chat-completions' | 'messages' | 'generative-content';
  contentType: string;
  body: string;
}

/** One Process stream as Envoy's ext_proc filter sends it in observability mode, the body in 61-byte chunks. */
function sendAnswer(answer: Answer): Promise<grpc.StatusObject> {
  const call = client.process();
  call.on('data', () => undefined);
  call.on('error', () => undefined);
  const ended = new Promise<grpc.StatusObject>((resolve) => call.on('status', resolve));
  call.write(
    observed({
      request_headers: {
        headers: headerMap([
          [':authority', 'gateway.example.test'],
          [':path', answer.path],
          [':method', 'POST'],
          [':scheme', 'http'],
          ['content-type', 'application/json'],
          ['x-request-id', answer.requestId],
          ['x-gateway-account-id', 'acme'],
          ['x-gateway-key-id', keyId],
          ['x-gateway-key-prefix', keyPrefix],
          ['x-gateway-route-family', answer.family],
        ]),
        end_of_stream: false,
      },
    }),
  );
  call.write(
    observed({
      response_headers: {
        headers: headerMap([
          [':status', '200'],
          ['content-type', answer.contentType],
        ]),
        end_of_stream: false,
      },
      attributes: { [EXT_PROC_ATTRIBUTES_KEY]: { fields: { 'request.size': { numberValue: 400 } } } },
    }),
  );
  const body = Buffer.from(answer.body);
  const chunk = 61;
  for (let from = 0; from < body.length; from += chunk) {
    call.write(observed({ response_body: { body: body.subarray(from, from + chunk), end_of_stream: from + chunk >= body.length } }));
  }
  return ended;
}

const sse = (...events: unknown[]) => events.map((event) => `data: ${JSON.stringify(event)}\n\n`).join('');
const named = (...events: [string, unknown][]) =>
  events.map(([name, data]) => `event: ${name}\ndata: ${JSON.stringify(data)}\n\n`).join('');
const JSON_TYPE = 'application/json';
const SSE_TYPE = 'text/event-stream';

const chat = (requestId: string, model: string, usage: object): Answer => ({
  requestId,
  path: '/v1/chat/completions',
  family: 'chat-completions',
  contentType: JSON_TYPE,
  body: JSON.stringify({ object: 'chat.completion', model, choices: [{ index: 0, message: { content: 'ok' } }], usage }),
});
const message = (requestId: string, model: string, usage: object): Answer => ({
  requestId,
  path: '/v1/messages',
  family: 'messages',
  contentType: JSON_TYPE,
  body: JSON.stringify({ type: 'message', model, content: [{ type: 'text', text: 'ok' }], usage }),
});
const gemini = (requestId: string, model: string, usageMetadata: object, candidate: object = {}): Answer => ({
  requestId,
  path: `/v1beta/models/${model}:generateContent`,
  family: 'generative-content',
  contentType: JSON_TYPE,
  body: JSON.stringify({
    candidates: [{ content: { parts: [{ text: 'ok' }] }, finishReason: 'STOP', ...candidate }],
    usageMetadata,
    modelVersion: model,
  }),
});

const ANSWERS: Answer[] = [
  // OpenAI chat: cached reads, reasoning, audio in and out.
  chat('chat-audio', 'gpt-4o-audio-preview-2025-06-03', {
    prompt_tokens: 5_000,
    completion_tokens: 3_000,
    total_tokens: 8_000,
    prompt_tokens_details: { cached_tokens: 1_000, audio_tokens: 2_500 },
    completion_tokens_details: { reasoning_tokens: 700, audio_tokens: 1_800 },
  }),
  // OpenAI chat, streamed with include_usage: reasoning priced apart at an odd price.
  {
    requestId: 'chat-stream-reasoning',
    path: '/v1/chat/completions',
    family: 'chat-completions',
    contentType: SSE_TYPE,
    body:
      sse(
        { object: 'chat.completion.chunk', model: 'o4-mini', choices: [{ index: 0, delta: { content: 'ok' } }], usage: null },
        {
          object: 'chat.completion.chunk',
          model: 'o4-mini',
          choices: [],
          usage: {
            prompt_tokens: 333,
            completion_tokens: 1_001,
            total_tokens: 1_334,
            completion_tokens_details: { reasoning_tokens: 999 },
          },
        },
      ) + 'data: [DONE]\n\n',
  },
  // OpenAI Responses, streamed.
  {
    requestId: 'responses-stream',
    path: '/v1/responses',
    family: 'chat-completions',
    contentType: SSE_TYPE,
    body: named(
      ['response.output_text.delta', { type: 'response.output_text.delta', delta: 'ok' }],
      [
        'response.completed',
        {
          type: 'response.completed',
          response: {
            model: 'o4-mini-2025-04-16',
            status: 'completed',
            usage: {
              input_tokens: 77,
              input_tokens_details: { cached_tokens: 7 },
              output_tokens: 500,
              output_tokens_details: { reasoning_tokens: 450 },
              total_tokens: 577,
            },
          },
        },
      ],
    ),
  },
  // Anthropic: the case, 1-hour cache writes; with thinking and web searches (the default's search fee).
  message('messages-cache-1h', 'claude-sonnet-4-5-20250929', {
    input_tokens: 1_024,
    output_tokens: 512,
    cache_read_input_tokens: 2_000,
    cache_creation_input_tokens: 2_400,
    cache_creation: { ephemeral_5m_input_tokens: 2_160, ephemeral_1h_input_tokens: 240 },
    output_tokens_details: { thinking_tokens: 300 },
    server_tool_use: { web_search_requests: 4 },
  }),
  // Anthropic: a prompt of exactly 200,000 tokens (input + cache reads + writes) is still at the base prices.
  message('messages-at-threshold', 'claude-sonnet-4-5', {
    input_tokens: 100_000,
    output_tokens: 10,
    cache_read_input_tokens: 60_000,
    cache_creation_input_tokens: 40_000,
    cache_creation: { ephemeral_5m_input_tokens: 10_000, ephemeral_1h_input_tokens: 30_000 },
  }),
  // Anthropic, streamed: one token more, and the whole answer is at the long-context prices.
  {
    requestId: 'messages-long-context-stream',
    path: '/v1/messages',
    family: 'messages',
    contentType: SSE_TYPE,
    body: named(
      [
        'message_start',
        {
          type: 'message_start',
          message: {
            model: 'claude-sonnet-4-5',
            usage: {
              input_tokens: 100_001,
              output_tokens: 1,
              cache_read_input_tokens: 60_000,
              cache_creation_input_tokens: 40_000,
              cache_creation: { ephemeral_5m_input_tokens: 10_000, ephemeral_1h_input_tokens: 30_000 },
            },
          },
        },
      ],
      ['content_block_delta', { type: 'content_block_delta', delta: { type: 'text_delta', text: 'ok' } }],
      [
        'message_delta',
        {
          type: 'message_delta',
          delta: { stop_reason: 'end_turn' },
          usage: { output_tokens: 2_345, server_tool_use: { web_search_requests: 1 } },
        },
      ],
      ['message_stop', { type: 'message_stop' }],
    ),
  },
  // Gemini 2.5 Pro above 200k: per-modality counts, thoughts, an image answer, grounding queries.
  gemini(
    'gemini-long-grounded',
    'gemini-2.5-pro',
    {
      promptTokenCount: 250_000,
      cachedContentTokenCount: 50_000,
      candidatesTokenCount: 1_500,
      thoughtsTokenCount: 800,
      toolUsePromptTokenCount: 120,
      totalTokenCount: 252_420,
      promptTokensDetails: [
        { modality: 'TEXT', tokenCount: 200_000 },
        { modality: 'IMAGE', tokenCount: 50_000 },
      ],
      cacheTokensDetails: [{ modality: 'TEXT', tokenCount: 50_000 }],
      candidatesTokensDetails: [
        { modality: 'TEXT', tokenCount: 210 },
        { modality: 'IMAGE', tokenCount: 1_290 },
      ],
    },
    { groundingMetadata: { webSearchQueries: ['a', 'b', 'c'] } },
  ),
  // Gemini Flash, streamed: audio input at its own price.
  {
    requestId: 'gemini-audio-stream',
    path: '/v1beta/models/gemini-2.5-flash:streamGenerateContent',
    family: 'generative-content',
    contentType: SSE_TYPE,
    body: sse(
      {
        candidates: [{ content: { parts: [{ text: 'o' }] } }],
        usageMetadata: { promptTokenCount: 9_000, totalTokenCount: 9_000 },
        modelVersion: 'gemini-2.5-flash',
      },
      {
        candidates: [{ content: { parts: [{ text: 'k' }] }, finishReason: 'STOP' }],
        usageMetadata: {
          promptTokenCount: 9_000,
          candidatesTokenCount: 33,
          thoughtsTokenCount: 1_234,
          totalTokenCount: 10_267,
          promptTokensDetails: [
            { modality: 'TEXT', tokenCount: 1_000 },
            { modality: 'AUDIO', tokenCount: 8_000 },
          ],
        },
        modelVersion: 'gemini-2.5-flash',
      },
    ),
  },
  // A model no entry prices: the default prices, at an odd input price.
  chat('unpriced', 'mistral-large-2411', { prompt_tokens: 7, completion_tokens: 3, total_tokens: 10 }),
];

type Entry = Record<string, string>;

async function streamEntries(): Promise<Entry[]> {
  const reader = new Redis(redis.url, { lazyConnect: true, maxRetriesPerRequest: 1 });
  await reader.connect();
  try {
    const entries = await reader.xrange(redisKeys.usageStream(), '-', '+');
    return entries.map(([, fields]) => {
      const entry: Entry = {};
      for (let index = 0; index < fields.length; index += 2) entry[fields[index]!] = fields[index + 1]!;
      return entry;
    });
  } finally {
    reader.disconnect();
  }
}

/** The price table the config file defines, as the gateway reads it, keyed by its hash: what a billing system keeps. */
function tablesByHash(): Map<string, PriceTable> {
  const table = configFileSchema.parse({ pricing: PRICING }).pricing!;
  return new Map([[priceTableHash(table, CURRENCY), table]]);
}

/** "13163.25" → 13,163,250,000 millionths: the exact cost as the entry writes it. */
function millionthsOf(decimal: string): bigint {
  const [whole, fraction = ''] = decimal.split('.');
  expect(fraction.length).toBeLessThanOrEqual(6);
  return BigInt(whole!) * 1_000_000n + BigInt(fraction.padEnd(6, '0'));
}

/**
 * An entry's cost from the entry alone and its price table: the prices are the entry's pattern's (or the
 * default's), at the tier it names; each part of a count at its own price, the rest at the count's.
 */
function reprice(entry: Entry, table: PriceTable): { exactMillionths: bigint; tierMatchesPrompt: boolean } {
  const count = (name: string) => {
    expect(entry[name]).toMatch(/^\d+$/);
    return BigInt(entry[name]!);
  };
  const priced = entry.pricePattern === '' ? undefined : table.models.find((model) => model.pattern === entry.pricePattern);
  if (entry.pricePattern !== '') expect(priced).toBeDefined();
  const tiers = priced ? priced.tiers : table.defaultTiers;
  const base = priced ? priced.prices : table.defaultPrices;
  const tier = entry.priceTier === '' ? undefined : tiers?.find((candidate) => String(candidate.aboveInputTokens) === entry.priceTier);
  if (entry.priceTier !== '') expect(tier).toBeDefined();
  const prices: TokenPrices = tier ? tier.prices : base;
  const p = (name: keyof TokenPrices) => BigInt(prices[name]);

  const input = count('inputTokens');
  const output = count('outputTokens');
  const inputAudio = count('inputAudioTokens');
  const inputImage = count('inputImageTokens');
  const reasoning = count('reasoningTokens');
  const outputAudio = count('outputAudioTokens');
  const outputImage = count('outputImageTokens');
  const writes5m = count('cacheCreation5mTokens');
  const writes1h = count('cacheCreation1hTokens');
  expect(writes5m + writes1h).toBe(count('cacheCreationTokens'));
  const exactMillionths =
    (input - inputAudio - inputImage) * p('input') +
    inputAudio * p('inputAudio') +
    inputImage * p('inputImage') +
    (output - reasoning - outputAudio - outputImage) * p('output') +
    reasoning * p('reasoning') +
    outputAudio * p('outputAudio') +
    outputImage * p('outputImage') +
    count('cachedInputTokens') * p('cachedInput') +
    writes5m * p('cacheCreation') +
    writes1h * p('cacheCreation1h') +
    count('webSearchCalls') * p('webSearchCall') * 1_000_000n;

  // The tier named must be the one the prompt (every input-side token) is above, the highest such.
  const prompt = input + count('cachedInputTokens') + count('cacheCreationTokens');
  const above = (tiers ?? []).filter((candidate) => prompt > BigInt(candidate.aboveInputTokens)).at(-1);
  return { exactMillionths, tierMatchesPrompt: above?.aboveInputTokens === tier?.aboveInputTokens };
}

describe('every usage record can be re-priced from the record and its price table', () => {
  it('a mixed set of answers of every style: the recomputed cost equals the recorded one exactly', async () => {
    for (const answer of ANSWERS) expect((await sendAnswer(answer)).code).toBe(grpc.status.OK);
    const ids = new Set(ANSWERS.map((answer) => answer.requestId));
    let entries: Entry[] = [];
    await until(
      async () => {
        entries = (await streamEntries()).filter((entry) => ids.has(entry.requestId!));
        return entries.length === ANSWERS.length;
      },
      'every answer in the billing stream',
      20_000,
    );

    const tables = tablesByHash();
    // The gateway logs the hash it prices with at start: what an operator files the config under.
    expect(server.logs.events('price_table')).toEqual([expect.objectContaining({ priceTableHash: [...tables.keys()][0], entries: 5 })]);
    const byId = new Map(entries.map((entry) => [entry.requestId!, entry]));
    for (const entry of entries) {
      const table = tables.get(entry.priceTableHash!);
      expect({ requestId: entry.requestId, table: table !== undefined }).toEqual({ requestId: entry.requestId, table: true });
      expect({ currency: entry.currency, exponent: entry.currencyExponent }).toEqual({ currency: 'EUR', exponent: '6' });
      const repriced = reprice(entry, table!);
      const recorded = millionthsOf(entry.exactCostMinorUnits!);
      expect({ requestId: entry.requestId, exact: recorded, tierMatchesPrompt: true }).toEqual({
        requestId: entry.requestId,
        exact: repriced.exactMillionths,
        tierMatchesPrompt: repriced.tierMatchesPrompt,
      });
      // The one rounding: up, to a whole unit.
      expect(entry.costMinorUnits).toBe(String((repriced.exactMillionths + 999_999n) / 1_000_000n));
    }

    // The set covers what it claims to: each dimension priced apart, both sides of a threshold, the default prices.
    const field = (id: string, name: string) => byId.get(id)![name];
    expect(field('chat-audio', 'inputAudioTokens')).toBe('2500');
    expect(field('chat-audio', 'outputAudioTokens')).toBe('1800');
    expect(field('chat-stream-reasoning', 'reasoningTokens')).toBe('999');
    expect(field('chat-stream-reasoning', 'exactCostMinorUnits')).toMatch(/\./);
    expect(field('messages-cache-1h', 'cacheCreation1hTokens')).toBe('240');
    expect(field('messages-cache-1h', 'cacheCreation5mTokens')).toBe('2160');
    expect(field('messages-cache-1h', 'webSearchCalls')).toBe('4');
    expect(field('messages-at-threshold', 'priceTier')).toBe('');
    expect(field('messages-long-context-stream', 'priceTier')).toBe('200000');
    expect(field('gemini-long-grounded', 'priceTier')).toBe('200000');
    expect(field('gemini-long-grounded', 'inputImageTokens')).toBe('50000');
    expect(field('gemini-long-grounded', 'outputImageTokens')).toBe('1290');
    expect(field('gemini-long-grounded', 'webSearchCalls')).toBe('3');
    expect(field('gemini-audio-stream', 'inputAudioTokens')).toBe('8000');
    expect(field('unpriced', 'pricePattern')).toBe('');
    expect(field('chat-audio', 'pricePattern')).toBe('gpt-4o-audio*');

    // The example: the four counts at one write price give one number; the record says why the cost is another.
    // 1,024 × 3 + 512 × 15 + 2,000 × 0.3 + 2,400 × 3.75 = 20,352 (thinking at the output price), but 240 of the writes
    // are 1-hour writes (6 a token) and there were 4 searches at the default fee: 20,352 + 240 × 2.25 + 40,000 = 60,892.
    expect(field('messages-cache-1h', 'costMinorUnits')).toBe('60892');
  });
});
