import { createHash } from 'node:crypto';
import * as net from 'node:net';
import Redis from 'ioredis';
import { redisKeys } from '../../src/store/redis/redis-keys';
import { REDIS_SCRIPTS } from '../../src/store/redis/scripts';
import { createOfficialCheckClient, decisionFor, type OfficialCheckClient } from '../support/envoy-official-client';
import { startTestRedis, type TestRedis } from '../support/redis-server';
import { keyIdsOf, startAppUnderTest, type AppUnderTest } from '../support/running-app';

/**
 * Issue 13, defect 3, the last gap: Redis runs the rotate (or insert) script,
 * but its reply never reaches the service. A TCP proxy between the service
 * and a real redis-server forwards everything; when armed, it lets the
 * script's command through, waits for Redis's reply (so the script has run),
 * drops that reply and cuts the service's connection, exactly what a
 * connection lost after Redis applied the command looks like to ioredis.
 */
class LostReplyProxy {
  private readonly server = net.createServer((client) => this.accept(client));
  private readonly open = new Set<net.Socket>();
  private armed: { markers: string[]; lose: 'reply' | 'request'; thenDown: boolean } | undefined;
  private down = false;
  /** Calls of the armed script whose reply (or request) was lost since it was armed. */
  lost = 0;

  constructor(private readonly redisPort: number) {}

  async listen(): Promise<string> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    return `redis://127.0.0.1:${(this.server.address() as net.AddressInfo).port}`;
  }

  /**
   * Loses the next call of this script, recognised as EVALSHA (by its SHA-1)
   * or EVAL (by its text; ioredis sends EVAL once per new socket): 'reply'
   * lets Redis run it and drops the answer, 'request' never sends it. Then
   * the service's connections are cut; with thenDown, Redis stays
   * unreachable until up().
   */
  lose(lua: string, options: { lose: 'reply' | 'request'; thenDown: boolean }): void {
    const sha = createHash('sha1').update(lua).digest('hex');
    this.armed = { markers: [sha, Buffer.from(lua).toString('latin1')], ...options };
    this.lost = 0;
  }

  up(): void {
    this.down = false;
  }

  async close(): Promise<void> {
    for (const socket of this.open) socket.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private accept(client: net.Socket): void {
    if (this.down) {
      client.destroy();
      return;
    }
    const upstream = net.connect(this.redisPort, '127.0.0.1');
    this.open.add(client).add(upstream);
    const cut = () => {
      client.destroy();
      upstream.destroy();
      this.open.delete(client);
      this.open.delete(upstream);
    };
    client.on('error', cut).on('close', cut);
    upstream.on('error', cut).on('close', cut);
    let sent = '';
    let swallowing = false;
    client.on('data', (chunk: Buffer) => {
      const armed = this.armed;
      if (armed) {
        // Keep enough of what was sent to find a marker split across chunks.
        const keep = Math.max(...armed.markers.map((marker) => marker.length));
        sent = (sent + chunk.toString('latin1')).slice(-keep - chunk.length);
        if (armed.markers.some((marker) => sent.includes(marker))) {
          sent = '';
          if (armed.lose === 'request') {
            this.fail();
            return;
          }
          swallowing = true;
        }
      }
      upstream.write(chunk);
    });
    upstream.on('data', (chunk: Buffer) => {
      if (!swallowing) {
        client.write(chunk);
        return;
      }
      // Redis has answered, so the script has run; the service never sees the answer.
      this.fail();
      cut();
    });
  }

  private fail(): void {
    this.lost += 1;
    const thenDown = this.armed?.thenDown ?? false;
    this.armed = undefined;
    this.down = thenDown;
    for (const socket of this.open) socket.destroy();
  }
}

let redis: TestRedis;
let proxy: LostReplyProxy;
let operator: Redis;
let app: AppUnderTest;
let check: OfficialCheckClient;

beforeAll(async () => {
  redis = await startTestRedis();
  proxy = new LostReplyProxy(redis.port);
  const proxied = await proxy.listen();
  operator = new Redis(redis.url, { disconnectTimeout: 50 });
  // The Check deadline above the default 50 ms: these cases lose admin replies, and a Check through the proxy on a busy
  // machine must not miss its deadline for nothing.
  app = await startAppUnderTest({ redisUrl: proxied, env: { REDIS_TIMEOUT_MS: '250' } });
  check = createOfficialCheckClient(app.grpcAddress);
  expect((await app.admin('POST', '/admin/accounts', { id: 'acme', name: 'Acme' })).status).toBe(201);
});
afterAll(async () => {
  check?.close();
  proxy?.up();
  await app?.close();
  await proxy?.close();
  operator?.disconnect();
  await redis?.stop();
});

const decide = (key: string) => decisionFor(check, key);
const keyIdsOfAcme = () => keyIdsOf(app, 'acme');

async function auditOf(keyId: string): Promise<{ action: string; detail?: string }[]> {
  const audit = await app.admin('GET', '/admin/audit?limit=200');
  expect(audit.status).toBe(200);
  return audit.body.entries.filter((entry) => entry.keyId === keyId);
}

async function createKey(name: string): Promise<{ id: string; key: string }> {
  const created = await app.admin('POST', '/admin/accounts/acme/keys', { name });
  expect(created.status).toBe(201);
  return created.body;
}

/** After Redis was unreachable: waits until the service reaches it again (ioredis reconnects within 1 s). */
async function waitUntilReachable(keyId: string): Promise<void> {
  for (let tries = 0; tries < 100; tries += 1) {
    if ((await app.admin('GET', `/admin/keys/${keyId}`)).status === 200) return;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error('the service did not reach Redis again within 10 s');
}

it('a rotation whose reply is lost after Redis applied it answers 201 with the new key: one rotation, old key refused', async () => {
  const old = await createKey('prod');
  expect(await decide(old.key)).toBe('allow');
  const keysBefore = await keyIdsOfAcme();

  proxy.lose(REDIS_SCRIPTS.gwaRotateKey.lua, { lose: 'reply', thenDown: false });
  const rotated = await app.admin('POST', `/admin/keys/${old.id}/rotate`, { graceSeconds: 0 });
  expect(proxy.lost).toBe(1);
  expect(rotated.status).toBe(201);
  const next = rotated.body;
  expect(next).toMatchObject({ replaces: old.id, oldKey: { status: 'revoked', replacedBy: next.id } });

  expect(await decide(next.key)).toBe('allow');
  expect(await decide(old.key)).toBe('key_revoked');
  expect(await keyIdsOfAcme()).toEqual([...keysBefore, next.id].sort());
  expect(await operator.hget(redisKeys.key('acme', old.id), 'replacedBy')).toBe(next.id);
  const rotations = (await auditOf(old.id)).filter((entry) => entry.action === 'key.rotate');
  expect(rotations).toHaveLength(1);
  expect(rotations[0]?.detail).toContain(`newKeyId=${next.id}`);
});

it('a key creation whose reply is lost answers 201 with the one key it created', async () => {
  const keysBefore = await keyIdsOfAcme();
  proxy.lose(REDIS_SCRIPTS.gwaInsertKey.lua, { lose: 'reply', thenDown: false });
  const created = await app.admin('POST', '/admin/accounts/acme/keys', { name: 'ci' });
  expect(proxy.lost).toBe(1);
  expect(created.status).toBe(201);
  const key = created.body;
  expect(await keyIdsOfAcme()).toEqual([...keysBefore, key.id].sort());
  expect(await decide(key.key)).toBe('allow');
  expect((await auditOf(key.id)).map((entry) => entry.action)).toEqual(['key.create']);
});

it('Redis unreachable for every attempt after applying the rotation: 503 says it may have been applied and how to settle it', async () => {
  const old = await createKey('staging');
  proxy.lose(REDIS_SCRIPTS.gwaRotateKey.lua, { lose: 'reply', thenDown: true });
  const failed = await app.admin('POST', `/admin/keys/${old.id}/rotate`, { graceSeconds: 0 });
  expect(failed.status).toBe(503);
  expect(failed.body).not.toHaveProperty('key');
  const { code, message } = failed.body.error;
  expect(code).toBe('store_unavailable');
  expect(message).toContain('may or may not have been applied');
  expect(message).toContain(`GET /admin/keys/${old.id}`);
  const newKeyId = /If its replacedBy is '(key_\w+)'/.exec(message)?.[1];
  expect(newKeyId).toBeDefined();

  proxy.up();
  await waitUntilReachable(old.id);
  // What the message says to look for: the rotation was applied, so the old key is revoked and points at the new id ...
  const oldNow = await app.admin('GET', `/admin/keys/${old.id}`);
  expect(oldNow.body).toMatchObject({ status: 'revoked', replacedBy: newKeyId });
  expect(await decide(old.key)).toBe('key_revoked');
  // ... whose record exists, active, its secret held by nobody; its index was kept, so it is a whole key.
  expect((await app.admin('GET', `/admin/keys/${newKeyId}`)).body).toMatchObject({ status: 'active', replaces: old.id });
  expect(await operator.get(redisKeys.accountIdByKeyId(newKeyId!))).toBe('acme');
  // And what it says to do then: revoke that key and create a new one.
  expect((await app.admin('POST', `/admin/keys/${newKeyId}/revoke`)).status).toBe(200);
  const replacement = await createKey('staging');
  expect(await decide(replacement.key)).toBe('allow');
  expect((await auditOf(newKeyId!)).map((entry) => entry.action)).toEqual(['key.revoke']);
});

it('Redis unreachable for every attempt before the rotation ran: the same 503; the old key still works and rotates when retried', async () => {
  const old = await createKey('batch');
  const before = await app.admin('GET', `/admin/keys/${old.id}`);
  proxy.lose(REDIS_SCRIPTS.gwaRotateKey.lua, { lose: 'request', thenDown: true });
  const failed = await app.admin('POST', `/admin/keys/${old.id}/rotate`, { graceSeconds: 0 });
  expect(proxy.lost).toBe(1);
  expect(failed.status).toBe(503);
  expect(failed.body.error.message).toContain('may or may not have been applied');

  proxy.up();
  await waitUntilReachable(old.id);
  // The message's other branch: no replacedBy, nothing changed, the old key works; rotate again.
  expect(await app.admin('GET', `/admin/keys/${old.id}`)).toEqual(before);
  expect(await decide(old.key)).toBe('allow');
  const retried = await app.admin('POST', `/admin/keys/${old.id}/rotate`, { graceSeconds: 0 });
  expect(retried.status).toBe(201);
  expect(await decide(retried.body.key)).toBe('allow');
  expect(await decide(old.key)).toBe('key_revoked');
  expect((await auditOf(old.id)).filter((entry) => entry.action === 'key.rotate')).toHaveLength(1);
});

it('Redis unreachable for every attempt after applying a key creation: 503 names the key to look up; it exists and can be revoked', async () => {
  const keysBefore = await keyIdsOfAcme();
  proxy.lose(REDIS_SCRIPTS.gwaInsertKey.lua, { lose: 'reply', thenDown: true });
  const failed = await app.admin('POST', '/admin/accounts/acme/keys', { name: 'lost' });
  expect(failed.status).toBe(503);
  expect(failed.body).not.toHaveProperty('key');
  const { message } = failed.body.error;
  expect(message).toContain('may or may not have been created');
  const keyId = /Find out with GET \/admin\/keys\/(key_\w+)/.exec(message)?.[1];
  expect(keyId).toBeDefined();

  proxy.up();
  await waitUntilReachable(keysBefore[0]!);
  // Created, as the message allows: listed and active, its secret held by nobody, and no key.create in the audit.
  expect(await keyIdsOfAcme()).toEqual([...keysBefore, keyId!].sort());
  expect((await app.admin('GET', `/admin/keys/${keyId}`)).body).toMatchObject({ status: 'active', name: 'lost' });
  expect((await app.admin('POST', `/admin/keys/${keyId}/revoke`)).status).toBe(200);
  expect((await auditOf(keyId!)).map((entry) => entry.action)).toEqual(['key.revoke']);
});

it('a credit with an Idempotency-Key whose reply is lost is applied once: 200, not marked replayed, one audit entry', async () => {
  expect((await app.admin('POST', '/admin/accounts', { id: 'wallet', name: 'Wallet', billing: { creditBalance: 100 } })).status).toBe(201);
  const credit = () => app.adminWithHeaders('POST', '/admin/accounts/wallet/credit', { amount: 25 }, { 'Idempotency-Key': 'invoice-7' });

  proxy.lose(REDIS_SCRIPTS.gwaAdjustCredit.lua, { lose: 'reply', thenDown: false });
  const credited = await credit();
  expect(proxy.lost).toBe(1);
  // The service repeated its own call, which the key answered: this request's adjustment, applied by it, once.
  expect(credited.status).toBe(200);
  expect(credited.body).toEqual({
    accountId: 'wallet',
    creditBalance: 125,
    currency: { code: 'USD', exponent: 6 },
    creditBalanceFormatted: '$0.000125',
  });
  expect(credited.headers.get('idempotent-replayed')).toBeNull();
  expect(await operator.hget(redisKeys.account('wallet'), 'creditBalance')).toBe('125');

  // The billing system's own retry, after an answer it lost, is the replay.
  const retried = await credit();
  expect({ status: retried.status, body: retried.body }).toEqual({ status: 200, body: credited.body });
  expect(retried.headers.get('idempotent-replayed')).toBe('true');
  const audit = await app.admin('GET', '/admin/accounts/wallet/audit?limit=100');
  expect(audit.body.entries.filter((entry) => entry.action === 'account.credit')).toHaveLength(1);
});

it('a credit with an Idempotency-Key that Redis never answers: 503 says to send it again with the same key, which applies it once and audits it once', async () => {
  expect((await app.admin('POST', '/admin/accounts', { id: 'purse', name: 'Purse', billing: { creditBalance: 0 } })).status).toBe(201);
  const credit = () => app.adminWithHeaders('POST', '/admin/accounts/purse/credit', { amount: 9 }, { 'Idempotency-Key': 'invoice-8' });

  proxy.lose(REDIS_SCRIPTS.gwaAdjustCredit.lua, { lose: 'reply', thenDown: true });
  const failed = await credit();
  expect(failed.status).toBe(503);
  expect(failed.body.error.code).toBe('store_unavailable');
  expect(failed.body.error.message).toContain('Send it again with the same Idempotency-Key');

  proxy.up();
  for (let tries = 0; (await app.admin('GET', '/admin/accounts/purse')).status !== 200; tries += 1) {
    if (tries === 100) throw new Error('the service did not reach Redis again within 10 s');
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  const retried = await credit();
  expect(retried.status).toBe(200);
  expect(retried.body).toEqual({
    accountId: 'purse',
    creditBalance: 9,
    currency: { code: 'USD', exponent: 6 },
    creditBalanceFormatted: '$0.000009',
  });
  // Redis had applied it before the reply was lost, so the retry is its replay.
  expect(retried.headers.get('idempotent-replayed')).toBe('true');
  expect(await operator.hget(redisKeys.account('purse'), 'creditBalance')).toBe('9');
  // The call that applied it never learnt that it had, so it wrote no audit entry; the replay that found it applied
  // writes the one entry, and a further replay none.
  const creditEntries = async () =>
    (await app.admin('GET', '/admin/accounts/purse/audit?limit=100')).body.entries.filter(
      (entry: { action: string }) => entry.action === 'account.credit',
    );
  expect(await creditEntries()).toMatchObject([{ action: 'account.credit', detail: 'amount=9' }]);
  expect((await credit()).headers.get('idempotent-replayed')).toBe('true');
  expect(await creditEntries()).toHaveLength(1);
});
