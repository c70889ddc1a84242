import { buildAdminServer } from '../../src/admin/admin-server';
import type { ApiErrorBody, ApiKey, ApiRotatedKey } from '../../src/cli/api-types';
import { ManualClock } from '../../src/platform/clock';
import { RedisStore } from '../../src/store/redis/redis-store';
import { LogCapture } from '../support/log-capture';
import { startTestRedis, type TestRedis } from '../support/redis-server';
import { registerSecrets } from '../support/secret-scan';
import { startAppUnderTest, TEST_ADMIN_TOKEN, type AppUnderTest } from '../support/running-app';

/**
 * Issue 13, defects 1 and 10 on a real Redis: what a rotated key inherits
 * (including its expiry), and that the grace end, the revocation time and the
 * expiry check of a rotation come from Redis's clock, not from the clock of
 * the replica that serves the admin call.
 */
let redis: TestRedis;
let app: AppUnderTest;

beforeAll(async () => {
  redis = await startTestRedis();
  app = await startAppUnderTest({ redisUrl: redis.url });
  expect((await app.admin('POST', '/admin/accounts', { id: 'acme', name: 'Acme' })).status).toBe(201);
});
afterAll(async () => {
  await app?.close();
  await redis?.stop();
});

it('a rotated key keeps the expiry, limits, name and environment of the key it replaces; PATCH can change the expiry after', async () => {
  const expiresAt = new Date(Date.now() + 86_400_000).toISOString();
  const created = await app.admin('POST', '/admin/accounts/acme/keys', {
    name: 'contractor',
    environment: 'test',
    expiresAt,
    limits: [{ limit: 5, window: '1m' }],
  });
  expect(created.status).toBe(201);
  const rotated = await app.admin('POST', `/admin/keys/${created.body.id}/rotate`, { graceSeconds: 60 });
  expect(rotated.status).toBe(201);
  const successor = await app.admin('GET', `/admin/keys/${rotated.body.id}`);
  expect(successor.body).toMatchObject({
    accountId: 'acme',
    name: 'contractor',
    environment: 'test',
    expiresAt,
    limits: [{ limit: 5, window: '1m' }],
    replaces: created.body.id,
    status: 'active',
  });
  const extended = await app.admin('PATCH', `/admin/keys/${rotated.body.id}`, { expiresAt: null });
  expect(extended.body.expiresAt).toBeNull();
});

describe('with the admin replica clock 25 years behind Redis', () => {
  const skewed = new ManualClock(Date.parse('2001-01-01T00:00:00Z'));
  let store: RedisStore;
  let admin: ReturnType<typeof buildAdminServer>;
  const call = async (method: 'GET' | 'POST', url: string, payload?: object) => {
    const response = await admin.inject({
      method,
      url,
      headers: { authorization: `Bearer ${TEST_ADMIN_TOKEN}` },
      ...(payload ? { payload } : {}),
    });
    const body = response.json<ApiErrorBody & ApiRotatedKey & ApiKey>();
    if (typeof body.key === 'string') registerSecrets(body.key); // joins the suite-wide secret scan
    return { status: response.statusCode, body };
  };
  beforeAll(async () => {
    store = await RedisStore.connect({ url: redis.url, commandTimeoutMs: 1000 });
    admin = buildAdminServer({ store, clock: skewed, logger: new LogCapture().logger, adminToken: TEST_ADMIN_TOKEN });
    await admin.ready();
  });
  afterAll(async () => {
    await admin?.close();
    await store?.close();
  });

  it("computes the grace end and the revocation time from Redis's clock", async () => {
    const graced = await call('POST', '/admin/accounts/acme/keys', { name: 'graced' });
    const before = Date.now();
    const rotated = await call('POST', `/admin/keys/${graced.body.id}/rotate`, { graceSeconds: 3600 });
    const after = Date.now();
    expect(rotated.status).toBe(201);
    const revokeAt = Date.parse(rotated.body.oldKey.revokeAt!);
    expect(revokeAt).toBeGreaterThanOrEqual(before + 3_600_000 - 1000);
    expect(revokeAt).toBeLessThanOrEqual(after + 3_600_000 + 1000);

    const immediate = await call('POST', '/admin/accounts/acme/keys', { name: 'immediate' });
    const start = Date.now();
    const revoked = await call('POST', `/admin/keys/${immediate.body.id}/rotate`, {});
    const revokedAt = Date.parse((await call('GET', `/admin/keys/${immediate.body.id}`)).body.revokedAt!);
    expect(revoked.body.oldKey.status).toBe('revoked');
    expect(revokedAt).toBeGreaterThanOrEqual(start - 1000);
    expect(revokedAt).toBeLessThanOrEqual(Date.now() + 1000);
  });

  it("refuses to rotate a key that has expired by Redis's clock, though not by the replica's", async () => {
    const expired = await call('POST', '/admin/accounts/acme/keys', { name: 'expired', expiresAt: '2020-01-01T00:00:00Z' });
    expect(expired.status).toBe(201);
    const refused = await call('POST', `/admin/keys/${expired.body.id}/rotate`, { graceSeconds: 60 });
    expect(refused.status).toBe(409);
    expect(refused.body.error.code).toBe('key_expired');
  });
});
