import Redis from 'ioredis';
import { ManualClock } from '../../src/platform/clock';
import { hashOperatorToken, isWellFormedOperatorToken, OPERATOR_TOKEN_PREFIX } from '../../src/operators/operator-token';
import { startTestRedis, type TestRedis } from '../support/redis-server';
import { startAppUnderTest, TEST_ADMIN_TOKEN, type AppUnderTest } from '../support/running-app';
import type { ApiCreatedOperatorToken, ApiErrorBody, ApiOperatorTokenList } from '../../src/cli/api-types';
import type { AuditEntry } from '../../src/ports/store';
import type { OperatorActor } from '../../src/accounts/customer-identity';
import { mistyped } from '../support/mistyped';

/**
 * Operator API tokens on two replicas of the service sharing one real Redis:
 * created on one, used on the other, revoked on one and refused by the other
 * at its very next request.
 */
let redis: TestRedis;
let replicaA: AppUnderTest;
let replicaB: AppUnderTest;
let plain: Redis;
// Replica B's clock starts at real time (tokens are made on replica A, on the system clock) and is moved for the expiry test.
const clock = new ManualClock(Date.now());

beforeAll(async () => {
  redis = await startTestRedis();
  replicaA = await startAppUnderTest({ redisUrl: redis.url });
  replicaB = await startAppUnderTest({ redisUrl: redis.url, clock, env: { ADMIN_AUTH_FAILURES_PER_ADDRESS: '3' } });
  plain = new Redis(redis.url, { disconnectTimeout: 50 });
  expect((await replicaA.admin('POST', '/admin/accounts', { id: 'tok-acct', name: 'Tokens' })).status).toBe(201);
});
afterAll(async () => {
  plain?.disconnect();
  await replicaA?.close();
  await replicaB?.close();
  await redis?.stop();
});

type Answer = {
  status: number;
  body: ApiErrorBody & ApiCreatedOperatorToken & ApiOperatorTokenList & { entries: AuditEntry[]; createdBy: OperatorActor };
};
const asToken = async (app: AppUnderTest, token: string, method: string, path: string, body?: object): Promise<Answer> =>
  (await app.admin(method, path, body, token)) as unknown as Answer;
const asBreakGlass = (app: AppUnderTest, method: string, path: string, body?: object): Promise<Answer> =>
  asToken(app, TEST_ADMIN_TOKEN, method, path, body);

async function create(
  name: string,
  scopes: string[],
  expiresInDays?: number,
): Promise<{ id: string; token: string; body: Answer['body'] }> {
  const created = await asBreakGlass(replicaA, 'POST', '/admin/operator-tokens', {
    name,
    scopes,
    ...(expiresInDays ? { expiresInDays } : {}),
  });
  expect(created.status).toBe(201);
  return { id: created.body.id, token: created.body.token, body: created.body };
}

describe('creating a token', () => {
  it('answers the token once, in the scanner-recognisable gko_ format, and keeps only its hash', async () => {
    const { id, token, body } = await create('ci deploys', ['keys:read', 'keys:write'], 30);
    expect(token.startsWith(OPERATOR_TOKEN_PREFIX)).toBe(true);
    expect(isWellFormedOperatorToken(token)).toBe(true);
    expect(isWellFormedOperatorToken(mistyped(token))).toBe(false);
    expect(body).toMatchObject({ id, name: 'ci deploys', scopes: ['keys:read', 'keys:write'], status: 'active', revokedAt: null });
    expect(body.createdBy).toEqual({ kind: 'break-glass' });
    expect(Date.parse(body.expiresAt) - Date.parse(body.createdAt)).toBe(30 * 86_400_000);

    const listed = await asBreakGlass(replicaA, 'GET', '/admin/operator-tokens');
    const entry = listed.body.tokens.find((candidate) => candidate.id === id);
    expect(entry).toMatchObject({ id, displayPrefix: token.slice(0, 8) });
    expect(JSON.stringify(listed.body)).not.toContain(token);

    const everything: string[] = [];
    for (const key of await plain.keys('gwa:operator-token*')) {
      everything.push(key, (await plain.type(key)) === 'string' ? ((await plain.get(key)) ?? '') : (await plain.smembers(key)).join(','));
    }
    expect(everything.join('\n')).not.toContain(token);
    expect(await plain.get(`gwa:operator-token-hash:${hashOperatorToken(token)}`)).toBe(id);
  });

  it('refuses unknown scopes, no scopes, and lives longer than a year', async () => {
    for (const body of [
      { name: 'x', scopes: ['keys:delete'] },
      { name: 'x', scopes: [] },
      { name: 'x', scopes: ['keys:read'], expiresInDays: 366 },
    ]) {
      const answer = await asBreakGlass(replicaA, 'POST', '/admin/operator-tokens', body);
      expect(answer.status).toBe(400);
    }
  });
});

describe('revocation across replicas', () => {
  it('a token made on one replica works on the other, and once revoked on the first is refused by the second at its next request', async () => {
    const { id, token } = await create('support bot', ['accounts:read']);
    expect((await asToken(replicaB, token, 'GET', '/admin/accounts/tok-acct')).status).toBe(200);
    expect((await asToken(replicaB, token, 'GET', '/admin/accounts/tok-acct')).status).toBe(200);

    const revoked = await asBreakGlass(replicaA, 'POST', `/admin/operator-tokens/${id}/revoke`);
    expect(revoked.status).toBe(200);
    expect(revoked.body).toMatchObject({ id, status: 'revoked' });

    const refused = await asToken(replicaB, token, 'GET', '/admin/accounts/tok-acct');
    expect(refused.status).toBe(401);
    expect(refused.body.error.code).toBe('unauthorized');
    expect((await asToken(replicaA, token, 'GET', '/admin/accounts/tok-acct')).status).toBe(401);
  });

  it('answers 404 for a token id that does not exist', async () => {
    expect((await asBreakGlass(replicaA, 'POST', '/admin/operator-tokens/otk_nope/revoke')).status).toBe(404);
  });
});

describe('expiry', () => {
  it('refuses a token once its expiry has passed', async () => {
    const { token } = await create('short-lived', ['accounts:read'], 1);
    expect((await asToken(replicaB, token, 'GET', '/admin/accounts/tok-acct')).status).toBe(200);
    clock.advance(2 * 86_400_000);
    try {
      expect((await asToken(replicaB, token, 'GET', '/admin/accounts/tok-acct')).status).toBe(401);
    } finally {
      clock.advance(-2 * 86_400_000);
    }
  });
});

describe('the audit trail names the actor', () => {
  it('a token by its id and name, the break-glass token as break-glass', async () => {
    const { id, token } = await create('billing sync', ['billing:write', 'audit:read']);
    expect((await asToken(replicaB, token, 'PATCH', '/admin/accounts/tok-acct', { billing: { monthlySpendCap: 5000 } })).status).toBe(200);
    expect((await replicaA.admin('PATCH', '/admin/accounts/tok-acct', { name: 'Tokens Ltd' })).status).toBe(200);
    const trail = await asToken(replicaA, token, 'GET', '/admin/accounts/tok-acct/audit');
    const [byBreakGlass, byToken] = trail.body.entries;
    expect(byToken).toMatchObject({
      action: 'account.update',
      actor: { kind: 'operator', operator: { kind: 'token', tokenId: id, name: 'billing sync' } },
    });
    expect(byBreakGlass).toMatchObject({ action: 'account.update', actor: { kind: 'operator', operator: { kind: 'break-glass' } } });
  });

  it('logs every use of the break-glass token', async () => {
    expect((await replicaA.admin('GET', '/admin/accounts')).status).toBe(200);
    expect(replicaA.logs.events('admin_break_glass').some((line) => line.route === '/admin/accounts')).toBe(true);
  });
});

describe('guessing tokens', () => {
  it('counts wrong operator tokens against the address, well-formed ones included, as it counts wrong admin tokens', async () => {
    const { token } = await create('legit', ['accounts:read']);
    const body = token.slice(0, -6);
    // Made up, with a valid checksum: looked up in the store, and not found.
    const forged = async (n: number) => {
      const { crc32 } = await import('node:zlib');
      const { encodeBase62 } = await import('../../src/keys/base62');
      const head = `${body.slice(0, -3)}${String(n).padStart(3, '0')}`;
      return head + encodeBase62(crc32(head), 6);
    };
    const statuses: number[] = [];
    for (let n = 0; n < 3; n += 1) statuses.push((await asToken(replicaB, await forged(n), 'GET', '/admin/accounts')).status);
    statuses.push((await asToken(replicaB, token, 'GET', '/admin/accounts')).status);
    expect(statuses).toEqual([401, 401, 401, 429]);
  });
});
