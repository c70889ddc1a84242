import { hashCustomerKey } from '../../src/keys/customer-key';
import { createOfficialCheckClient, envoyCheckRequest, type OfficialCheckClient } from '../support/envoy-official-client';
import { startTestRedis, type TestRedis } from '../support/redis-server';
import { startAppUnderTest, TEST_ADMIN_TOKEN, type AppUnderTest } from '../support/running-app';
import { registerSecrets } from '../support/secret-scan';
import { startServerProcess, type ServerProcess } from '../support/server-process';
import { parseDenyBody } from '../support/deny-body';

/**
 * Rotation, revocation and expiry through Envoy-shaped Checks on two server
 * processes sharing one Redis: a change made through the admin API holds on
 * the very next request on every replica, with no sleep in between.
 */
let redis: TestRedis;
let admin: AppUnderTest;
let replicas: ServerProcess[] = [];
let clients: OfficialCheckClient[] = [];
const keys: string[] = [];

beforeAll(async () => {
  redis = await startTestRedis();
  admin = await startAppUnderTest({ redisUrl: redis.url, env: { LAST_USED_FLUSH_MS: '200' } });
  const env = { REDIS_URL: redis.url, ADMIN_TOKEN: TEST_ADMIN_TOKEN, LAST_USED_FLUSH_MS: '200' };
  replicas = await Promise.all([startServerProcess(env), startServerProcess(env)]);
  clients = replicas.map((replica) => createOfficialCheckClient(replica.grpcAddress));
  expect((await admin.admin('POST', '/admin/accounts', { id: 'acme', name: 'Acme' })).status).toBe(201);
});
afterAll(async () => {
  clients.forEach((client) => client.close());
  await Promise.all(replicas.map((replica) => replica.stop()));
  await admin?.close();
  await redis?.stop();
});

async function createKey(name: string): Promise<{ key: string; id: string }> {
  const created = await admin.admin('POST', '/admin/accounts/acme/keys', { name });
  expect(created.status).toBe(201);
  keys.push(created.body.key);
  return { key: created.body.key, id: created.body.id };
}

/** The HTTP status each replica answers for this key ('OK' for an allow) and the deny reason, if any. */
async function onEveryReplica(key: string): Promise<string[]> {
  const request = envoyCheckRequest({ path: '/v1/chat/completions', headers: { authorization: `Bearer ${key}` } });
  const responses = await Promise.all(clients.map((client) => client.check(request)));
  return responses.map((r) => (r.status.code === 0 ? 'allow' : String(parseDenyBody(r.denied_response.body).error.code)));
}

it('after an immediate rotate returns, the old key is key_revoked and the new key allowed on both replicas', async () => {
  const old = await createKey('prod backend');
  expect(await onEveryReplica(old.key)).toEqual(['allow', 'allow']); // both replicas have the old key cached
  const rotated = await admin.admin('POST', `/admin/keys/${old.id}/rotate`, {});
  expect(rotated.status).toBe(201);
  keys.push(rotated.body.key);
  expect(await onEveryReplica(old.key)).toEqual(['key_revoked', 'key_revoked']);
  expect(await onEveryReplica(rotated.body.key)).toEqual(['allow', 'allow']);
  expect(rotated.body).toMatchObject({ name: 'prod backend', environment: 'live', accountId: 'acme', replaces: old.id });
  expect(rotated.body.oldKey).toMatchObject({ id: old.id, status: 'revoked', replacedBy: rotated.body.id });
});

it('with graceSeconds both keys work on both replicas; revoking the old one ends the grace at once', async () => {
  const old = await createKey('planned');
  const rotated = await admin.admin('POST', `/admin/keys/${old.id}/rotate`, { graceSeconds: 3600 });
  keys.push(rotated.body.key);
  expect(rotated.body.oldKey).toMatchObject({ status: 'active', revokeAt: expect.any(String) });
  expect(Date.parse(rotated.body.oldKey.revokeAt!) - Date.now()).toBeGreaterThan(3_500_000);
  expect(await onEveryReplica(old.key)).toEqual(['allow', 'allow']);
  expect(await onEveryReplica(rotated.body.key)).toEqual(['allow', 'allow']);
  expect((await admin.admin('POST', `/admin/keys/${old.id}/revoke`)).status).toBe(200);
  expect(await onEveryReplica(old.key)).toEqual(['key_revoked', 'key_revoked']);
});

it('refuses a revoked key and an expired key on both replicas, saying what happened and where to get a new key', async () => {
  const revoked = await createKey('to revoke');
  expect((await admin.admin('POST', `/admin/keys/${revoked.id}/revoke`)).body.status).toBe('revoked');
  expect(await onEveryReplica(revoked.key)).toEqual(['key_revoked', 'key_revoked']);

  const expiring = await createKey('to expire');
  const patched = await admin.admin('PATCH', `/admin/keys/${expiring.id}`, { expiresAt: new Date(Date.now() - 1000).toISOString() });
  expect(patched.body.status).toBe('expired');
  expect(await onEveryReplica(expiring.key)).toEqual(['key_expired', 'key_expired']);
  const response = await clients[0]!.check(
    envoyCheckRequest({ path: '/v1/messages', headers: { 'x-api-key': expiring.key, 'anthropic-version': '2023-06-01' } }),
  );
  const message = parseDenyBody(response.denied_response.body).error.message;
  expect(message).toContain('has expired');
  expect(message).toContain('API Keys');
  expect(message).not.toContain(expiring.key);
});

it('refuses to rotate a revoked key, and a key already rotated, with clear errors', async () => {
  const revoked = await createKey('gone');
  await admin.admin('POST', `/admin/keys/${revoked.id}/revoke`);
  const again = await admin.admin('POST', `/admin/keys/${revoked.id}/rotate`, {});
  expect(again.status).toBe(409);
  expect(again.body.error.code).toBe('key_revoked');

  const graced = await createKey('graced');
  const first = await admin.admin('POST', `/admin/keys/${graced.id}/rotate`, { graceSeconds: 60 });
  keys.push(first.body.key);
  const second = await admin.admin('POST', `/admin/keys/${graced.id}/rotate`, {});
  expect(second.status).toBe(409);
  expect(second.body.error).toMatchObject({ code: 'key_already_rotated' });
  expect(second.body.error.message).toContain(first.body.id);
});

it.each([
  [{ graceSeconds: -1 }, 'graceSeconds'],
  [{ graceSeconds: 604_801 }, 'graceSeconds'],
  [{ graceSeconds: 1.5 }, 'graceSeconds'],
  [{ grace: 10 }, 'grace'],
])('refuses the rotate body %j naming %s', async (body, field) => {
  const key = await createKey('validation');
  const response = await admin.admin('POST', `/admin/keys/${key.id}/rotate`, body);
  expect(response.status).toBe(400);
  expect(response.body.error.field).toBe(field);
  expect(await onEveryReplica(key.key)).toEqual(['allow', 'allow']);
});

it('shows last use in the listing, written off the hot path by the replica that saw the request', async () => {
  const used = await createKey('last used');
  const before = await admin.admin('GET', '/admin/accounts/acme/keys');
  expect(before.body.keys.find((k) => k.id === used.id)!.lastUsedAt).toBeNull();
  await onEveryReplica(used.key);
  let lastUsedAt: string | null = null;
  for (let attempt = 0; attempt < 50 && !lastUsedAt; attempt += 1) {
    await new Promise((resolve) => setTimeout(resolve, 100));
    const listing = await admin.admin('GET', '/admin/accounts/acme/keys');
    lastUsedAt = listing.body.keys.find((k) => k.id === used.id)!.lastUsedAt ?? null;
  }
  expect(lastUsedAt).not.toBeNull();
  expect(Math.abs(Date.parse(lastUsedAt!) - Date.now())).toBeLessThan(10_000);
});

it('lists keys with prefix, name, environment, status, created, last used and expiry, and never a key or hash', async () => {
  const listing = await admin.admin('GET', '/admin/accounts/acme/keys');
  expect(listing.status).toBe(200);
  expect(listing.body.keys.length).toBeGreaterThanOrEqual(keys.length);
  for (const view of listing.body.keys) {
    expect(view).toEqual(
      expect.objectContaining({
        prefix: expect.stringMatching(/^gk_(live|test)_[0-9A-Za-z]{4}$/),
        name: expect.any(String),
        environment: expect.stringMatching(/^(live|test)$/),
        status: expect.stringMatching(/^(active|revoked|expired)$/),
        createdAt: expect.any(String),
      }),
    );
    expect(view).toHaveProperty('lastUsedAt');
    expect(view).toHaveProperty('expiresAt');
  }
  const text = JSON.stringify(listing.body) + JSON.stringify((await admin.admin('GET', '/admin/accounts')).body);
  for (const key of keys) {
    expect(text).not.toContain(key);
    expect(text).not.toContain(hashCustomerKey(key));
  }
});

it('audits every mutation with time, action, target and display prefix, and never a key or hash', async () => {
  const audit = await admin.admin('GET', '/admin/audit?limit=200');
  expect(audit.status).toBe(200);
  const actions = new Set(audit.body.entries.map((entry: { action: string }) => entry.action));
  for (const action of ['account.create', 'key.create', 'key.rotate', 'key.revoke', 'key.update']) expect(actions).toContain(action);
  const rotation = audit.body.entries.find((entry: { action: string }) => entry.action === 'key.rotate');
  expect(rotation).toEqual(
    expect.objectContaining({
      id: expect.any(String),
      time: expect.any(String),
      accountId: 'acme',
      keyId: expect.stringMatching(/^key_/),
      keyPrefix: expect.stringMatching(/^gk_live_/),
    }),
  );
  const text = JSON.stringify(audit.body);
  for (const key of keys) {
    expect(text).not.toContain(key);
    expect(text).not.toContain(hashCustomerKey(key));
  }
  const bad = await admin.admin('GET', '/admin/audit?limit=0');
  expect(bad.status).toBe(400);
  expect(bad.body.error.field).toBe('limit');
  registerSecrets(...keys);
});
