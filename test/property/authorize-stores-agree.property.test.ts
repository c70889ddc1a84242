import fc from 'fast-check';
import { ManualClock } from '../../src/domain/clock';
import type { RateLimit, RatePlan } from '../../src/domain/rate-limits';
import { MemoryStore } from '../../src/store/memory-store';
import { RedisStore } from '../../src/store/redis/redis-store';
import type { Account, StoredKey } from '../../src/domain/key-records';
import { startTestRedis, type TestRedis } from '../support/redis-server';

/**
 * The Redis authorize script is generated per default plan, with a
 * straight-line path for plan limits and a table-driven one for overrides
 * (src/store/redis/scripts.ts). Whatever the plan, the overrides and the
 * timing of the requests, it must answer exactly as the in-memory store
 * (authorizeAccountState): same outcome, same limit named, same remaining,
 * reset and retry times.
 */
let redis: TestRedis;
let store: RedisStore;
let now = Date.parse('2026-11-23T12:00:00.000Z');

beforeAll(async () => {
  redis = await startTestRedis();
  store = await RedisStore.connect({ url: redis.url, commandTimeoutMs: 2000, clockOverride: () => now });
});
afterAll(async () => {
  await store.close();
  await redis.stop();
});

const WINDOWS = [1, 2, 10, 60, 3600, 86_400];
const limits = fc
  .uniqueArray(fc.record({ limit: fc.integer({ min: 1, max: 6 }), windowSeconds: fc.constantFrom(...WINDOWS) }), {
    maxLength: 3,
    selector: (limit) => limit.windowSeconds,
  })
  .map((list): RateLimit[] => list);
const scenario = fc.record({
  plan: fc.record({ key: limits, account: limits }),
  keyOwn: fc.option(limits, { nil: undefined }),
  accountOverride: fc.option(fc.record({ key: fc.option(limits, { nil: undefined }), account: fc.option(limits, { nil: undefined }) }), {
    nil: undefined,
  }),
  /** Per request: which of the two keys, and how many ms pass before it. */
  requests: fc.array(
    fc.record({ key: fc.integer({ min: 0, max: 1 }), afterMs: fc.oneof(fc.constant(0), fc.integer({ min: 0, max: 3000 })) }),
    {
      minLength: 1,
      maxLength: 14,
    },
  ),
});

let run = 0;

it('decides every request exactly as the in-memory store, for any plan, overrides and timing', async () => {
  await fc.assert(
    fc.asyncProperty(scenario, async ({ plan, keyOwn, accountOverride, requests }) => {
      run += 1;
      const clock = new ManualClock(now);
      const memory = new MemoryStore(clock);
      const accountId = `acct_prop${process.pid}_${run}`;
      const account: Account = {
        id: accountId,
        name: 'property',
        status: 'active',
        createdAt: '2026-11-23T12:00:00.000Z',
        ...(accountOverride
          ? {
              limits: {
                ...(accountOverride.key ? { key: accountOverride.key } : {}),
                ...(accountOverride.account ? { account: accountOverride.account } : {}),
              },
            }
          : {}),
      };
      const keys: StoredKey[] = [0, 1].map((i) => ({
        id: `key_prop${process.pid}_${run}_${i}`,
        accountId,
        prefix: `gk_live_pr${i}x`,
        name: 'property',
        environment: 'live',
        status: 'active',
        createdAt: '2026-11-23T12:00:00.000Z',
        // The first key has its own limits when the scenario says so.
        ...(i === 0 && keyOwn ? { limits: keyOwn } : {}),
      }));
      for (const target of [memory, store]) {
        expect(await target.createAccount(account)).toBe(true);
        for (const key of keys) expect(await target.insertKey(`hash_${key.id}`, key)).toBe('created');
      }
      // Frozen, as the settings' plan is: the generated script is cached for it.
      const defaultPlan: RatePlan = Object.freeze({ key: Object.freeze(plan.key), account: Object.freeze(plan.account) });
      for (const request of requests) {
        now += request.afterMs;
        clock.set(now);
        const ids = { accountId, keyId: keys[request.key]!.id, defaultPlan };
        expect(await store.authorize(ids)).toEqual(await memory.authorize(ids));
      }
    }),
    { numRuns: 300, seed: 1414 },
  );
});
