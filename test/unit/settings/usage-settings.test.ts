import {
  DEFAULT_USAGE_BUFFER_MAX_RECORDS,
  DEFAULT_USAGE_DURABILITY_TIMEOUT_MS,
  DEFAULT_USAGE_STREAM_MAX_LENGTH,
  loadSettings,
} from '../../../src/platform/settings';
import { problemsIn } from '../../support/settings-results';

const withConfig = (env: Record<string, string>, config?: object) =>
  loadSettings(config ? { ...env, CONFIG_FILE: 'c.json' } : env, () => JSON.stringify(config));
const problemsOf = (env: Record<string, string>, config?: object) => problemsIn(withConfig(env, config));

describe('usage settings (issue 16)', () => {
  it('defaults: a buffer of 100,000 records, a stream of 1,000,000 entries, no token budgets', () => {
    const result = loadSettings({ USAGE_BUFFER_MAX_RECORDS: ' ' });
    if (!result.ok) throw new Error(result.problems.join('; '));
    expect(result.settings.usage).toEqual({
      bufferMaxRecords: DEFAULT_USAGE_BUFFER_MAX_RECORDS,
      streamMaxLength: DEFAULT_USAGE_STREAM_MAX_LENGTH,
      durability: { mode: 'acknowledged' },
    });
    expect([DEFAULT_USAGE_BUFFER_MAX_RECORDS, DEFAULT_USAGE_STREAM_MAX_LENGTH]).toEqual([100_000, 1_000_000]);
    expect(result.settings.pipeline.defaultTokenBudgets).toEqual({ key: [], account: [] });
    expect(Object.isFrozen(result.settings.usage)).toBe(true);
  });

  it('reads the bounds, refusing values outside them with the setting named, all problems at once', () => {
    const result = loadSettings({ USAGE_BUFFER_MAX_RECORDS: '5000', USAGE_STREAM_MAX_LEN: '20000' });
    expect(result.ok && result.settings.usage).toEqual({
      bufferMaxRecords: 5_000,
      streamMaxLength: 20_000,
      durability: { mode: 'acknowledged' },
    });
    expect(problemsOf({ USAGE_BUFFER_MAX_RECORDS: '99', USAGE_STREAM_MAX_LEN: 'many' })).toEqual([
      'USAGE_BUFFER_MAX_RECORDS: Too small: expected number to be >=100',
      'USAGE_STREAM_MAX_LEN: Invalid input: expected number, received NaN',
    ]);
    expect(problemsOf({ USAGE_BUFFER_MAX_RECORDS: '10000001' })).toEqual([
      'USAGE_BUFFER_MAX_RECORDS: Too big: expected number to be <=10000000',
    ]);
  });

  it('reads default token budgets from the config file next to the request limits', () => {
    const result = withConfig(
      {},
      { defaultPlan: { tokenBudgets: { key: [{ tokens: 100_000, window: '1m' }], account: [{ tokens: 5_000_000, window: '1d' }] } } },
    );
    if (!result.ok) throw new Error(result.problems.join('; '));
    expect(result.settings.pipeline.defaultTokenBudgets).toEqual({
      key: [{ tokens: 100_000, windowSeconds: 60 }],
      account: [{ tokens: 5_000_000, windowSeconds: 86_400 }],
    });
    // The request limits keep their defaults.
    expect(result.settings.pipeline.defaultPlan.key).toHaveLength(2);
  });

  it('refuses a bad token budget, naming the field', () => {
    expect(problemsOf({}, { defaultPlan: { tokenBudgets: { key: [{ tokens: 10, window: '1w' }] } } })).toEqual([
      expect.stringMatching(/^CONFIG_FILE c\.json: defaultPlan\.tokenBudgets\.key\.0\.window: must be a window such as/),
    ]);
    expect(problemsOf({}, { defaultPlan: { tokenBudgets: { keys: [] } } })).toEqual([
      expect.stringMatching(/^CONFIG_FILE c\.json: defaultPlan\.tokenBudgets: Unrecognized key: "keys"/),
    ]);
  });

  it('reads USAGE_DURABILITY with its replicas and timeout', () => {
    const redis = { REDIS_URL: 'redis://redis:6379' };
    const durability = (env: Record<string, string>) => {
      const result = loadSettings({ ...redis, ...env });
      if (!result.ok) throw new Error(result.problems.join('; '));
      return result.settings.usage.durability;
    };
    expect(durability({ USAGE_DURABILITY: 'appendfsync-always' })).toEqual({ mode: 'appendfsync-always' });
    expect(durability({ USAGE_DURABILITY: 'wait-replicas', USAGE_DURABILITY_REPLICAS: '2' })).toEqual({
      mode: 'wait-replicas',
      replicas: 2,
      timeoutMs: DEFAULT_USAGE_DURABILITY_TIMEOUT_MS,
    });
    expect(durability({ USAGE_DURABILITY: 'waitaof', USAGE_DURABILITY_TIMEOUT_MS: '800' })).toEqual({
      mode: 'waitaof',
      replicas: 0,
      timeoutMs: 800,
    });
  });

  it('refuses a durability that cannot hold, naming why, all at once', () => {
    expect(problemsOf({ USAGE_DURABILITY: 'appendfsync-always' })).toEqual([
      'USAGE_DURABILITY: appendfsync-always needs Redis (REDIS_URL, REDIS_SENTINELS or REDIS_CLUSTER_NODES); the in-memory store keeps nothing',
    ]);
    expect(problemsOf({ USAGE_DURABILITY: 'fsync' })).toEqual([expect.stringMatching(/^USAGE_DURABILITY: Invalid option/)]);
    expect(problemsOf({ REDIS_CLUSTER_NODES: 'a:7000', USAGE_DURABILITY: 'wait-replicas', USAGE_DURABILITY_TIMEOUT_MS: '2000' })).toEqual([
      'USAGE_DURABILITY: wait-replicas is not supported on Redis Cluster (a WAIT must reach the master that took each write); use appendfsync-always on every master',
      'USAGE_DURABILITY_REPLICAS: required with USAGE_DURABILITY=wait-replicas, at least 1 (the replicas each record must reach)',
      'USAGE_DURABILITY_TIMEOUT_MS: must be below REDIS_ADMIN_TIMEOUT_MS (2000), or the client gives up on the wait before Redis answers it',
    ]);
    expect(problemsOf({ REDIS_URL: 'redis://r:6379', USAGE_DURABILITY_REPLICAS: '1' })).toEqual([
      'USAGE_DURABILITY_REPLICAS: only meaningful with USAGE_DURABILITY=wait-replicas or waitaof',
    ]);
  });
});
