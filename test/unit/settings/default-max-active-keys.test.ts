import { DEFAULT_MAX_ACTIVE_KEYS } from '../../../src/keys/active-key-cap';
import { loadSettings } from '../../../src/platform/settings';
import { problemsOf } from '../../support/settings-results';

describe('DEFAULT_MAX_ACTIVE_KEYS', () => {
  it('defaults to 50 when unset or blank', () => {
    expect(DEFAULT_MAX_ACTIVE_KEYS).toBe(50);
    for (const env of [{}, { DEFAULT_MAX_ACTIVE_KEYS: '' }]) {
      const result = loadSettings(env);
      expect(result.ok && result.settings.defaultMaxActiveKeys).toBe(50);
    }
  });

  it.each([['1'], ['10000'], ['200']])('accepts %s', (value) => {
    const result = loadSettings({ DEFAULT_MAX_ACTIVE_KEYS: value });
    expect(result.ok && result.settings.defaultMaxActiveKeys).toBe(Number(value));
  });

  it.each([
    ['0', 'DEFAULT_MAX_ACTIVE_KEYS: Too small: expected number to be >=1'],
    ['10001', 'DEFAULT_MAX_ACTIVE_KEYS: Too big: expected number to be <=10000'],
    ['2.5', 'DEFAULT_MAX_ACTIVE_KEYS: Invalid input: expected int, received number'],
    ['many', 'DEFAULT_MAX_ACTIVE_KEYS: Invalid input: expected number, received NaN'],
  ])('refuses %s, naming the setting', (value, message) => {
    expect(problemsOf({ DEFAULT_MAX_ACTIVE_KEYS: value })).toEqual([message]);
  });
});
