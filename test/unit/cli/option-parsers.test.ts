import { InvalidArgumentError } from 'commander';
import {
  deadlineSecondsOption,
  describeDuration,
  graceOption,
  idempotencyKeyOption,
  isoTimeOption,
  MAX_GRACE_SECONDS,
  parseDuration,
} from '../../../src/cli/option-parsers';

describe('parseDuration', () => {
  it.each([
    ['0', 0],
    ['0s', 0],
    ['45', 45],
    ['30s', 30],
    ['15m', 900],
    ['1h', 3600],
    ['24h', 86_400],
    ['7d', 604_800],
    [' 2h ', 7200],
  ])('%j is %d seconds', (text, seconds) => {
    expect(parseDuration(text)).toBe(seconds);
  });

  it.each(['', '-1', '-1h', '1.5h', '1w', 'h', '1 h', '1H', 'soon', '1h30m', '99999999999999999999d'])('refuses %j', (text) => {
    expect(parseDuration(text)).toBeUndefined();
  });
});

describe('describeDuration', () => {
  it.each([
    [0, '0s'],
    [45, '45s'],
    [90, '90s'],
    [900, '15m'],
    [5400, '90m'],
    [3600, '1h'],
    [86_400, '1d'],
    [604_800, '7d'],
  ])('%d seconds is %j', (seconds, text) => {
    expect(describeDuration(seconds)).toBe(text);
  });
});

describe('graceOption (--grace)', () => {
  it('accepts 0 to 7d', () => {
    expect(graceOption('0')).toBe(0);
    expect(graceOption('1h')).toBe(3600);
    expect(graceOption('7d')).toBe(MAX_GRACE_SECONDS);
    expect(graceOption(String(MAX_GRACE_SECONDS))).toBe(MAX_GRACE_SECONDS);
  });

  it('refuses more than 7d, naming the maximum', () => {
    expect(() => graceOption('8d')).toThrow(InvalidArgumentError);
    expect(() => graceOption('169h')).toThrow('at most 7d');
    expect(() => graceOption(String(MAX_GRACE_SECONDS + 1))).toThrow('at most 7d');
  });

  it('refuses what is not a duration, saying what is', () => {
    for (const text of ['-1h', 'tomorrow', '1.5h', '']) {
      expect(() => graceOption(text)).toThrow(/such as 30s, 15m, 1h, 24h or 7d/);
    }
  });
});

describe('isoTimeOption (--expires-at)', () => {
  it.each([
    ['2026-01-31', '2026-01-31T00:00:00.000Z'],
    ['2026-01-31T18:00:00Z', '2026-01-31T18:00:00.000Z'],
    ['2026-01-31T18:00Z', '2026-01-31T18:00:00.000Z'],
    ['2026-01-31T18:00:00.5z', '2026-01-31T18:00:00.500Z'],
    ['2026-01-31T18:00:00+02:00', '2026-01-31T16:00:00.000Z'],
    ['2028-02-29', '2028-02-29T00:00:00.000Z'],
  ])('%j is sent as %j', (text, iso) => {
    expect(isoTimeOption(text)).toBe(iso);
  });

  it.each([
    ['2026-01-31T18:00:00', 'with a zone'],
    ['31/01/2026', 'ISO 8601'],
    ['tomorrow', 'ISO 8601'],
    ['2026-02-30', 'not a day of the calendar'],
    ['2027-02-29', 'not a day of the calendar'],
    ['2026-13-01', 'not a day of the calendar'],
    ['2026-01-31T24:00:00Z', 'not a time of day'],
    ['2026-01-31T23:60Z', 'not a time of day'],
  ])('refuses %j (%s)', (text, says) => {
    expect(() => isoTimeOption(text)).toThrow(InvalidArgumentError);
    expect(() => isoTimeOption(text)).toThrow(says);
  });
});

describe('idempotencyKeyOption (--idempotency-key)', () => {
  it.each(['a', 'invoice 2026-11 #42', '{acct:x}', '~'.repeat(255), '550e8400-e29b-41d4-a716-446655440000'])('takes %j as it is', (key) => {
    expect(idempotencyKeyOption(key)).toBe(key);
  });

  it.each([
    ['', 'the key is empty'],
    ['k'.repeat(256), 'the key is 256 characters long; at most 255 are allowed'],
    ['a\tb', 'the key holds U+0009 at position 2'],
    ['caf\u00e9', 'the key holds U+00E9 at position 4'],
    ['emoji \u{1f511}', 'the key holds U+1F511 at position 7'],
    [' padded', 'the key starts or ends with a space'],
    ['padded ', 'the key starts or ends with a space'],
  ])('refuses %j: %s', (key, reason) => {
    expect(() => idempotencyKeyOption(key)).toThrow(InvalidArgumentError);
    expect(() => idempotencyKeyOption(key)).toThrow(reason);
  });
});

describe('deadlineSecondsOption (check --deadline)', () => {
  it.each([
    ['0.1', 100],
    ['2', 2_000],
    ['0.25', 250],
    ['120', 120_000],
  ])('reads %s s as %d ms', (text, milliseconds) => {
    expect(deadlineSecondsOption(text)).toBe(milliseconds);
  });

  it.each(['0', '0.09', '120.1', '-1', '2s', '', '1e3', 'Infinity'])('refuses %j', (text) => {
    expect(() => deadlineSecondsOption(text)).toThrow(
      new InvalidArgumentError('must be a number of seconds from 0.1 to 120, such as 2 or 0.5'),
    );
  });
});
