import { loadSettings } from '../../../src/platform/settings';
import { problemsIn, withConfigFile } from '../../support/settings-results';

const PATH = '/etc/gateway/config.json';
const withConfig = (config: unknown) => withConfigFile(config, {}, PATH);
const problemsOf = (config: unknown): string[] => problemsIn(withConfig(config));

describe('config file: currency (what every amount counts)', () => {
  it('defaults to micro-dollars, with or without a config file', () => {
    const bare = loadSettings({});
    if (!bare.ok) throw new Error(bare.problems.join('; '));
    expect(bare.settings.currency).toEqual({ code: 'USD', exponent: 6 });
    const empty = withConfig({});
    if (!empty.ok) throw new Error(empty.problems.join('; '));
    expect(empty.settings.currency).toEqual({ code: 'USD', exponent: 6 });
  });

  it('takes an ISO 4217 code and an exponent from 0 to 9, frozen', () => {
    const result = withConfig({ currency: { code: 'EUR', exponent: 2 } });
    if (!result.ok) throw new Error(result.problems.join('; '));
    expect(result.settings.currency).toEqual({ code: 'EUR', exponent: 2 });
    expect(Object.isFrozen(result.settings.currency)).toBe(true);
    for (const exponent of [0, 9]) expect(withConfig({ currency: { code: 'JPY', exponent } }).ok).toBe(true);
  });

  it('lists an unknown code, an exponent out of 0…9 and a missing field as problems', () => {
    expect(problemsOf({ currency: { code: 'XYZ', exponent: 6 } })).toEqual([
      `CONFIG_FILE ${PATH}: currency.code: 'XYZ' is not an ISO 4217 currency code (such as USD or EUR)`,
    ]);
    expect(problemsOf({ currency: { code: 'usd', exponent: 6 } })[0]).toContain("currency.code: 'usd' is not an ISO 4217 currency code");
    for (const exponent of [-1, 10, 2.5]) {
      expect(problemsOf({ currency: { code: 'USD', exponent } })).toEqual([
        `CONFIG_FILE ${PATH}: currency.exponent: must be a whole number from 0 to 9: amounts count 10^-exponent of the currency`,
      ]);
    }
    expect(problemsOf({ currency: { code: 'USD' } })[0]).toContain('currency.exponent');
    expect(problemsOf({ currency: { code: 'USD', exponent: 6, symbol: '$' } })[0]).toContain('currency');
  });
});
