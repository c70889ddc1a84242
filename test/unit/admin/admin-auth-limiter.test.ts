import { AdminAuthLimiter, clientAddressKey, DEFAULT_TRUSTED_FOR_MS } from '../../../src/admin/admin-auth-limiter';
import type { AdminAuthLimits } from '../../../src/admin/admin-auth-limits';
import { ManualClock } from '../../../src/platform/clock';

const START = 1_800_000_000_000;
const LIMITS: AdminAuthLimits = { failuresPerAddress: 3, failuresTotal: 10, windowMs: 60_000 };

function limiterWith(limits: Partial<AdminAuthLimits> = {}, options: ConstructorParameters<typeof AdminAuthLimiter>[2] = {}) {
  const clock = new ManualClock(START);
  return { clock, limiter: new AdminAuthLimiter({ ...LIMITS, ...limits }, clock, options) };
}

/** What the admin server does for one wrong token: ask, and count it if it was checked. */
function guess(limiter: AdminAuthLimiter, address: string): 'checked' | 'address' | 'total' {
  const admission = limiter.admit(address);
  if (!admission.admitted) return admission.limit;
  limiter.recordFailure(address);
  return 'checked';
}

describe('per-address limit', () => {
  it('checks failuresPerAddress wrong tokens from one address, then refuses it without checking', () => {
    const { limiter } = limiterWith();
    expect([1, 2, 3, 4, 5].map(() => guess(limiter, '203.0.113.7'))).toEqual(['checked', 'checked', 'checked', 'address', 'address']);
  });

  it('reports the limit once, on the failure that reaches it', () => {
    const { limiter } = limiterWith();
    expect([1, 2, 3].map(() => limiter.recordFailure('203.0.113.7'))).toEqual([[], [], ['address']]);
    expect(limiter.recordFailure('203.0.113.7')).toEqual([]);
  });

  it('reports both limits when one failure reaches both', () => {
    const { limiter } = limiterWith({ failuresPerAddress: 2, failuresTotal: 2 });
    expect([1, 2].map(() => limiter.recordFailure('203.0.113.7'))).toEqual([[], ['address', 'total']]);
  });

  it('refuses the address even when it would present the right token (admit comes before the check)', () => {
    const { limiter } = limiterWith();
    for (let i = 0; i < 3; i += 1) limiter.recordFailure('203.0.113.7');
    expect(limiter.admit('203.0.113.7')).toMatchObject({ admitted: false, limit: 'address' });
  });

  it('leaves other addresses alone', () => {
    const { limiter } = limiterWith();
    for (let i = 0; i < 3; i += 1) limiter.recordFailure('203.0.113.7');
    expect(limiter.admit('198.51.100.1')).toEqual({ admitted: true });
  });

  it('says how long until the window ends, and admits again exactly then', () => {
    const { clock, limiter } = limiterWith();
    limiter.recordFailure('203.0.113.7');
    clock.advance(10_000);
    limiter.recordFailure('203.0.113.7');
    limiter.recordFailure('203.0.113.7');
    expect(limiter.admit('203.0.113.7')).toEqual({ admitted: false, limit: 'address', retryAfterMs: 50_000 });
    clock.advance(49_999);
    expect(limiter.admit('203.0.113.7')).toEqual({ admitted: false, limit: 'address', retryAfterMs: 1 });
    clock.advance(1);
    expect(limiter.admit('203.0.113.7')).toEqual({ admitted: true });
    expect(guess(limiter, '203.0.113.7')).toBe('checked'); // a fresh window
    expect(guess(limiter, '203.0.113.7')).toBe('checked');
    expect(guess(limiter, '203.0.113.7')).toBe('checked');
    expect(guess(limiter, '203.0.113.7')).toBe('address');
  });

  it('ends a window when the clock goes backwards, so no lockout outlasts it', () => {
    const { clock, limiter } = limiterWith();
    for (let i = 0; i < 3; i += 1) limiter.recordFailure('203.0.113.7');
    clock.set(START - 1);
    expect(limiter.admit('203.0.113.7')).toEqual({ admitted: true });
  });

  it('holds with a limit of one and a window at the largest setting', () => {
    const { clock, limiter } = limiterWith({ failuresPerAddress: 1, windowMs: 86_400_000 });
    expect(guess(limiter, 'a')).toBe('checked');
    clock.advance(86_399_999);
    expect(limiter.admit('a')).toEqual({ admitted: false, limit: 'address', retryAfterMs: 1 });
    clock.advance(1);
    expect(guess(limiter, 'a')).toBe('checked');
  });
});

describe('total limit (a guessing attack spread over many addresses)', () => {
  it('checks at most failuresTotal wrong tokens per window however many addresses guess', () => {
    const { limiter } = limiterWith({ failuresPerAddress: 3, failuresTotal: 10 });
    const outcomes = { checked: 0, address: 0, total: 0 };
    for (let n = 0; n < 5_000; n += 1) outcomes[guess(limiter, `10.${(n >> 16) & 255}.${(n >> 8) & 255}.${n & 255}`)] += 1;
    expect(outcomes).toEqual({ checked: 10, address: 0, total: 4_990 });
  });

  it('holds against addresses that each stay under their own limit, and reports reaching it once', () => {
    const { limiter } = limiterWith({ failuresPerAddress: 3, failuresTotal: 10 });
    const reached: string[] = [];
    let checked = 0;
    for (let round = 0; round < 2; round += 1) {
      for (let n = 0; n < 100; n += 1) {
        const address = `192.0.2.${n}`;
        if (!limiter.admit(address).admitted) continue;
        reached.push(...limiter.recordFailure(address));
        checked += 1;
      }
    }
    expect(checked).toBe(10);
    expect(reached).toEqual(['total']);
  });

  it('still checks addresses that recently presented the right token, and only them', () => {
    const { clock, limiter } = limiterWith();
    limiter.recordSuccess('198.51.100.1');
    for (let n = 0; n < 10; n += 1) limiter.recordFailure(`192.0.2.${n}`);
    expect(limiter.admit('192.0.2.200')).toEqual({ admitted: false, limit: 'total', retryAfterMs: 60_000 });
    expect(limiter.admit('198.51.100.1')).toEqual({ admitted: true });
    clock.advance(60_000);
    expect(limiter.admit('192.0.2.200')).toEqual({ admitted: true });
  });

  it('keeps a trusted address subject to its own limit', () => {
    const { limiter } = limiterWith();
    limiter.recordSuccess('198.51.100.1');
    for (let i = 0; i < 3; i += 1) limiter.recordFailure('198.51.100.1');
    expect(limiter.admit('198.51.100.1')).toMatchObject({ admitted: false, limit: 'address' });
  });

  it('trusts an address for trustedForMs after its last right token, not longer', () => {
    const { clock, limiter } = limiterWith({}, { trustedForMs: 3_600_000 });
    limiter.recordSuccess('198.51.100.1');
    clock.advance(3_599_999);
    for (let n = 0; n < 10; n += 1) limiter.recordFailure(`192.0.2.${n}`);
    expect(limiter.admit('198.51.100.1')).toEqual({ admitted: true });
    clock.advance(1);
    expect(limiter.admit('198.51.100.1')).toMatchObject({ admitted: false, limit: 'total' });
  });

  it('trusts for 24 hours by default', () => {
    expect(DEFAULT_TRUSTED_FOR_MS).toBe(86_400_000);
  });
});

describe('bounded memory', () => {
  it('never tracks more than maxTrackedAddresses, dropping the oldest window first', () => {
    const { limiter } = limiterWith({ failuresTotal: 1_000_000 }, { maxTrackedAddresses: 100 });
    let mostTracked = 0;
    for (let n = 0; n < 10_000; n += 1) {
      limiter.recordFailure(`10.0.${n >> 8}.${n & 255}`);
      mostTracked = Math.max(mostTracked, limiter.trackedAddresses);
    }
    expect(mostTracked).toBe(100);
    expect(limiter.trackedAddresses).toBe(100);
    // The newest windows are the ones kept: the last address is still counted, the first was dropped.
    for (let i = 0; i < 2; i += 1) limiter.recordFailure(`10.0.${9_999 >> 8}.${9_999 & 255}`);
    expect(limiter.admit(`10.0.${9_999 >> 8}.${9_999 & 255}`)).toMatchObject({ admitted: false, limit: 'address' });
  });

  it('drops expired windows as new failures arrive', () => {
    const { clock, limiter } = limiterWith({ failuresTotal: 1_000 });
    for (let n = 0; n < 500; n += 1) limiter.recordFailure(`10.0.${n >> 8}.${n & 255}`);
    expect(limiter.trackedAddresses).toBe(500);
    clock.advance(60_000);
    limiter.recordFailure('198.51.100.1');
    expect(limiter.trackedAddresses).toBe(1);
  });

  it('never holds more than maxTrustedAddresses exempt addresses', () => {
    const { limiter } = limiterWith({}, { maxTrustedAddresses: 5 });
    for (let n = 0; n < 50; n += 1) limiter.recordSuccess(`198.51.100.${n}`);
    expect(limiter.trustedAddresses).toBe(5);
    for (let n = 0; n < 10; n += 1) limiter.recordFailure(`192.0.2.${n}`);
    expect(limiter.admit('198.51.100.49')).toEqual({ admitted: true }); // the most recent stay
    expect(limiter.admit('198.51.100.0')).toMatchObject({ admitted: false, limit: 'total' });
  });

  it('keeps the default table far above what the largest total limit can fill in one window', () => {
    // Settings cap ADMIN_AUTH_FAILURES_TOTAL at 4,000: over two fixed total windows at most 8,000
    // untrusted addresses fail within one window length, plus at most 1,000 trusted ones.
    const { limiter } = limiterWith({ failuresPerAddress: 1, failuresTotal: 4_000 }, {});
    for (let n = 0; n < 20_000; n += 1) guess(limiter, `10.${n >> 16}.${(n >> 8) & 255}.${n & 255}`);
    expect(limiter.trackedAddresses).toBe(4_000);
  });

  it.each([
    [{ failuresPerAddress: 0 }, {}],
    [{ failuresTotal: -1 }, {}],
    [{ windowMs: 1.5 }, {}],
    [{}, { maxTrackedAddresses: 0 }],
  ])('refuses nonsense limits %j %j', (limits, options) => {
    expect(() => limiterWith(limits, options)).toThrow(RangeError);
  });
});

describe('clientAddressKey', () => {
  it.each([
    ['203.0.113.7', '203.0.113.7'],
    ['::ffff:203.0.113.7', '203.0.113.7'],
    ['::FFFF:10.0.0.1', '10.0.0.1'],
    ['2001:db8:1:2:3:4:5:6', '2001:db8:1:2::/64'],
    ['2001:db8:1:2::9', '2001:db8:1:2::/64'],
    ['2001:0db8:0001:0002:ffff:ffff:ffff:ffff', '2001:db8:1:2::/64'],
    ['2001:db8::', '2001:db8:0:0::/64'],
    ['::1', '0:0:0:0::/64'],
    ['fe80::1%eth0', 'fe80:0:0:0::/64'],
    ['64:ff9b::192.0.2.33', '64:ff9b:0:0::/64'],
    ['', 'unknown'],
    [undefined, 'unknown'],
  ])('keys %j as %j', (address, key) => {
    expect(clientAddressKey(address)).toBe(key);
  });

  it('gives every address of one IPv6 /64 the same key, and a neighbouring /64 another', () => {
    expect(new Set(['2001:db8:a:b::1', '2001:db8:a:b:ffff::1', '2001:db8:a:b:1:2:3:4'].map(clientAddressKey)).size).toBe(1);
    expect(clientAddressKey('2001:db8:a:c::1')).not.toBe(clientAddressKey('2001:db8:a:b::1'));
  });
});
