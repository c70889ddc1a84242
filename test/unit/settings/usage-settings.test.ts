import { DEFAULT_USAGE_BUFFER_MAX_RECORDS, DEFAULT_USAGE_STREAM_MAX_LENGTH, loadSettings } from '../../../src/settings/settings';

const withConfig = (env: Record<string, string>, config?: object) =>
  loadSettings(config ? { ...env, CONFIG_FILE: 'c.json' } : env, () => JSON.stringify(config));
const problemsOf = (env: Record<string, string>, config?: object) => {
  const result = withConfig(env, config);
  if (result.ok) throw new Error('expected problems, got valid settings');
  return result.problems;
};

describe('usage settings (issue 16)', () => {
  it('defaults: a buffer of 100,000 records, a stream of 1,000,000 entries, no token budgets', () => {
    const result = loadSettings({ USAGE_BUFFER_MAX_RECORDS: ' ' });
    if (!result.ok) throw new Error(result.problems.join('; '));
    expect(result.settings.usage).toEqual({
      bufferMaxRecords: DEFAULT_USAGE_BUFFER_MAX_RECORDS,
      streamMaxLength: DEFAULT_USAGE_STREAM_MAX_LENGTH,
    });
    expect([DEFAULT_USAGE_BUFFER_MAX_RECORDS, DEFAULT_USAGE_STREAM_MAX_LENGTH]).toEqual([100_000, 1_000_000]);
    expect(result.settings.pipeline.defaultTokenBudgets).toEqual({ key: [], account: [] });
    expect(Object.isFrozen(result.settings.usage)).toBe(true);
  });

  it('reads the bounds, refusing values outside them with the setting named, all problems at once', () => {
    const result = loadSettings({ USAGE_BUFFER_MAX_RECORDS: '5000', USAGE_STREAM_MAX_LEN: '20000' });
    expect(result.ok && result.settings.usage).toEqual({ bufferMaxRecords: 5_000, streamMaxLength: 20_000 });
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
});
