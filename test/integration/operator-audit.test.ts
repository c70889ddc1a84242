import type { FastifyInstance } from 'fastify';
import Redis from 'ioredis';
import { buildAdminServer } from '../../src/admin/admin-server';
import { isOperatorAuditEntry, StoreUnavailableError, type AuditTrailEntry } from '../../src/ports/store';
import type { OperatorTokenStore } from '../../src/ports/operator-tokens';
import type { SessionStorage } from '../../src/http/sign-in/session-storage';
import { generateOperatorToken, hashOperatorToken, newOperatorTokenId } from '../../src/operators/operator-token';
import { ManualClock, systemClock } from '../../src/platform/clock';
import { MemoryStore } from '../../src/store/memory-store';
import { MemoryOperatorTokens } from '../../src/store/memory-operator-tokens';
import { MemorySessionStorage } from '../../src/store/memory-session-storage';
import { RedisStore } from '../../src/store/redis/redis-store';
import { RedisOperatorTokens } from '../../src/store/redis/redis-operator-tokens';
import { RedisSessionStorage } from '../../src/store/redis/redis-session-storage';
import { redisKeys } from '../../src/store/redis/redis-keys';
import { LogCapture } from '../support/log-capture';
import {
  signInOperator,
  stubOperatorRelyingParty,
  stubOperatorSignInSettings,
  STUB_ISSUER,
  type OperatorBrowser,
} from '../support/operator-sign-in-stub';
import { startTestRedis, type TestRedis } from '../support/redis-server';
import { TEST_ADMIN_TOKEN } from '../support/running-app';
import { freePort } from '../support/free-port';

/**
 * Operator-level audit: creating and revoking operator tokens (changes tied to
 * no account) are in the audit trail, naming the actor in each of its three
 * kinds (a signed-in person, an operator token, break-glass) and the token by
 * id and name, never by the token or its hash; GET /admin/audit shows them
 * with the accounts' entries, filtered by actor, action and time, and an
 * account filter leaves them out. On a real Redis and on the memory store.
 */
let redis: TestRedis;
let plain: Redis;
beforeAll(async () => {
  redis = await startTestRedis();
  plain = new Redis(redis.url, { disconnectTimeout: 50 });
});
afterAll(async () => {
  plain?.disconnect();
  await redis?.stop();
});

interface Backing {
  store: RedisStore | MemoryStore;
  operatorTokens: OperatorTokenStore;
  sessions: SessionStorage;
  /** Everything the backing store holds of the audit, as text: the raw stream in Redis. */
  rawAudit: () => Promise<string>;
  close: () => Promise<void>;
}

type Answer = { status: number; body: Record<string, unknown> & { entries?: AuditTrailEntry[]; next?: string | null } };

describe.each([
  [
    'redis',
    async (): Promise<Backing> => {
      const topology = { mode: 'standalone' as const, url: redis.url };
      const store = await RedisStore.connect({ url: redis.url, commandTimeoutMs: 1000 });
      const operatorTokens = await RedisOperatorTokens.connect(topology, 1000);
      const sessions = await RedisSessionStorage.connect(topology, 1000, redisKeys.operatorSession);
      return {
        store,
        operatorTokens,
        sessions,
        rawAudit: async () => JSON.stringify(await plain.xrange(redisKeys.audit(), '-', '+')),
        close: async () => {
          await Promise.all([store.close(), operatorTokens.close(), sessions.close()]);
        },
      };
    },
  ],
  [
    'memory',
    async (clock: ManualClock): Promise<Backing> => {
      const store = new MemoryStore(clock);
      return {
        store,
        operatorTokens: new MemoryOperatorTokens(),
        sessions: new MemorySessionStorage(clock),
        rawAudit: async () => JSON.stringify(await store.readAudit({ limit: 10_000 })),
        close: async () => store.close(),
      };
    },
  ],
])('operator-level audit (%s)', (_name, open) => {
  // Near real time: the Redis sessions expire on Redis's clock. A minute between steps, well within a session's idle time.
  const clock = new ManualClock(Math.floor(Date.now() / 60_000) * 60_000);
  const step = () => clock.advance(60_000);
  let backing: Backing;
  let admin: FastifyInstance;
  let adminUrl: string;
  let ada: OperatorBrowser;
  let sam: OperatorBrowser;
  const ids: Record<'breakGlassMade' | 'personMade' | 'tokenMade', string> = { breakGlassMade: '', personMade: '', tokenMade: '' };
  const secrets: string[] = [];
  const times: string[] = [];

  const asBearer = async (token: string, method: string, path: string, body?: object): Promise<Answer> => {
    const response = await fetch(`${adminUrl}${path}`, {
      method,
      headers: { authorization: `Bearer ${token}`, ...(body ? { 'content-type': 'application/json' } : {}) },
      ...(body ? { body: JSON.stringify(body) } : {}),
    });
    return { status: response.status, body: (await response.json()) as Answer['body'] };
  };
  const created = (answer: Answer) => {
    expect(answer.status).toBe(201);
    secrets.push(answer.body.token as string);
    return answer.body.id as string;
  };
  const audit = async (query: string): Promise<AuditTrailEntry[]> => {
    const answer = await sam.call('GET', `/admin/audit${query}`);
    expect(answer.status).toBe(200);
    return answer.body.entries as AuditTrailEntry[];
  };
  const summary = (entries: AuditTrailEntry[]) =>
    entries.map((entry) =>
      isOperatorAuditEntry(entry) ? `${entry.action} ${entry.operatorTokenName}` : `${entry.action} ${entry.accountId}`,
    );

  beforeAll(async () => {
    backing = await open(clock);
    const port = await freePort();
    adminUrl = `http://127.0.0.1:${port}`;
    admin = buildAdminServer({
      store: backing.store,
      clock,
      logger: new LogCapture().logger,
      adminToken: TEST_ADMIN_TOKEN,
      operatorTokens: backing.operatorTokens,
      operatorSignIn: {
        settings: stubOperatorSignInSettings(adminUrl),
        sessions: backing.sessions,
        relyingParty: stubOperatorRelyingParty,
      },
    });
    await admin.listen({ host: '127.0.0.1', port });
    ada = await signInOperator(adminUrl, 'ada', ['gw-admins']);
    sam = await signInOperator(adminUrl, 'sam', ['gw-support']);

    // Each minute one change: break-glass, then the person ada, then a token, each create one; then each revokes one.
    times.push(new Date(clock.now()).toISOString());
    expect((await asBearer(TEST_ADMIN_TOKEN, 'POST', '/admin/accounts', { id: 'acme', name: 'Acme' })).status).toBe(201);
    step();
    times.push(new Date(clock.now()).toISOString());
    const automation = await asBearer(TEST_ADMIN_TOKEN, 'POST', '/admin/operator-tokens', {
      name: 'automation',
      scopes: ['operators:admin'],
    });
    ids.breakGlassMade = created(automation);
    step();
    times.push(new Date(clock.now()).toISOString());
    ids.personMade = created(await ada.call('POST', '/admin/operator-tokens', { name: 'made by ada', scopes: ['usage:read'] }));
    step();
    times.push(new Date(clock.now()).toISOString());
    ids.tokenMade = created(
      await asBearer(secrets[0]!, 'POST', '/admin/operator-tokens', { name: 'made by a token', scopes: ['keys:read'] }),
    );
    step();
    times.push(new Date(clock.now()).toISOString());
    expect((await ada.call('POST', `/admin/operator-tokens/${ids.tokenMade}/revoke`)).status).toBe(200);
    step();
    times.push(new Date(clock.now()).toISOString());
    expect((await asBearer(secrets[0]!, 'POST', `/admin/operator-tokens/${ids.personMade}/revoke`)).status).toBe(200);
    step();
    times.push(new Date(clock.now()).toISOString());
    expect((await asBearer(TEST_ADMIN_TOKEN, 'POST', `/admin/operator-tokens/${ids.breakGlassMade}/revoke`)).status).toBe(200);
    // Revoking it again changes nothing, so adds no entry.
    expect((await asBearer(TEST_ADMIN_TOKEN, 'POST', `/admin/operator-tokens/${ids.breakGlassMade}/revoke`)).status).toBe(200);
  });
  afterAll(async () => {
    await admin?.close();
    await backing?.close();
  });

  const person = (subject: string) => ({ kind: 'operator', operator: { kind: 'person', issuer: STUB_ISSUER, subject } });
  const token = (tokenId: string, name: string) => ({ kind: 'operator', operator: { kind: 'token', tokenId, name } });
  const breakGlass = { kind: 'operator', operator: { kind: 'break-glass' } };

  it('has an entry for each creation and revocation, naming its actor and the token by id and name', async () => {
    const entries = await audit('');
    expect(entries.map((entry) => [entry.action, entry.actor, isOperatorAuditEntry(entry) ? entry.operatorTokenId : null])).toEqual([
      ['operator_token.revoke', breakGlass, ids.breakGlassMade],
      ['operator_token.revoke', token(ids.breakGlassMade, 'automation'), ids.personMade],
      ['operator_token.revoke', person('ada'), ids.tokenMade],
      ['operator_token.create', token(ids.breakGlassMade, 'automation'), ids.tokenMade],
      ['operator_token.create', person('ada'), ids.personMade],
      ['operator_token.create', breakGlass, ids.breakGlassMade],
      ['account.create', breakGlass, null],
    ]);
    expect(entries[5]).toEqual({
      id: expect.any(String),
      time: times[1],
      action: 'operator_token.create',
      actor: breakGlass,
      operatorTokenId: ids.breakGlassMade,
      operatorTokenName: 'automation',
      detail: expect.stringContaining('scopes=operators:admin'),
    });
    expect(entries[0]).not.toHaveProperty('accountId');
  });

  it('filters them by actor, action and time', async () => {
    expect(summary(await audit('?actor=ada'))).toEqual(['operator_token.revoke made by a token', 'operator_token.create made by ada']);
    expect(summary(await audit(`?actor=${ids.breakGlassMade}`))).toEqual([
      'operator_token.revoke made by ada',
      'operator_token.create made by a token',
    ]);
    expect(summary(await audit('?actor=break-glass'))).toEqual([
      'operator_token.revoke automation',
      'operator_token.create automation',
      'account.create acme',
    ]);
    expect(summary(await audit('?action=operator_token.create'))).toEqual([
      'operator_token.create made by a token',
      'operator_token.create made by ada',
      'operator_token.create automation',
    ]);
    expect(summary(await audit(`?from=${times[2]}&to=${times[5]}`))).toEqual([
      'operator_token.revoke made by a token',
      'operator_token.create made by a token',
      'operator_token.create made by ada',
    ]);
  });

  it('leaves them out under an account filter: they belong to no account', async () => {
    expect(summary(await audit('?accountId=acme'))).toEqual(['account.create acme']);
  });

  it('shows them to whoever reads the audit (support), and to no one else (billing)', async () => {
    const bea = await signInOperator(adminUrl, 'bea', ['gw-billing']);
    expect((await bea.call('GET', '/admin/audit?action=operator_token.create')).status).toBe(403);
    expect(await audit('?action=operator_token.revoke')).toHaveLength(3);
  });

  it('holds no token and no hash of one, in the answers or in the store', async () => {
    const everything = JSON.stringify(await audit('')) + (await backing.rawAudit());
    expect(secrets).toHaveLength(3);
    for (const secret of secrets) {
      expect(everything).not.toContain(secret);
      expect(everything).not.toContain(hashOperatorToken(secret));
    }
  });
});

describe('when the audit entry cannot be written', () => {
  /** The memory store, but its trail refuses operator-level entries, as a Redis that fails the XADD would. */
  class TrailDown extends MemoryStore {
    override async appendOperatorAudit(): Promise<void> {
      throw new StoreUnavailableError('the audit trail is down');
    }
  }
  let admin: FastifyInstance;
  let adminUrl: string;
  const operatorTokens = new MemoryOperatorTokens();
  beforeAll(async () => {
    const port = await freePort();
    adminUrl = `http://127.0.0.1:${port}`;
    admin = buildAdminServer({
      store: new TrailDown(),
      clock: systemClock,
      logger: new LogCapture().logger,
      adminToken: TEST_ADMIN_TOKEN,
      operatorTokens,
    });
    await admin.listen({ host: '127.0.0.1', port });
  });
  afterAll(async () => {
    await admin?.close();
  });
  const call = async (method: string, path: string, token: string, body?: object) =>
    (
      await fetch(`${adminUrl}${path}`, {
        method,
        headers: { authorization: `Bearer ${token}`, ...(body ? { 'content-type': 'application/json' } : {}) },
        ...(body ? { body: JSON.stringify(body) } : {}),
      })
    ).status;

  it('makes no token, and revokes none: no change takes effect without its entry', async () => {
    expect(await call('POST', '/admin/operator-tokens', TEST_ADMIN_TOKEN, { name: 'unaudited', scopes: ['keys:read'] })).toBe(503);
    expect(await operatorTokens.listOperatorTokens()).toEqual([]);

    const { token, displayPrefix } = generateOperatorToken();
    const id = newOperatorTokenId();
    await operatorTokens.insertOperatorToken(hashOperatorToken(token), {
      id,
      name: 'made before the outage',
      displayPrefix,
      scopes: ['operators:admin'],
      createdAt: new Date().toISOString(),
      expiresAt: new Date(Date.now() + 86_400_000).toISOString(),
      createdBy: { kind: 'break-glass' },
    });
    expect(await call('POST', `/admin/operator-tokens/${id}/revoke`, TEST_ADMIN_TOKEN)).toBe(503);
    expect(await call('GET', '/admin/operator-tokens', token)).toBe(200);
  });
});
