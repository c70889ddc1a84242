import { generateCustomerKey } from '../../src/keys/customer-key';
import { RedisStore } from '../../src/store/redis/redis-store';
import { NO_TOKEN_BUDGETS } from '../../src/accounts/limits/token-budgets';
import type { UsageRecord } from '../../src/metering/usage-record';
import { loadCheckRequestFixtures, makeFixtureSecrets, materialize, type FixtureSecrets } from '../support/check-request-fixtures';
import { createOfficialCheckClient, envoyCheckRequest, type OfficialCheckClient } from '../support/envoy-official-client';
import { insertKey } from '../support/pipeline-fixture-world';
import { startTestRedisCluster, type TestRedisCluster } from '../support/redis-cluster';
import { startAppUnderTest, TEST_ADMIN_TOKEN, type AppUnderTest } from '../support/running-app';
import { registerSecrets } from '../support/secret-scan';
import { startServerProcess, type ServerProcess } from '../support/server-process';
import { parseDenyBody } from '../support/deny-body';

/**
 * The acceptance checks of the core, billing and lifecycle issues, on a real
 * three-master Redis Cluster, with two server processes sharing it.
 */
const HTTP_STATUS_NAMES: Record<number, string> = {
  400: 'BadRequest',
  401: 'Unauthorized',
  402: 'PaymentRequired',
  404: 'NotFound',
  429: 'TooManyRequests',
};

let cluster: TestRedisCluster;
let admin: AppUnderTest;
let replicas: ServerProcess[] = [];
let clients: OfficialCheckClient[] = [];

beforeAll(async () => {
  cluster = await startTestRedisCluster();
  // The 500-Check burst is about exactness, not shedding: room for all 250 per replica whatever the default bound.
  const env = { REDIS_CLUSTER_NODES: cluster.nodes, REDIS_TIMEOUT_MS: '1000', MAX_CHECKS_IN_FLIGHT: '1000' };
  admin = await startAppUnderTest({ env });
  expect(admin.app.store.description).toContain('Redis Cluster');
  replicas = await Promise.all([
    startServerProcess({ ...env, ADMIN_TOKEN: TEST_ADMIN_TOKEN }),
    startServerProcess({ ...env, ADMIN_TOKEN: TEST_ADMIN_TOKEN }),
  ]);
  clients = replicas.map((replica) => createOfficialCheckClient(replica.grpcAddress));
});
afterAll(async () => {
  clients.forEach((client) => client.close());
  await Promise.all(replicas.map((replica) => replica.stop()));
  await admin?.close();
  await cluster?.stop();
});

async function newKey(accountId: string, accountPatch?: object) {
  if ((await admin.admin('GET', `/admin/accounts/${accountId}`)).status === 404) {
    expect((await admin.admin('POST', '/admin/accounts', { id: accountId, name: accountId })).status).toBe(201);
  }
  if (accountPatch) expect((await admin.admin('PATCH', `/admin/accounts/${accountId}`, accountPatch)).status).toBe(200);
  const created = await admin.admin('POST', `/admin/accounts/${accountId}/keys`, { name: 'cluster' });
  expect(created.status).toBe(201);
  return { key: created.body.key, id: created.body.id };
}
const chat = (key: string) => envoyCheckRequest({ path: '/v1/chat/completions', headers: { authorization: `Bearer ${key}` } });
const onBoth = async (key: string) =>
  (await Promise.all(clients.map((c) => c.check(chat(key))))).map((r) =>
    r.status.code === 0 ? 'allow' : parseDenyBody(r.denied_response.body).error.code,
  );

describe('core: every Envoy fixture decides as on one Redis', () => {
  let secrets: FixtureSecrets;
  beforeAll(async () => {
    const live = await newKey('acct_fixture');
    const other = await newKey('acct_fixture');
    const revoked = generateCustomerKey('live');
    const nodes = cluster.nodes.split(',').map((n) => ({ host: n.split(':')[0]!, port: Number(n.split(':')[1]) }));
    const store = await RedisStore.connect({ topology: { mode: 'cluster', nodes }, commandTimeoutMs: 1000 });
    await insertKey(store, revoked, { status: 'revoked' });
    await store.close();
    secrets = makeFixtureSecrets({ live: live.key, otherLive: other.key, revoked });
  });

  it.each(loadCheckRequestFixtures().map((f) => [f.name, f] as const))('%s', async (_name, fixture) => {
    const response = await clients[0]!.check(materialize(fixture.check_request, secrets));
    if (fixture.expect.result === 'allow') {
      expect(response.status.code).toBe(0);
      return;
    }
    expect(response.denied_response.status.code).toBe(HTTP_STATUS_NAMES[fixture.expect.http_status]);
    expect(
      response.denied_response.headers.find((h: { header: { key: string } }) => h.header.key === 'x-gateway-error-code')!.header.value,
    ).toBe(fixture.expect.reason);
  });
});

describe('billing', () => {
  it('402 for a suspended account and for a prepaid account at zero; a top-up allows the next request', async () => {
    const suspended = await newKey('cl-suspended', { billing: { status: 'suspended' } });
    expect(await onBoth(suspended.key)).toEqual(['account_suspended', 'account_suspended']);
    const prepaid = await newKey('cl-prepaid', { billing: { creditBalance: 0 } });
    expect(await onBoth(prepaid.key)).toEqual(['credit_exhausted', 'credit_exhausted']);
    expect((await admin.admin('POST', '/admin/accounts/cl-prepaid/credit', { amount: 100 })).status).toBe(200);
    expect(await onBoth(prepaid.key)).toEqual(['allow', 'allow']);
  });
});

describe('credit holds', () => {
  it('a hold is summed in the account hash, refuses what the balance cannot cover, and its usage record releases it, on the cluster', async () => {
    const nodes = cluster.nodes.split(',').map((n) => ({ host: n.split(':')[0]!, port: Number(n.split(':')[1]) }));
    const store = await RedisStore.connect({ topology: { mode: 'cluster', nodes }, commandTimeoutMs: 1000 });
    try {
      const { id: keyId } = await newKey('cl-holds', { billing: { creditBalance: 100 } });
      const ids = { accountId: 'cl-holds', keyId };
      const authorize = (requestId: string, minorUnits: number) =>
        store.authorize({
          ...ids,
          defaultPlan: { key: [], account: [] },
          defaultTokenBudgets: NO_TOKEN_BUDGETS,
          hold: { requestId, minorUnits, tokens: 0 },
        });
      const first = await authorize('cl-a', 60);
      expect(first.kind === 'allow' && first.held).toEqual(expect.objectContaining({ minorUnits: 60, tokens: 0 }));
      expect((await authorize('cl-b', 60)).kind).toBe('credit_exhausted');
      const record: UsageRecord = {
        requestId: 'cl-a',
        ...ids,
        keyPrefix: 'gk_live_AbC4',
        family: 'chat-completions',
        style: 'chat',
        tokens: { inputTokens: 10, outputTokens: 10, cachedInputTokens: 0, cacheCreationTokens: 0 },
        costMinorUnits: 30,
        estimated: false,
        atMs: Date.now(),
        ...(first.kind === 'allow' && first.held ? { hold: first.held } : {}),
      };
      expect((await store.applyUsage(record, NO_TOKEN_BUDGETS)).kind).toBe('applied');
      // 70 left and nothing held: a hold of 70 passes, one more unit does not.
      expect((await authorize('cl-c', 70)).kind).toBe('allow');
      expect((await authorize('cl-d', 1)).kind).toBe('credit_exhausted');
    } finally {
      await store.close();
    }
  });
});

describe('rate limits', () => {
  it('500 concurrent requests over two replicas on a key limited to 100 per minute: exactly 100 allowed', async () => {
    const { key, id } = await newKey('cl-burst');
    registerSecrets(key);
    expect((await admin.admin('PATCH', `/admin/keys/${id}`, { limits: [{ limit: 100, window: '1m' }] })).status).toBe(200);
    const started = Date.now();
    const responses = await Promise.all(Array.from({ length: 500 }, (_, i) => clients[i % 2]!.check(chat(key), 10_000)));
    const elapsedMs = Date.now() - started;
    const allowed = responses.filter((r) => r.status.code === 0).length;
    expect(allowed).toBeGreaterThanOrEqual(100);
    expect(allowed).toBeLessThanOrEqual(100 + Math.floor(elapsedMs / 600));
    for (const r of responses.filter((r) => r.status.code !== 0)) expect(r.denied_response.status.code).toBe('TooManyRequests');
  });
});

describe('lifecycle', () => {
  it('after rotate returns, the old key is refused and the new one allowed on both replicas; grace keeps both', async () => {
    const old = await newKey('cl-rotate');
    expect(await onBoth(old.key)).toEqual(['allow', 'allow']);
    const rotated = await admin.admin('POST', `/admin/keys/${old.id}/rotate`, {});
    registerSecrets(rotated.body.key);
    expect(await onBoth(old.key)).toEqual(['key_revoked', 'key_revoked']);
    expect(await onBoth(rotated.body.key)).toEqual(['allow', 'allow']);

    const planned = await newKey('cl-rotate');
    const graced = await admin.admin('POST', `/admin/keys/${planned.id}/rotate`, { graceSeconds: 600 });
    registerSecrets(graced.body.key);
    expect(await onBoth(planned.key)).toEqual(['allow', 'allow']);
    expect(await onBoth(graced.body.key)).toEqual(['allow', 'allow']);
    const listing = await admin.admin('GET', '/admin/accounts/cl-rotate/keys');
    expect(listing.body.keys).toHaveLength(4);
  });
});
