import { DEFAULT_ADMIN_AUTH_LIMITS } from '../../../src/admin/admin-auth-limits';
import { problemsOf, settingsOf } from '../../support/settings-results';

const WHITESPACE_PROBLEM =
  "ADMIN_TOKEN: must not contain whitespace: 'Authorization: Bearer <token>' carries one word, so such a token could never match";

describe('ADMIN_TOKEN with whitespace inside', () => {
  it.each([
    ['a space', 'correct horse battery staple'],
    ['a tab', 'abcdefgh\tijklmnopq'],
    ['a newline (a pasted file with two lines)', 'abcdefghijklmnop\nqrstuvwxyz012345'],
    ['a non-breaking space', 'abcdefgh\u00a0ijklmnopq'],
  ])('is refused at start-up when it holds %s, saying why it could never match', (_label, token) => {
    expect(problemsOf({ ADMIN_TOKEN: token })).toEqual([WHITESPACE_PROBLEM]);
  });

  it('is listed together with the other problems of the same token and of other settings', () => {
    expect(problemsOf({ ADMIN_TOKEN: 'too short', LOG_LEVEL: 'loud' })).toEqual([
      'ADMIN_TOKEN: must be at least 16 characters (use a long random value)',
      WHITESPACE_PROBLEM,
      expect.stringMatching(/^LOG_LEVEL: /),
    ]);
  });

  it('is not confused with whitespace around the token, which is trimmed', () => {
    expect(settingsOf({ ADMIN_TOKEN: `\t ${'a'.repeat(32)} \n` }).adminToken).toBe('a'.repeat(32));
  });

  it('never reaches the message itself (the problem names the rule, not the value)', () => {
    const token = 'secret part one secret part two';
    expect(problemsOf({ ADMIN_TOKEN: token }).join('\n')).not.toContain('secret part');
  });
});

describe('admin authentication limits', () => {
  it('defaults to 10 wrong tokens per address and 100 in total per minute', () => {
    expect(settingsOf({}).adminAuthLimits).toEqual({ failuresPerAddress: 10, failuresTotal: 100, windowMs: 60_000 });
    expect(DEFAULT_ADMIN_AUTH_LIMITS).toEqual({ failuresPerAddress: 10, failuresTotal: 100, windowMs: 60_000 });
  });

  it('reads the three settings, blank meaning the default', () => {
    expect(
      settingsOf({ ADMIN_AUTH_FAILURES_PER_ADDRESS: '5', ADMIN_AUTH_FAILURES_TOTAL: '4000', ADMIN_AUTH_FAILURE_WINDOW_MS: '86400000' })
        .adminAuthLimits,
    ).toEqual({ failuresPerAddress: 5, failuresTotal: 4_000, windowMs: 86_400_000 });
    expect(
      settingsOf({ ADMIN_AUTH_FAILURES_PER_ADDRESS: ' ', ADMIN_AUTH_FAILURES_TOTAL: '', ADMIN_AUTH_FAILURE_WINDOW_MS: '' }).adminAuthLimits,
    ).toEqual(DEFAULT_ADMIN_AUTH_LIMITS);
  });

  it('accepts the bounds', () => {
    expect(
      settingsOf({ ADMIN_AUTH_FAILURES_PER_ADDRESS: '1', ADMIN_AUTH_FAILURES_TOTAL: '1', ADMIN_AUTH_FAILURE_WINDOW_MS: '1000' })
        .adminAuthLimits,
    ).toEqual({
      failuresPerAddress: 1,
      failuresTotal: 1,
      windowMs: 1_000,
    });
    expect(
      settingsOf({ ADMIN_AUTH_FAILURES_PER_ADDRESS: '1000', ADMIN_AUTH_FAILURES_TOTAL: '1000' }).adminAuthLimits.failuresPerAddress,
    ).toBe(1_000);
  });

  it.each([
    ['ADMIN_AUTH_FAILURES_PER_ADDRESS', '0'],
    ['ADMIN_AUTH_FAILURES_PER_ADDRESS', '1001'],
    ['ADMIN_AUTH_FAILURES_PER_ADDRESS', '2.5'],
    ['ADMIN_AUTH_FAILURES_PER_ADDRESS', 'ten'],
    ['ADMIN_AUTH_FAILURES_TOTAL', '0'],
    ['ADMIN_AUTH_FAILURES_TOTAL', '4001'],
    ['ADMIN_AUTH_FAILURE_WINDOW_MS', '999'],
    ['ADMIN_AUTH_FAILURE_WINDOW_MS', '86400001'],
    ['ADMIN_AUTH_FAILURE_WINDOW_MS', '-60000'],
  ])('refuses %s=%s, naming it', (name, value) => {
    expect(problemsOf({ [name]: value })).toEqual([expect.stringMatching(new RegExp(`^${name}: `))]);
  });

  it('refuses a per-address limit above the total, which would never be reached', () => {
    expect(problemsOf({ ADMIN_AUTH_FAILURES_PER_ADDRESS: '20', ADMIN_AUTH_FAILURES_TOTAL: '10' })).toEqual([
      'ADMIN_AUTH_FAILURES_PER_ADDRESS: must not exceed ADMIN_AUTH_FAILURES_TOTAL (got 20 > 10)',
    ]);
  });

  it('is frozen with the rest of the settings', () => {
    const limits = settingsOf({}).adminAuthLimits;
    expect(limits).toBeInstanceOf(Object);
    expect(Object.isFrozen(limits)).toBe(true);
  });
});
