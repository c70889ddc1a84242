import type { OperatorTokenStore } from '../../src/ports/operator-tokens';
import type { OperatorTokenRecord } from '../../src/operators/operator-token';
import { MemoryOperatorTokens } from '../../src/store/memory-operator-tokens';
import { RedisOperatorTokens } from '../../src/store/redis/redis-operator-tokens';
import { startTestRedis, type TestRedis } from '../support/redis-server';

/** Both adapters of the operator token port keep the same contract. */
let redis: TestRedis;
beforeAll(async () => {
  redis = await startTestRedis();
});
afterAll(async () => {
  await redis?.stop();
});

const record = (id: string, createdAt: string): OperatorTokenRecord => ({
  id,
  name: `token ${id}`,
  displayPrefix: 'gko_AbCd',
  scopes: ['accounts:read'],
  createdAt,
  expiresAt: '2027-01-01T00:00:00.000Z',
  createdBy: { kind: 'break-glass' },
});

describe.each([
  ['memory', async (): Promise<OperatorTokenStore> => new MemoryOperatorTokens()],
  ['redis', async (): Promise<OperatorTokenStore> => RedisOperatorTokens.connect({ mode: 'standalone', url: redis.url }, 1000)],
])('operator tokens (%s)', (_name, open) => {
  let tokens: OperatorTokenStore;
  beforeEach(async () => {
    tokens = await open();
  });
  afterEach(async () => {
    await tokens.close();
  });

  it('finds a token by its hash only, lists it, and after revocation no longer finds it but still lists it, revoked once', async () => {
    const suffix = Math.random().toString(36).slice(2);
    const [a, b] = [record(`otk_a${suffix}`, '2026-01-02T00:00:00.000Z'), record(`otk_b${suffix}`, '2026-01-01T00:00:00.000Z')];
    await tokens.insertOperatorToken(`hash-a-${suffix}`, a);
    await tokens.insertOperatorToken(`hash-b-${suffix}`, b);
    expect(await tokens.findOperatorToken(`hash-a-${suffix}`)).toEqual(a);
    expect(await tokens.findOperatorToken('no-such-hash')).toBeNull();
    const listed = (await tokens.listOperatorTokens()).filter((token) => token.id.endsWith(suffix));
    expect(listed.map((token) => token.id)).toEqual([b.id, a.id]);

    expect(await tokens.revokeOperatorToken(a.id, '2026-02-01T00:00:00.000Z')).toEqual({ ...a, revokedAt: '2026-02-01T00:00:00.000Z' });
    expect(await tokens.revokeOperatorToken(a.id, '2026-03-01T00:00:00.000Z')).toMatchObject({ revokedAt: '2026-02-01T00:00:00.000Z' });
    expect(await tokens.findOperatorToken(`hash-a-${suffix}`)).toBeNull();
    expect(await tokens.findOperatorToken(`hash-b-${suffix}`)).toEqual(b);
    expect((await tokens.listOperatorTokens()).find((token) => token.id === a.id)?.revokedAt).toBe('2026-02-01T00:00:00.000Z');
    expect(await tokens.revokeOperatorToken('otk_nothing', '2026-02-01T00:00:00.000Z')).toBeNull();
  });

  it('reads a token by its id, revoked or not (the revocation audits its name), never with its hash', async () => {
    const suffix = Math.random().toString(36).slice(2);
    const a = record(`otk_a${suffix}`, '2026-01-02T00:00:00.000Z');
    await tokens.insertOperatorToken(`hash-a-${suffix}`, a);
    expect(await tokens.getOperatorToken(a.id)).toEqual(a);
    await tokens.revokeOperatorToken(a.id, '2026-02-01T00:00:00.000Z');
    expect(await tokens.getOperatorToken(a.id)).toEqual({ ...a, revokedAt: '2026-02-01T00:00:00.000Z' });
    expect(await tokens.getOperatorToken('otk_nothing')).toBeNull();
  });
});
