import type * as grpc from '@grpc/grpc-js';
import Redis from 'ioredis';
import { createOfficialCheckClient, envoyCheckRequest, type OfficialCheckClient } from '../support/envoy-official-client';
import { createProcessClient, headerMap, observed, type ProcessClient } from '../support/ext-proc-official';
import { startTestRedis, type TestRedis } from '../support/redis-server';
import { startAppUnderTest, type AppUnderTest } from '../support/running-app';
import { usageFixture } from '../support/usage-fixtures';
import { until } from '../support/waiting';
import { redisKeys } from '../../src/store/redis/redis-keys';
import { parsePackedHoldSlots } from '../../src/store/redis/redis-records';

/**
 * Issue 35 §1, end to end: an account with credit for one answer sends 20
 * requests at once over real gRPC (Envoy's official protos) to the real
 * service on real Redis; the admitted ones are metered over ext_proc as Envoy
 * sends their answers. Without credit holds all 20 pass and the balance ends
 * 19 answers below zero. With them, the number admitted is bounded by the
 * holds (balance / hold), and the balance falls below zero by no more than
 * the real costs' excess over their holds.
 */
jest.setTimeout(60_000);

// 1 and 2 minor units per input and output token, as in metered-usage-ledger.test.ts.
const PRICING = {
  models: [{ model: 'gpt-4.1*', input: 1_000_000, output: 2_000_000 }],
  default: { input: 10_000_000, output: 10_000_000, webSearchCall: 0 },
  unpricedModels: 'charge-default',
};
// chat-completion.json: 19 input and 10 output tokens of gpt-4.1-2025-04-14 → 19 × 1 + 10 × 2 = 39 minor units.
const ANSWER_COST = 39;
const CONCURRENT = 20;
const REQUEST_BYTES = 92;

let redis: TestRedis;
let raw: Redis;
let server: AppUnderTest;
let checks: OfficialCheckClient;
let processor: ProcessClient;

beforeAll(async () => {
  redis = await startTestRedis();
  raw = new Redis(redis.url);
  server = await startAppUnderTest({ redisUrl: redis.url, config: { pricing: PRICING } });
  checks = createOfficialCheckClient(server.grpcAddress);
  processor = createProcessClient(server.grpcAddress);
});
afterAll(async () => {
  checks?.close();
  processor?.close();
  raw?.disconnect();
  await server?.close();
  await redis?.stop();
});

async function prepaidKey(accountId: string, creditBalance: number): Promise<{ key: string; keyId: string; keyPrefix: string }> {
  expect((await server.admin('POST', '/admin/accounts', { id: accountId, name: accountId, billing: { creditBalance } })).status).toBe(201);
  const created = await server.admin('POST', `/admin/accounts/${accountId}/keys`, { name: 'burst' });
  expect(created.status).toBe(201);
  return { key: created.body.key, keyId: created.body.id, keyPrefix: created.body.prefix };
}

/**
 * A chat request as ext_authz sends it with `with_request_body`: the body
 * names the model and max_tokens, content-length its size. 92 bytes are
 * estimated as 23 input tokens, so with max_tokens 8 the hold is
 * 23 + 8 × 2 = 39, the answer's real cost.
 */
function chatCheck(key: string, requestId: string, maxTokens: number) {
  const body = JSON.stringify({ model: 'gpt-4.1-2025-04-14', max_tokens: maxTokens, messages: [{ role: 'user', content: 'Hi!' }] });
  expect(body.length).toBeLessThanOrEqual(REQUEST_BYTES);
  const padded = body.slice(0, -1) + ' '.repeat(REQUEST_BYTES - body.length) + '}';
  return envoyCheckRequest({
    method: 'POST',
    path: '/v1/chat/completions',
    requestId,
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'content-length': String(padded.length) },
    body: padded,
  });
}

/** The answer to one admitted request, as Envoy's ext_proc filter sends it (observability mode); resolves when the processor ended it. */
function meterAnswer(
  accountId: string,
  ids: { keyId: string; keyPrefix: string },
  requestId: string,
  hold: string | undefined,
  status = '200',
): Promise<grpc.StatusObject> {
  const call = processor.process();
  call.on('data', () => undefined);
  call.on('error', () => undefined);
  const ended = new Promise<grpc.StatusObject>((resolve) => call.on('status', resolve));
  const requestHeaders: [string, string][] = [
    [':authority', 'gateway.example.test'],
    [':path', '/v1/chat/completions'],
    [':method', 'POST'],
    [':scheme', 'http'],
    ['content-type', 'application/json'],
    ['x-request-id', requestId],
    ['x-gateway-account-id', accountId],
    ['x-gateway-key-id', ids.keyId],
    ['x-gateway-key-prefix', ids.keyPrefix],
    ['x-gateway-route-family', 'chat-completions'],
    // What ext_authz held, as its allow set it on the request.
    ...(hold !== undefined ? [['x-gateway-hold', hold] as [string, string]] : []),
  ];
  call.write(observed({ request_headers: { headers: headerMap(requestHeaders), end_of_stream: false } }));
  call.write(
    observed({
      response_headers: {
        headers: headerMap([
          [':status', status],
          ['content-type', 'application/json'],
        ]),
        end_of_stream: false,
      },
    }),
  );
  const body = status === '200' ? Buffer.from(usageFixture('chat-completion.json')) : Buffer.from('{"error":{"message":"overloaded"}}');
  call.write(observed({ response_body: { body, end_of_stream: true } }));
  return ended;
}

async function balanceOf(accountId: string): Promise<number> {
  const answer = await server.admin('GET', `/admin/accounts/${accountId}`);
  expect(answer.status).toBe(200);
  const balance = answer.body.billing.creditBalance;
  if (typeof balance !== 'number') throw new Error(`${accountId} is not prepaid`);
  return balance;
}

/** The hold an allowed Check set on the request (x-gateway-hold), as Envoy forwards it to the usage processor. */
function holdOf(answer: { ok_response?: { headers?: { header: { key: string; value: string } }[] } }): string | undefined {
  return answer.ok_response?.headers?.find((h) => h.header.key === 'x-gateway-hold')?.header.value;
}

/** The minor units the account's sums hold, over all slots (the end of its bucket field). */
async function heldOf(accountId: string): Promise<number> {
  const slots = parsePackedHoldSlots(await raw.hgetBuffer(redisKeys.account(accountId), redisKeys.accountBucketField()));
  return slots ? slots.money.reduce((a, b) => a + b, 0) : 0;
}

/** 20 Checks at once; then the admitted ones' answers metered. Returns how many were admitted and the balance after. */
async function burst(accountId: string, creditBalance: number, maxTokens: number): Promise<{ admitted: number; balance: number }> {
  const ids = await prepaidKey(accountId, creditBalance);
  const requestIds = Array.from({ length: CONCURRENT }, (_, i) => `${accountId}-req-${i}`);
  const answers = await Promise.all(requestIds.map((id) => checks.check(chatCheck(ids.key, id, maxTokens))));
  const admitted = requestIds.filter((_, i) => answers[i]!.status.code === 0);
  for (const [i, answer] of answers.entries()) {
    if (answer.status.code !== 0)
      expect(answer.denied_response.headers.find((h) => h.header.key === 'x-gateway-error-code')?.header.value).toBe('credit_exhausted');
    else expect(admitted).toContain(requestIds[i]);
  }
  await Promise.all(admitted.map((id) => meterAnswer(accountId, ids, id, holdOf(answers[requestIds.indexOf(id)]!))));
  const expected = creditBalance - admitted.length * ANSWER_COST;
  await until(async () => (await balanceOf(accountId)) === expected, `balance ${expected}`);
  // Every hold was released by its answer's metering.
  expect(await heldOf(accountId)).toBe(0);
  return { admitted: admitted.length, balance: await balanceOf(accountId) };
}

describe('20 concurrent requests on credit for one answer', () => {
  it('admits one when its hold is the real cost, and the balance ends at zero', async () => {
    const { admitted, balance } = await burst('burst-exact', ANSWER_COST, 8);
    expect(admitted).toBe(1);
    expect(balance).toBe(0);
  });

  it('admits at most balance / hold when the holds are smaller than the real costs, and the balance falls by no more than their excess', async () => {
    // max_tokens 3: a hold of 23 + 3 × 2 = 29; each answer then costs 39.
    const hold = 29;
    const creditBalance = 60;
    const { admitted, balance } = await burst('burst-under', creditBalance, 3);
    expect(admitted).toBe(Math.floor(creditBalance / hold));
    expect(balance).toBeGreaterThanOrEqual(-admitted * (ANSWER_COST - hold));
    expect(balance).toBe(creditBalance - admitted * ANSWER_COST);
  });

  it('releases the hold of an answer that costs nothing at once: the next request is admitted', async () => {
    const ids = await prepaidKey('burst-failed', ANSWER_COST);
    const allowed = await checks.check(chatCheck(ids.key, 'failed-1', 8));
    expect(allowed.status.code).toBe(0);
    expect(holdOf(allowed)).toMatch(/^[0-9]+ 39 [0-9]+$/);
    expect((await checks.check(chatCheck(ids.key, 'failed-2', 8))).status.code).not.toBe(0);
    await meterAnswer('burst-failed', ids, 'failed-1', holdOf(allowed), '503');
    await until(async () => (await heldOf('burst-failed')) === 0, 'the hold released');
    expect((await checks.check(chatCheck(ids.key, 'failed-3', 8))).status.code).toBe(0);
    expect(await balanceOf('burst-failed')).toBe(ANSWER_COST);
  });
});

describe('an allow that Envoy gave up waiting for', () => {
  it('lets its hold go, and the same request checked again holds anew and has that hold released by its answer', async () => {
    // The store answers within its own deadline (1 s), after the Check's (200 ms): the allow is decided but nobody reads it.
    const patient = await startAppUnderTest({ redisUrl: redis.url, config: { pricing: PRICING }, env: { REDIS_TIMEOUT_MS: '1000' } });
    const client = createOfficialCheckClient(patient.grpcAddress);
    try {
      const ids = await prepaidKey('late-allow', ANSWER_COST);
      expect(await raw.call('CLIENT', 'PAUSE', '500', 'ALL')).toBe('OK');
      await expect(client.check(chatCheck(ids.key, 'late-allow-1', 8), 200)).rejects.toThrow(/DEADLINE_EXCEEDED|Deadline/i);
      // Redis resumed: the script held the whole balance, and the allow nobody read lets it go again.
      await until(async () => {
        const slots = parsePackedHoldSlots(await raw.hgetBuffer(redisKeys.account('late-allow'), redisKeys.accountBucketField()));
        return slots !== undefined && slots.money.every((held) => held === 0);
      }, 'the unread hold let go');
      // Envoy's retry of the same request: admitted on the balance its first Check no longer holds.
      const retried = await client.check(chatCheck(ids.key, 'late-allow-1', 8));
      expect(retried.status.code).toBe(0);
      await meterAnswer('late-allow', ids, 'late-allow-1', holdOf(retried));
      await until(async () => (await balanceOf('late-allow')) === 0, 'the answer charged');
      expect(await heldOf('late-allow')).toBe(0);
    } finally {
      client.close();
      await patient.close();
    }
  });
});
