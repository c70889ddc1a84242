import * as grpc from '@grpc/grpc-js';
import type { ApiAccount, ApiUsageReport } from '../../src/cli/api-types';
import { createProcessClient, EXT_PROC_ATTRIBUTES_KEY, headerMap, observed, type ProcessClient } from '../support/ext-proc-official';
import { startTestRedis, type TestRedis } from '../support/redis-server';
import { startAppUnderTest, type AppUnderTest } from '../support/running-app';
import { usageFixture } from '../support/usage-fixtures';
import { until } from '../support/waiting';

/**
 * The usage processor connected to the ledger (issue 16), on real Redis and
 * over real gRPC: a metered answer sent the way Envoy's ext_proc filter sends
 * it (observability mode, official protos) moves the account's prepaid
 * balance, its month's spend, the key's token budget and the usage API by
 * exactly the tokens the upstream reported, priced by the price table; the
 * same x-request-id handed over twice counts once; an answer without
 * ext_authz's identity moves nothing.
 */
jest.setTimeout(60_000);

// 1 and 2 minor units per input and output token: a cost is easy to read off the tokens.
const PRICING = {
  models: [
    { model: 'gpt-4.1*', input: 1_000_000, output: 2_000_000 },
    { model: 'claude-opus-4-6', input: 3_000_000, output: 5_000_000 },
    { model: 'claude-sonnet-4-5*', input: 3_000_000, output: 5_000_000, cacheCreation: 4_000_000, cacheCreation1h: 6_000_000 },
  ],
  default: { input: 10_000_000, output: 10_000_000, webSearchCall: 10_000 },
  unpricedModels: 'charge-default',
};
// A day's budget refills about 1.2 tokens a second: slow enough to read back what the answers took.
const KEY_BUDGET = { tokens: 100_000, window: '1d' };
const KEY_BUDGET_WINDOW_SECONDS = 86_400;
const START_BALANCE = 10_000;

let redis: TestRedis;
let server: AppUnderTest;
let client: ProcessClient;
let keyId: string;
let keyPrefix: string;

beforeAll(async () => {
  redis = await startTestRedis();
  server = await startAppUnderTest({
    redisUrl: redis.url,
    config: { pricing: PRICING, defaultPlan: { tokenBudgets: { key: [KEY_BUDGET] } } },
    env: { REDIS_TIMEOUT_MS: '1000' },
  });
  expect(
    (await server.admin('POST', '/admin/accounts', { id: 'acme', name: 'Acme', billing: { creditBalance: START_BALANCE } })).status,
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
  /** Without ext_authz's identity headers (a request ext_authz never allowed). */
  anonymous?: boolean;
  path: string;
  family: string;
  contentType: string;
  body: Uint8Array;
  chunkBytes: number;
}

/** One Process stream as Envoy's ext_proc filter sends it in observability mode; resolves when the processor ended it. */
function sendAnswer(answer: Answer): Promise<grpc.StatusObject> {
  const call = client.process();
  call.on('data', () => undefined);
  call.on('error', () => undefined);
  const ended = new Promise<grpc.StatusObject>((resolve) => call.on('status', resolve));
  const identity: [string, string][] = answer.anonymous
    ? []
    : [
        ['x-gateway-account-id', 'acme'],
        ['x-gateway-key-id', keyId],
        ['x-gateway-key-prefix', keyPrefix],
        ['x-gateway-route-family', answer.family],
      ];
  const requestHeaders: [string, string][] = [
    [':authority', 'gateway.example.test'],
    [':path', answer.path],
    [':method', 'POST'],
    [':scheme', 'http'],
    ['content-type', 'application/json'],
    ['x-request-id', answer.requestId],
    ...identity,
  ];
  call.write(observed({ request_headers: { headers: headerMap(requestHeaders), end_of_stream: false } }));
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
  for (let from = 0; from < answer.body.length; from += answer.chunkBytes) {
    const chunk = Buffer.from(answer.body.subarray(from, from + answer.chunkBytes));
    call.write(observed({ response_body: { body: chunk, end_of_stream: from + answer.chunkBytes >= answer.body.length } }));
  }
  return ended;
}

// chat-completion.json: 19 input and 10 output tokens of gpt-4.1-2025-04-14 → 19 × 1 + 10 × 2 = 39 minor units.
const chatAnswer = (requestId: string): Answer => ({
  requestId,
  path: '/v1/chat/completions',
  family: 'chat-completions',
  contentType: 'application/json',
  body: usageFixture('chat-completion.json'),
  chunkBytes: 64,
});
// messages-stream.sse: 25 input and 15 output tokens of claude-opus-4-6, streamed → 25 × 3 + 15 × 5 = 150 minor units.
const streamedAnswer = (requestId: string): Answer => ({
  requestId,
  path: '/v1/messages',
  family: 'messages',
  contentType: 'text/event-stream',
  body: usageFixture('messages-stream.sse'),
  chunkBytes: 37,
});

async function account(): Promise<ApiAccount> {
  const answer = await server.admin('GET', '/admin/accounts/acme');
  expect(answer.status).toBe(200);
  return answer.body;
}

async function usageTotal(): Promise<ApiUsageReport['total']> {
  // The last 30 days, by day.
  const answer = await server.admin('GET', '/admin/accounts/acme/usage?granularity=day');
  expect(answer.status).toBe(200);
  return (answer.body as unknown as ApiUsageReport).total;
}

async function keyBudgetRemaining(): Promise<number> {
  const states = await server.app.store.readTokenBudgets(keyId, {
    key: [{ tokens: KEY_BUDGET.tokens, windowSeconds: KEY_BUDGET_WINDOW_SECONDS }],
    account: [],
  });
  return states!.find((state) => state.scope === 'key')!.remaining;
}

async function recordsWith(outcome: string): Promise<number> {
  const metric = (await (await fetch(`${server.adminUrl}/metrics`)).text())
    .split('\n')
    .find((line) => line.startsWith(`gateway_authz_usage_records_total{outcome="${outcome}"}`));
  return metric ? Number(metric.split(' ').at(-1)) : 0;
}

const handedOver = async () => server.app.usage.buffered === 0;

describe('a metered answer over ext_proc moves the ledger by exactly its usage', () => {
  it('whole and streamed answers debit the balance, add to the month and the usage API, and use the token budget', async () => {
    const startedMs = Date.now();
    const before = { usage: await usageTotal(), budget: await keyBudgetRemaining() };
    expect(before.budget).toBe(KEY_BUDGET.tokens);

    expect((await sendAnswer(chatAnswer('req-whole-1'))).code).toBe(grpc.status.OK);
    await until(async () => (await account()).billing.creditBalance === START_BALANCE - 39, 'the whole answer to be applied', 10_000);
    expect((await sendAnswer(streamedAnswer('req-streamed-1'))).code).toBe(grpc.status.OK);
    await until(
      async () => (await account()).billing.creditBalance === START_BALANCE - 39 - 150,
      'the streamed answer to be applied',
      10_000,
    );

    const after = await account();
    expect(after.billing).toMatchObject({ creditBalance: START_BALANCE - 189, spentThisMonth: 189, creditShortfall: 0 });
    expect(await usageTotal()).toEqual({
      requests: before.usage.requests + 2,
      inputTokens: before.usage.inputTokens + 19 + 25,
      outputTokens: before.usage.outputTokens + 10 + 15,
      cachedInputTokens: before.usage.cachedInputTokens,
      cacheCreationTokens: before.usage.cacheCreationTokens,
      costMinorUnits: before.usage.costMinorUnits + 189,
      // The same cost as money: its exactness is the usage API's test.
      costFormatted: expect.any(String),
      estimatedRequests: before.usage.estimatedRequests,
    });
    // 29 + 40 tokens taken; the budget refills continuously, so it reads back at most what refilled meanwhile.
    const remaining = await keyBudgetRemaining();
    const refilled = Math.ceil((((Date.now() - startedMs) / 1000) * KEY_BUDGET.tokens) / KEY_BUDGET_WINDOW_SECONDS);
    expect(remaining).toBeGreaterThanOrEqual(KEY_BUDGET.tokens - 69);
    expect(remaining).toBeLessThanOrEqual(KEY_BUDGET.tokens - 69 + refilled);
  });

  it("prices a messages answer's 1-hour cache writes at their own price, and counts them among the cache writes", async () => {
    const balance = (await account()).billing.creditBalance;
    const usage = await usageTotal();
    const body = {
      type: 'message',
      model: 'claude-sonnet-4-5-20250929',
      content: [{ type: 'text', text: 'ok' }],
      usage: {
        input_tokens: 10,
        cache_creation_input_tokens: 100,
        cache_read_input_tokens: 0,
        cache_creation: { ephemeral_5m_input_tokens: 40, ephemeral_1h_input_tokens: 60 },
        output_tokens: 2,
      },
    };
    const answer: Answer = {
      requestId: 'req-cache-1h',
      path: '/v1/messages',
      family: 'messages',
      contentType: 'application/json',
      body: Buffer.from(JSON.stringify(body)),
      chunkBytes: 50,
    };
    expect((await sendAnswer(answer)).code).toBe(grpc.status.OK);
    // 10 × 3 + 2 × 5 + 40 × 4 + 60 × 6 = 560 minor units; with one price for every write, 440.
    await until(async () => (await account()).billing.creditBalance === balance! - 560, 'the answer to be applied', 10_000);
    expect(await usageTotal()).toMatchObject({
      requests: usage.requests + 1,
      cacheCreationTokens: usage.cacheCreationTokens + 100,
      costMinorUnits: usage.costMinorUnits + 560,
    });
  });

  it('charges usage that contradicts itself the estimate, not its counts, and counts it as malformed', async () => {
    const balance = (await account()).billing.creditBalance!;
    const usage = await usageTotal();
    // cached_tokens 1,000,000 of a 10-token prompt: as reported it would cost 1,000,000 × 1 + 5 × 2 minor units.
    const body = {
      object: 'chat.completion',
      model: 'gpt-4.1-2025-04-14',
      choices: [{ index: 0, message: { role: 'assistant', content: 'Hello there!' }, finish_reason: 'stop' }],
      usage: { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15, prompt_tokens_details: { cached_tokens: 1_000_000 } },
    };
    const answer: Answer = {
      requestId: 'req-malformed',
      path: '/v1/chat/completions',
      family: 'chat-completions',
      contentType: 'application/json',
      body: Buffer.from(JSON.stringify(body)),
      chunkBytes: 40,
    };
    expect((await sendAnswer(answer)).code).toBe(grpc.status.OK);
    // The estimate: 400 request bytes → 100 input tokens, 'Hello there!' (12 bytes) → 3 output tokens: 100 × 1 + 3 × 2.
    await until(async () => (await account()).billing.creditBalance === balance - 106, 'the estimate to be applied', 10_000);
    expect(await usageTotal()).toMatchObject({
      requests: usage.requests + 1,
      inputTokens: usage.inputTokens + 100,
      outputTokens: usage.outputTokens + 3,
      cachedInputTokens: usage.cachedInputTokens,
      costMinorUnits: usage.costMinorUnits + 106,
      estimatedRequests: usage.estimatedRequests + 1,
    });
    const metrics = await (await fetch(`${server.adminUrl}/metrics`)).text();
    expect(metrics).toContain('gateway_authz_ext_proc_malformed_usage_total{family="chat-completions",reason="cache-exceeds-prompt"} 1');
    // Logged with its ids and the broken relation, never the answer's text.
    const logged = server.logs.events('ext_proc_malformed_usage');
    expect(logged).toEqual([expect.objectContaining({ reason: 'cache-exceeds-prompt', requestId: 'req-malformed', accountId: 'acme' })]);
    expect(server.logs.lines.join('\n')).not.toContain('Hello there!');
  });

  it('counts the same x-request-id once, however often Envoy hands the answer over', async () => {
    const balance = (await account()).billing.creditBalance;
    const usage = await usageTotal();
    const duplicates = await recordsWith('duplicate');
    expect((await sendAnswer(chatAnswer('req-twice'))).code).toBe(grpc.status.OK);
    await until(async () => (await account()).billing.creditBalance === balance! - 39, 'the first hand-over to be applied', 10_000);
    expect((await sendAnswer(chatAnswer('req-twice'))).code).toBe(grpc.status.OK);
    await until(async () => (await recordsWith('duplicate')) === duplicates + 1, 'the second hand-over to be found a duplicate', 10_000);

    expect((await account()).billing).toMatchObject({ creditBalance: balance! - 39 });
    const total = await usageTotal();
    expect({ requests: total.requests - usage.requests, inputTokens: total.inputTokens - usage.inputTokens }).toEqual({
      requests: 1,
      inputTokens: 19,
    });
  });

  it('never meters an answer without the identity ext_authz set: nothing moves', async () => {
    const balance = (await account()).billing.creditBalance;
    const usage = await usageTotal();
    const applied = await recordsWith('applied');
    expect((await sendAnswer({ ...chatAnswer('req-anonymous'), anonymous: true })).code).toBe(grpc.status.OK);
    // A later identified answer is applied after it: had the anonymous one been recorded, it would be applied first.
    expect((await sendAnswer(chatAnswer('req-after-anonymous'))).code).toBe(grpc.status.OK);
    await until(async () => (await recordsWith('applied')) === applied + 1 && (await handedOver()), 'the identified answer', 10_000);
    expect((await account()).billing.creditBalance).toBe(balance! - 39);
    expect((await usageTotal()).requests).toBe(usage.requests + 1);
  });
});
