import { createHash } from 'node:crypto';
import { crc32 } from 'node:zlib';

import {
  DISPLAY_PREFIX_LENGTH,
  KEY_ENVIRONMENTS,
  KEY_LENGTH,
  displayPrefixOf,
  generateCustomerKey,
  hashCustomerKey,
  parseCustomerKey,
} from '../../../src/keys/customer-key';

/** Independent of src/keys/base62.ts on purpose: the test states the format, not the code. */
const ALPHABET = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
const HEAD_LENGTH = 'gk_live_'.length;
const RANDOM_LENGTH = 30;
const CHECKSUM_LENGTH = 6;

function base62Fixed(value: number, width: number): string {
  let out = '';
  let rest = value;
  while (rest > 0) {
    out = ALPHABET[rest % 62] + out;
    rest = Math.floor(rest / 62);
  }
  return out.padStart(width, '0');
}

/** Builds a key with a chosen random part and a correct checksum. */
function keyWithRandomPart(environment: 'live' | 'test', random: string): string {
  const body = `gk_${environment}_${random}`;
  return body + base62Fixed(crc32(body), CHECKSUM_LENGTH);
}

function replaceAt(text: string, index: number, char: string): string {
  return text.slice(0, index) + char + text.slice(index + 1);
}

describe('generated customer keys', () => {
  it.each(KEY_ENVIRONMENTS)('a generated %s key parses ok with its own environment', (environment) => {
    const key = generateCustomerKey(environment);
    expect(parseCustomerKey(key)).toEqual({ ok: true, environment, displayPrefix: key.slice(0, 12) });
  });

  it('has the documented shape gk_<env>_<30 base62><6 base62> and length 44', () => {
    expect(KEY_LENGTH).toBe(44);
    for (const environment of KEY_ENVIRONMENTS) {
      const key = generateCustomerKey(environment);
      expect(key).toHaveLength(44);
      expect(key).toMatch(new RegExp(`^gk_${environment}_[0-9A-Za-z]{${RANDOM_LENGTH + CHECKSUM_LENGTH}}$`));
    }
  });

  it('ends in the CRC32 of everything before it, as 6 base62 characters', () => {
    for (let i = 0; i < 50; i++) {
      const key = generateCustomerKey(i % 2 === 0 ? 'live' : 'test');
      const body = key.slice(0, KEY_LENGTH - CHECKSUM_LENGTH);
      expect(key.slice(-CHECKSUM_LENGTH)).toBe(base62Fixed(crc32(body), CHECKSUM_LENGTH));
    }
  });

  it('parses a hand-built key with a correct checksum, including an all-zero random part', () => {
    const random = 'AbC4'.padEnd(RANDOM_LENGTH, 'x');
    expect(parseCustomerKey(keyWithRandomPart('live', random))).toEqual({
      ok: true,
      environment: 'live',
      displayPrefix: 'gk_live_AbC4',
    });
    expect(parseCustomerKey(keyWithRandomPart('test', '0'.repeat(RANDOM_LENGTH)))).toMatchObject({ ok: true });
  });
});

describe('display prefix', () => {
  it('is the first 12 characters: the head plus 4 random characters', () => {
    expect(DISPLAY_PREFIX_LENGTH).toBe(12);
    const key = keyWithRandomPart('live', 'AbC4'.padEnd(RANDOM_LENGTH, 'Z'));
    expect(displayPrefixOf(key)).toBe('gk_live_AbC4');
  });

  it('of a generated key shows none of the rest of the random part nor the checksum', () => {
    const key = generateCustomerKey('test');
    const prefix = displayPrefixOf(key);
    expect(prefix).toBe(key.slice(0, 12));
    expect(prefix).toMatch(/^gk_test_[0-9A-Za-z]{4}$/);
    expect(key.startsWith(prefix)).toBe(true);
    expect(prefix.length).toBeLessThan(key.length);
  });
});

describe('checksum catches every single-character mutation', () => {
  it.each(KEY_ENVIRONMENTS)('of the random part or checksum of a %s key', (environment) => {
    const key = generateCustomerKey(environment);
    let mutations = 0;
    for (let index = HEAD_LENGTH; index < KEY_LENGTH; index++) {
      for (const char of ALPHABET) {
        if (char === key[index]) continue;
        const mutated = replaceAt(key, index, char);
        const parsed = parseCustomerKey(mutated);
        if (parsed.ok || parsed.problem !== 'checksum') {
          throw new Error(`mutation at ${index} to '${char}' gave ${JSON.stringify(parsed)}`);
        }
        mutations++;
      }
    }
    expect(mutations).toBe((RANDOM_LENGTH + CHECKSUM_LENGTH) * 61);
  });

  it('swapping the environment keeps the shape but fails the checksum', () => {
    const live = generateCustomerKey('live');
    expect(parseCustomerKey(live.replace('gk_live_', 'gk_test_'))).toEqual({ ok: false, problem: 'checksum' });
  });

  it('swapping two different adjacent random characters fails the checksum', () => {
    const key = keyWithRandomPart('live', 'ab'.padEnd(RANDOM_LENGTH, '7'));
    const swapped = key.slice(0, HEAD_LENGTH) + 'ba' + key.slice(HEAD_LENGTH + 2);
    expect(parseCustomerKey(swapped)).toEqual({ ok: false, problem: 'checksum' });
  });
});

describe('malformed keys are refused offline with the problem named', () => {
  const valid = keyWithRandomPart('live', 'Q'.repeat(RANDOM_LENGTH));

  it.each([
    ['another environment', valid.replace('gk_live_', 'gk_prod_')],
    ['upper-case prefix', valid.replace('gk_live_', 'GK_LIVE_')],
    ['dashes instead of underscores', valid.replace('gk_live_', 'gk-live-')],
    ['another service prefix', valid.replace('gk_live_', 'sk_live_')],
    ['no prefix at all', valid.slice(HEAD_LENGTH)],
    ['leading space', ` ${valid}`],
    ['empty string', ''],
  ])('prefix: %s', (_label, candidate) => {
    expect(parseCustomerKey(candidate)).toEqual({ ok: false, problem: 'prefix' });
  });

  it.each([
    ['one character short', valid.slice(0, -1)],
    ['one character long', `${valid}A`],
    ['head only', 'gk_live_'],
    ['trailing space', `${valid} `],
    ['random part without checksum', valid.slice(0, KEY_LENGTH - CHECKSUM_LENGTH)],
  ])('length: %s', (_label, candidate) => {
    expect(parseCustomerKey(candidate)).toEqual({ ok: false, problem: 'length' });
  });

  it.each(['-', '_', '+', '/', '=', '.', ' ', 'é', ','])('alphabet: "%s" inside the random part', (char) => {
    expect(parseCustomerKey(replaceAt(valid, HEAD_LENGTH + 5, char))).toEqual({ ok: false, problem: 'alphabet' });
  });

  it('alphabet: a non-base62 character inside the checksum', () => {
    expect(parseCustomerKey(replaceAt(valid, KEY_LENGTH - 1, '-'))).toEqual({ ok: false, problem: 'alphabet' });
  });

  it('the valid key these cases are built from does parse', () => {
    expect(parseCustomerKey(valid)).toMatchObject({ ok: true, environment: 'live' });
  });
});

describe('stored hash', () => {
  it('is the SHA-256 hex digest of the whole key', () => {
    const key = generateCustomerKey('live');
    const hash = hashCustomerKey(key);
    expect(hash).toMatch(/^[0-9a-f]{64}$/);
    expect(hash).toBe(createHash('sha256').update(key, 'utf8').digest('hex'));
  });

  it('is the known SHA-256 of a fixed input', () => {
    expect(hashCustomerKey('abc')).toBe('ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
  });

  it('differs per key and contains no part of the key', () => {
    const a = generateCustomerKey('live');
    const b = generateCustomerKey('live');
    expect(hashCustomerKey(a)).not.toBe(hashCustomerKey(b));
    expect(hashCustomerKey(a)).not.toContain(a.slice(HEAD_LENGTH, HEAD_LENGTH + 8));
  });

  it('is stable for the same key', () => {
    const key = generateCustomerKey('test');
    expect(hashCustomerKey(key)).toBe(hashCustomerKey(`${key}`));
  });
});

describe('randomness', () => {
  const keys = Array.from({ length: 1000 }, (_, i) => generateCustomerKey(i % 2 === 0 ? 'live' : 'test'));
  const randomParts = keys.map((key) => key.slice(HEAD_LENGTH, HEAD_LENGTH + RANDOM_LENGTH));

  it('1000 generated keys (and their random parts) are all distinct', () => {
    expect(new Set(keys).size).toBe(1000);
    expect(new Set(randomParts).size).toBe(1000);
  });

  it('1000 generated keys have distinct display prefixes far more often than not', () => {
    // 62^4 ≈ 14.8M possible prefixes: a handful of collisions at most.
    expect(new Set(keys.map(displayPrefixOf)).size).toBeGreaterThan(990);
  });

  it('the random part uses the whole base62 alphabet and nothing else', () => {
    const seen = new Set(randomParts.join(''));
    expect([...seen].sort().join('')).toBe([...ALPHABET].sort().join(''));
  });

  it('no character is grossly over- or under-represented (no modulo bias toward the first letters)', () => {
    const counts = new Map<string, number>();
    for (const char of randomParts.join('')) counts.set(char, (counts.get(char) ?? 0) + 1);
    const expected = (1000 * RANDOM_LENGTH) / 62; // ≈ 484, sd ≈ 22
    for (const char of ALPHABET) {
      const count = counts.get(char) ?? 0;
      expect(count).toBeGreaterThan(expected * 0.7);
      expect(count).toBeLessThan(expected * 1.3);
    }
  });

  it('the random part of a generated key carries at least 128 bits', () => {
    // Length from the module's own KEY_LENGTH, alphabet size as observed above.
    const randomLength = KEY_LENGTH - HEAD_LENGTH - CHECKSUM_LENGTH;
    const alphabetSize = new Set(randomParts.join('')).size;
    expect(randomLength * Math.log2(alphabetSize)).toBeGreaterThanOrEqual(128);
  });
});
