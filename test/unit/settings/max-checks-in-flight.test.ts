import { DEFAULT_MAX_CHECKS_IN_FLIGHT, loadSettings } from '../../../src/platform/settings';
import { problemsOf } from '../../support/settings-results';

describe('MAX_CHECKS_IN_FLIGHT', () => {
  it('defaults to 256 when unset or blank', () => {
    expect(DEFAULT_MAX_CHECKS_IN_FLIGHT).toBe(256);
    for (const env of [{}, { MAX_CHECKS_IN_FLIGHT: '' }, { MAX_CHECKS_IN_FLIGHT: '  ' }]) {
      const result = loadSettings(env);
      expect(result.ok && result.settings.maxChecksInFlight).toBe(256);
    }
  });

  it.each([['1'], ['100000'], ['512']])('accepts %s', (value) => {
    const result = loadSettings({ MAX_CHECKS_IN_FLIGHT: value });
    expect(result.ok && result.settings.maxChecksInFlight).toBe(Number(value));
  });

  it.each([
    ['0', 'MAX_CHECKS_IN_FLIGHT: Too small: expected number to be >=1'],
    ['-5', 'MAX_CHECKS_IN_FLIGHT: Too small: expected number to be >=1'],
    ['100001', 'MAX_CHECKS_IN_FLIGHT: Too big: expected number to be <=100000'],
    ['12.5', 'MAX_CHECKS_IN_FLIGHT: Invalid input: expected int, received number'],
    ['lots', 'MAX_CHECKS_IN_FLIGHT: Invalid input: expected number, received NaN'],
  ])('refuses %s, naming the setting', (value, message) => {
    expect(problemsOf({ MAX_CHECKS_IN_FLIGHT: value })).toEqual([message]);
  });

  it('is listed with the other problems at once', () => {
    expect(problemsOf({ MAX_CHECKS_IN_FLIGHT: '0', LOG_LEVEL: 'loud' })).toEqual([
      expect.stringMatching(/^LOG_LEVEL: /),
      expect.stringMatching(/^MAX_CHECKS_IN_FLIGHT: /),
    ]);
  });

  it('is frozen with the rest of the settings', () => {
    const result = loadSettings({ MAX_CHECKS_IN_FLIGHT: '8' });
    expect(result.ok && Object.isFrozen(result.settings)).toBe(true);
  });
});
