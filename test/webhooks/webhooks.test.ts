import Redis from 'ioredis';
import { startTestRedis, type TestRedis } from '../support/redis-server';
import { startAppUnderTest, type AppUnderTest } from '../support/running-app';
import { WebhookReceiver } from '../support/webhook-receiver';
import { until } from '../support/waiting';
import type { ResolveHost } from '../../src/webhooks/endpoint-targets';
import { messagesUsageRecord } from '../support/usage-records';
import { NO_TOKEN_BUDGETS } from '../../src/accounts/limits/token-budgets';
import { redisKeys } from '../../src/store/redis/redis-keys';

/**
 * Account webhooks end to end (issue 39 §2): the service on a real Redis
 * sends to a real receiver on a loopback port, which verifies every
 * signature with the official `standardwebhooks` library. Retries and
 * timeouts are short here; the schedule itself is the settings'.
 */
let redis: TestRedis;
let server: AppUnderTest;
let receiver: WebhookReceiver;
/** The test's own look at Redis, beside the service's. */
let inspect: Redis;

/** Names the tests resolve, instead of real DNS: each may be made to resolve elsewhere later (DNS rebinding). */
const names = new Map<string, string[]>();
const resolveWebhookHost: ResolveHost = async (hostname) => {
  const addresses = names.get(hostname);
  if (!addresses) throw Object.assign(new Error(`no such host ${hostname}`), { code: 'ENOTFOUND' });
  return addresses.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));
};

const RESPONSE_TIMEOUT_MS = 400;
const DISABLE_AFTER_FAILURES = 4;

beforeAll(async () => {
  redis = await startTestRedis();
  inspect = new Redis(redis.url);
  receiver = await WebhookReceiver.start();
  server = await startAppUnderTest({
    redisUrl: redis.url,
    resolveWebhookHost,
    // Not the default currency: the settings' money text must follow the operator's.
    config: { currency: { code: 'EUR', exponent: 4 } },
    env: {
      WEBHOOK_LOOPBACK_HTTP: 'true',
      WEBHOOK_POLL_INTERVAL_MS: '20',
      WEBHOOK_RETRY_BASE_MS: '50',
      WEBHOOK_RETRY_MAX_DELAY_MS: '200',
      WEBHOOK_MAX_ATTEMPTS: '6',
      WEBHOOK_CONNECT_TIMEOUT_MS: String(RESPONSE_TIMEOUT_MS),
      WEBHOOK_RESPONSE_TIMEOUT_MS: String(RESPONSE_TIMEOUT_MS),
      WEBHOOK_DISABLE_AFTER_FAILURES: String(DISABLE_AFTER_FAILURES),
    },
  });
});
afterAll(async () => {
  inspect?.disconnect();
  await server?.close();
  await receiver?.stop();
  await redis?.stop();
});

interface EndpointAnswer {
  id: string;
  secret: string;
  enabled: boolean;
  disabledReason?: string;
  error?: { code: string; message: string; field?: string };
}
const call = async (method: string, path: string, body?: object) => {
  const response = await server.admin(method, path, body);
  return { status: response.status, body: response.body as unknown as EndpointAnswer & Record<string, unknown> };
};
let serial = 0;
const newAccount = async (extra: object = {}) => {
  const id = `hooks-${(serial += 1)}`;
  expect((await server.admin('POST', '/admin/accounts', { id, name: `Account ${id}`, ...extra })).status).toBe(201);
  return id;
};
const newEndpoint = async (accountId: string, url: string, events: string[]) => {
  const created = await call('POST', `/admin/accounts/${accountId}/webhooks`, { url, events });
  expect(created.status).toBe(201);
  expect(created.body.secret).toMatch(/^whsec_[A-Za-z0-9+/]+=*$/);
  return created.body;
};
/** Nothing of the account's left to send: its outbox fanned out and every delivery settled. */
const untilAccountSent = (accountId: string) =>
  until(
    async () =>
      (await inspect.xlen(redisKeys.webhookOutbox(accountId))) === 0 && (await inspect.zcard(redisKeys.webhookDue(accountId))) === 0,
    `every event of ${accountId} sent`,
  );
const ALL_EVENTS = ['key.created', 'key.rotated', 'key.revoked', 'key.exposed', 'member.added', 'member.removed', 'endpoint.disabled'];

describe('delivery', () => {
  it('sends every key and member event, signed so that standardwebhooks verifies it, to the subscribed endpoint only', async () => {
    const accountId = await newAccount();
    const endpoint = await newEndpoint(accountId, receiver.url('/all'), ALL_EVENTS);
    const keysOnly = await newEndpoint(accountId, receiver.url('/keys-only'), ['key.created']);
    // The secret is shown once: never in a listing.
    const listing = await call('GET', `/admin/accounts/${accountId}/webhooks`);
    expect(JSON.stringify(listing.body)).not.toContain(endpoint.secret);

    const key = (await server.admin('POST', `/admin/accounts/${accountId}/keys`, { name: 'ci' })).body;
    const rotated = (await server.admin('POST', `/admin/keys/${key.id}/rotate`, { graceSeconds: 60 })).body;
    expect((await server.admin('POST', `/admin/keys/${rotated.id}/revoke`)).status).toBe(200);
    // Revoking again changes nothing, and sends nothing.
    expect((await server.admin('POST', `/admin/keys/${rotated.id}/revoke`)).status).toBe(200);
    const member = await server.admin('POST', `/admin/accounts/${accountId}/members`, { role: 'viewer', email: 'dev@example.com' });
    expect((await server.admin('DELETE', `/admin/accounts/${accountId}/members/${member.body.id}`)).status).toBe(200);

    await until(() => receiver.on('/all').length >= 5, 'five events at /all');
    // Delivery is at least once and in no promised order (docs/concepts/webhooks.md): read by type.
    const verified = receiver.on('/all').map((request) => WebhookReceiver.verified(request, endpoint.secret));
    const order = ['key.created', 'key.rotated', 'key.revoked', 'member.added', 'member.removed'];
    const events = [...verified].sort((a, b) => order.indexOf(a.type) - order.indexOf(b.type));
    expect(events.map((event) => event.type)).toEqual(order);
    expect(events[0]!.data).toMatchObject({ account_id: accountId, key: { id: key.id, prefix: key.prefix }, actor: { kind: 'operator' } });
    expect(events[1]!.data).toMatchObject({ key: { id: key.id }, new_key: { id: rotated.id }, grace_seconds: 60 });
    expect(events[2]!.data).toMatchObject({ key: { id: rotated.id, status: 'revoked' } });
    expect(events[3]!.data).toMatchObject({ member: { id: member.body.id, role: 'viewer', invited_email: 'dev@example.com' } });
    // Ids unique per event; no key itself in any body.
    expect(new Set(receiver.on('/all').map((request) => request.headers['webhook-id'])).size).toBe(5);
    for (const request of receiver.on('/all')) {
      expect(request.body).not.toContain(key.key);
      expect(request.body).not.toContain(rotated.key);
    }
    // Signed with the other endpoint's secret, the body does not verify with this one's.
    await until(() => receiver.on('/keys-only').length >= 1, 'the key.created event at /keys-only');
    expect(() => WebhookReceiver.verified(receiver.on('/keys-only')[0]!, endpoint.secret)).toThrow();
    expect(WebhookReceiver.verified(receiver.on('/keys-only')[0]!, keysOnly.secret).type).toBe('key.created');
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(receiver.on('/keys-only')).toHaveLength(1);

    const log = await call('GET', `/admin/accounts/${accountId}/webhooks/${endpoint.id}/deliveries`);
    expect((log.body['deliveries'] as { outcome: string; status: number }[]).map((d) => [d.outcome, d.status])).toEqual(
      Array(5).fill(['delivered', 200]),
    );
  });

  it('retries after a 500 and after a timeout, with the same id, until the receiver answers 2xx; the log shows each attempt', async () => {
    const accountId = await newAccount();
    const endpoint = await newEndpoint(accountId, receiver.url('/flaky'), ['key.created']);
    receiver.answerNext(500, 'hang');
    await server.admin('POST', `/admin/accounts/${accountId}/keys`, { name: 'retried' });
    await until(() => receiver.on('/flaky').length >= 3, 'three attempts at /flaky', 10_000);
    const attempts = receiver.on('/flaky');
    expect(attempts.map((request) => request.answer)).toEqual([500, 'hang', 200]);
    expect(new Set(attempts.map((request) => request.headers['webhook-id'])).size).toBe(1);
    for (const attempt of attempts) expect(WebhookReceiver.verified(attempt, endpoint.secret).type).toBe('key.created');

    await until(
      async () =>
        ((await call('GET', `/admin/accounts/${accountId}/webhooks/${endpoint.id}/deliveries`)).body['deliveries'] as unknown[]).length ===
        3,
      'three log entries',
    );
    const log = (await call('GET', `/admin/accounts/${accountId}/webhooks/${endpoint.id}/deliveries`)).body['deliveries'] as {
      attempt: number;
      outcome: string;
      status?: number;
      error?: string;
      nextAttemptAt?: string;
    }[];
    expect(log.map((entry) => [entry.attempt, entry.outcome, entry.status])).toEqual([
      [3, 'delivered', 200],
      [2, 'failed', undefined],
      [1, 'failed', 500],
    ]);
    expect(log[1]!.error).toContain(`no answer within ${RESPONSE_TIMEOUT_MS} ms`);
    expect(log[2]!.nextAttemptAt).toEqual(expect.any(String));
    // Two failures, then a success: still enabled, its failure count reset.
    expect((await call('GET', `/admin/accounts/${accountId}/webhooks`)).body['endpoints']).toMatchObject([
      { enabled: true, consecutiveFailures: 0 },
    ]);
  });

  it('disables an endpoint after failures in a row, and tells the account through its other endpoints', async () => {
    const accountId = await newAccount();
    const failing = await newEndpoint(accountId, receiver.url('/down'), ['key.created']);
    const watcher = await newEndpoint(accountId, receiver.url('/watcher'), ['endpoint.disabled']);
    receiver.answerNext(...Array<number>(DISABLE_AFTER_FAILURES).fill(503));
    await server.admin('POST', `/admin/accounts/${accountId}/keys`, { name: 'never delivered' });
    await until(() => receiver.on('/watcher').length >= 1, 'the endpoint.disabled event', 10_000);
    const notice = WebhookReceiver.verified(receiver.on('/watcher')[0]!, watcher.secret);
    expect(notice).toMatchObject({
      type: 'endpoint.disabled',
      data: { account_id: accountId, endpoint: { id: failing.id, url: receiver.url('/down') } },
    });
    expect(receiver.on('/down')).toHaveLength(DISABLE_AFTER_FAILURES);
    const state = (await call('GET', `/admin/accounts/${accountId}/webhooks`)).body['endpoints'] as EndpointAnswer[];
    expect(state.find((e) => e.id === failing.id)).toMatchObject({ enabled: false, disabledReason: expect.stringContaining('503') });
    // A test-send to a disabled endpoint is refused; enabled again, it is sent.
    expect((await call('POST', `/admin/accounts/${accountId}/webhooks/${failing.id}/test`)).status).toBe(409);
    expect((await call('PATCH', `/admin/accounts/${accountId}/webhooks/${failing.id}`, { enabled: true })).body).toMatchObject({
      enabled: true,
    });
    expect((await call('POST', `/admin/accounts/${accountId}/webhooks/${failing.id}/test`)).status).toBe(202);
    await until(() => receiver.on('/down').length > DISABLE_AFTER_FAILURES, 'the test event at /down');
    expect(WebhookReceiver.verified(receiver.on('/down').at(-1)!, failing.secret).type).toBe('webhook.test');
  });

  it('signs with the new secret once it is rotated', async () => {
    const accountId = await newAccount();
    const endpoint = await newEndpoint(accountId, receiver.url('/rotated'), ['key.created']);
    const rotated = await call('POST', `/admin/accounts/${accountId}/webhooks/${endpoint.id}/rotate-secret`);
    expect(rotated.body.secret).not.toBe(endpoint.secret);
    await call('POST', `/admin/accounts/${accountId}/webhooks/${endpoint.id}/test`);
    await until(() => receiver.on('/rotated').length >= 1, 'the test event');
    expect(WebhookReceiver.verified(receiver.on('/rotated')[0]!, rotated.body.secret).type).toBe('webhook.test');
    expect(() => WebhookReceiver.verified(receiver.on('/rotated')[0]!, endpoint.secret)).toThrow();
  });
});

describe('credit events', () => {
  it('sends credit.low and credit.exhausted as usage takes a prepaid balance past the threshold and to zero', async () => {
    const accountId = await newAccount({ billing: { creditBalance: 1000 } });
    const endpoint = await newEndpoint(accountId, receiver.url(`/credit-${accountId}`), ['credit.low', 'credit.exhausted']);
    const settings = { creditLowThreshold: 500, creditLowThresholdFormatted: '€0.05', currency: { code: 'EUR', exponent: 4 } };
    expect(await call('PUT', `/admin/accounts/${accountId}/webhooks/settings`, { creditLowThreshold: 500 })).toEqual({
      status: 200,
      body: settings,
    });
    expect(await call('GET', `/admin/accounts/${accountId}/webhooks/settings`)).toEqual({ status: 200, body: settings });
    const usage = (requestId: string, costMinorUnits: number) =>
      messagesUsageRecord({ requestId, accountId, keyId: 'key_metered', costMinorUnits, atMs: Date.now() });
    // As the usage recorder applies metered answers.
    await server.app.store.applyUsage(usage('credit-1', 600), NO_TOKEN_BUDGETS);
    await server.app.store.applyUsage(usage('credit-2', 600), NO_TOKEN_BUDGETS);
    await until(() => receiver.on(`/credit-${accountId}`).length >= 2, 'two credit events');
    const events = receiver.on(`/credit-${accountId}`).map((request) => WebhookReceiver.verified(request, endpoint.secret));
    expect(events.map((event) => [event.type, event.data['credit_balance']]).sort()).toEqual([
      ['credit.exhausted', -200],
      ['credit.low', 400],
    ]);
  });
});

describe('an account without endpoints', () => {
  it('keeps no outbox: key changes and credit crossings append nothing; an endpoint added later gets only what follows', async () => {
    const accountId = await newAccount({ billing: { creditBalance: 1000 } });
    expect((await call('PUT', `/admin/accounts/${accountId}/webhooks/settings`, { creditLowThreshold: 500 })).status).toBe(200);
    const key = (await server.admin('POST', `/admin/accounts/${accountId}/keys`, { name: 'unheard' })).body;
    expect((await server.admin('POST', `/admin/keys/${key.id}/revoke`)).status).toBe(200);
    // 1000 → -200: below the threshold, and exhausted
    const usage = messagesUsageRecord({
      requestId: 'unheard-1',
      accountId,
      keyId: key.id,
      keyPrefix: key.prefix,
      costMinorUnits: 1200,
      atMs: Date.now(),
    });
    expect(await server.app.store.applyUsage(usage, NO_TOKEN_BUDGETS)).toMatchObject({ kind: 'applied' });
    expect(await inspect.exists(redisKeys.webhookOutbox(accountId))).toBe(0);
    expect(await inspect.sismember(redisKeys.webhookAccounts(), accountId)).toBe(0);

    const endpoint = await newEndpoint(accountId, receiver.url(`/later-${accountId}`), ['key.created', 'key.revoked', 'credit.low']);
    const heard = (await server.admin('POST', `/admin/accounts/${accountId}/keys`, { name: 'heard' })).body;
    await until(() => receiver.on(`/later-${accountId}`).length >= 1, 'the key.created event');
    await untilAccountSent(accountId);
    const events = receiver.on(`/later-${accountId}`).map((request) => WebhookReceiver.verified(request, endpoint.secret));
    expect(events.map((event) => [event.type, (event.data['key'] as { id: string }).id])).toEqual([['key.created', heard.id]]);
  });
});

describe('budget events', () => {
  it("sends one budget.reached, verified, when a metered record exhausts a key's token budget, and none for the record after it", async () => {
    const accountId = await newAccount();
    const endpoint = await newEndpoint(accountId, receiver.url(`/budget-${accountId}`), ['budget.reached']);
    const created = await server.admin('POST', `/admin/accounts/${accountId}/keys`, {
      name: 'budgeted',
      tokenBudgets: [{ tokens: 1000, window: '1h' }],
    });
    expect(created.status).toBe(201);
    const key = created.body;
    const usage = (requestId: string, inputTokens: number) =>
      messagesUsageRecord({ requestId, accountId, keyId: key.id, keyPrefix: key.prefix, inputTokens, outputTokens: 0, atMs: Date.now() });
    // As the usage recorder applies metered answers: 600 of 1000, then 500 more (exhausted), then 50 more (still).
    await server.app.store.applyUsage(usage('tokens-1', 600), NO_TOKEN_BUDGETS);
    await server.app.store.applyUsage(usage('tokens-2', 500), NO_TOKEN_BUDGETS);
    await until(() => receiver.on(`/budget-${accountId}`).length >= 1, 'the budget.reached event');
    await server.app.store.applyUsage(usage('tokens-3', 50), NO_TOKEN_BUDGETS);
    // A key.created appended after the third record, to the same endpoint.
    await call('PATCH', `/admin/accounts/${accountId}/webhooks/${endpoint.id}`, { events: ['budget.reached', 'key.created'] });
    await server.admin('POST', `/admin/accounts/${accountId}/keys`, { name: 'marker' });
    await until(() => receiver.on(`/budget-${accountId}`).length >= 2, 'the key.created marker');
    // Appended after the third record's step: once it is sent, with nothing left, anything that step appended was sent too.
    await untilAccountSent(accountId);
    const events = receiver.on(`/budget-${accountId}`).map((request) => WebhookReceiver.verified(request, endpoint.secret));
    expect(events.map((event) => event.type)).toEqual(['budget.reached', 'key.created']);
    expect(events[0]!.data).toEqual({
      account_id: accountId,
      budget: 'token_budget',
      scope: 'key',
      key_id: key.id,
      key_prefix: key.prefix,
      tokens: 1000,
      window_seconds: 3600,
    });
    for (const request of receiver.on(`/budget-${accountId}`)) expect(request.body).not.toContain(key.key);
  });
});

describe('where endpoints may point (SSRF)', () => {
  it.each([
    ['a private address', 'https://10.0.0.5/hook', 'private'],
    ['the cloud metadata address', 'http://169.254.169.254/latest/meta-data', 'https'],
    ['the cloud metadata address over https', 'https://169.254.169.254/latest/meta-data', 'metadata'],
    ['the IPv6 metadata address', 'https://[fd00:ec2::254]/', 'metadata'],
    ['a link-local address', 'https://169.254.10.1/', 'private'],
    ['plain http to a public host', 'http://hooks.example.com/', 'https'],
  ])('refuses %s when the endpoint is saved', async (_name, url, words) => {
    const accountId = await newAccount();
    const refused = await call('POST', `/admin/accounts/${accountId}/webhooks`, { url, events: ['key.created'] });
    expect(refused.status).toBe(400);
    expect(refused.body.error).toMatchObject({ code: 'invalid_field', field: 'url', message: expect.stringContaining(words) });
  });

  it('refuses a name that resolves to a private or metadata address when the endpoint is saved', async () => {
    names.set('inside.example.com', ['93.184.216.34', '192.168.1.20']);
    names.set('metadata.example.com', ['169.254.169.254']);
    const accountId = await newAccount();
    for (const host of ['inside.example.com', 'metadata.example.com']) {
      const refused = await call('POST', `/admin/accounts/${accountId}/webhooks`, { url: `https://${host}/hook`, events: ['key.created'] });
      expect(refused.status).toBe(400);
      expect(refused.body.error?.message).toContain(`${host} resolves to`);
    }
  });

  it('checks the resolved address again on every delivery: a name rebound to a private address is not sent to', async () => {
    names.set('rebinding.example.com', ['93.184.216.34']);
    const accountId = await newAccount();
    const endpoint = await newEndpoint(accountId, 'https://rebinding.example.com/hook', ['key.created']);
    names.set('rebinding.example.com', ['10.1.2.3']);
    await server.admin('POST', `/admin/accounts/${accountId}/keys`, { name: 'rebound' });
    const deliveries = async () =>
      (await call('GET', `/admin/accounts/${accountId}/webhooks/${endpoint.id}/deliveries`)).body['deliveries'] as {
        outcome: string;
        error: string;
      }[];
    await until(async () => (await deliveries()).length >= 1, 'an attempt in the log');
    expect((await deliveries())[0]).toMatchObject({
      outcome: 'failed',
      error: 'refused: rebinding.example.com resolves to a private, link-local or reserved address',
    });
  });
});
