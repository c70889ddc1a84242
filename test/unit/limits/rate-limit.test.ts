import { emissionIntervalUs, gcraStep } from '../../../src/accounts/limits/gcra';
import { describeWindow, effectiveLimits, parseWindow } from '../../../src/accounts/limits/rate-limit';

describe('windows', () => {
  it.each([
    ['30s', 30],
    ['1m', 60],
    ['2h', 7200],
    ['1d', 86_400],
    [90, 90],
  ])('parses %p as %d seconds', (text, seconds) => {
    expect(parseWindow(text)).toBe(seconds);
  });

  it.each(['', '1x', '0m', '-1m', '1.5m', '32d', 0, 1.5])('refuses %p', (text) => {
    expect(parseWindow(text)).toBeUndefined();
  });

  it.each([
    [60, '1m'],
    [86_400, '1d'],
    [3600, '1h'],
    [90, '90s'],
    [120, '2m'],
  ])('describes %d seconds as %s', (seconds, text) => {
    expect(describeWindow(seconds)).toBe(text);
  });
});

describe('effective limits', () => {
  const plan = { key: [{ limit: 1, windowSeconds: 60 }], account: [{ limit: 9, windowSeconds: 60 }] };
  it('uses the key override, then the account key override, then the plan', () => {
    const key = [{ limit: 3, windowSeconds: 60 }];
    const accountKey = [{ limit: 2, windowSeconds: 60 }];
    expect(effectiveLimits(plan, { key: accountKey }, key).key).toBe(key);
    expect(effectiveLimits(plan, { key: accountKey }, undefined).key).toBe(accountKey);
    expect(effectiveLimits(plan, undefined, undefined)).toEqual(plan);
  });
  it('takes the account scope from the account override or the plan, never from the key', () => {
    expect(effectiveLimits(plan, { account: [] }, undefined).account).toEqual([]);
    expect(effectiveLimits(plan, {}, [{ limit: 5, windowSeconds: 1 }]).account).toBe(plan.account);
  });
});

describe('GCRA step (microseconds)', () => {
  const limit = { limit: 4, windowSeconds: 60 };
  const second = 1_000_000;

  it('spaces requests by window / limit', () => {
    expect(emissionIntervalUs(limit)).toBe(15 * second);
    expect(emissionIntervalUs({ limit: 7, windowSeconds: 60 })).toBe(8_571_428);
  });

  it('allows a burst of the limit from an empty bucket, counting remaining down', () => {
    let tat: number | undefined;
    const remaining: number[] = [];
    for (let i = 0; i < 4; i += 1) {
      const step = gcraStep(tat, 0, limit);
      expect(step.allowed).toBe(true);
      remaining.push(step.remaining);
      tat = step.newTatUs;
    }
    expect(remaining).toEqual([3, 2, 1, 0]);
    const refused = gcraStep(tat, 0, limit);
    expect(refused).toEqual({ allowed: false, newTatUs: 60 * second, remaining: 0, resetUs: 60 * second, retryAfterUs: 15 * second });
  });

  it('treats a bucket whose TAT is in the past as empty', () => {
    expect(gcraStep(10 * second, 100 * second, limit)).toMatchObject({ allowed: true, remaining: 3, newTatUs: 115 * second });
  });

  it('allows exactly the limit in a burst for limits that do not divide the window evenly', () => {
    const odd = { limit: 7, windowSeconds: 60 };
    let tat: number | undefined;
    let allowed = 0;
    for (let i = 0; i < 20; i += 1) {
      const step = gcraStep(tat, 5 * second, odd);
      if (step.allowed) {
        allowed += 1;
        tat = step.newTatUs;
      }
    }
    expect(allowed).toBe(7);
  });
});
