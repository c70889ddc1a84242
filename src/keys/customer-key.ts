import * as crypto from 'node:crypto';
import { crc32 } from 'node:zlib';
import { encodeBase62, isBase62, randomBase62 } from './base62';

/**
 * Customer key format: gk_<env>_<30 random base62><6 base62 checksum>.
 *  - `gk_` is our own service prefix; no upstream provider uses it, so secret
 *    scanners and our own upstream-key detector can tell them apart.
 *  - 30 base62 characters carry ~178 bits of randomness.
 *  - The CRC32 checksum (as GitHub tokens do) lets us refuse typos and
 *    made-up strings offline, without a Redis round trip.
 * `_` separates parts because it is not in base62 and a double-click selects
 * the whole key.
 */
export const KEY_SERVICE_PREFIX = 'gk';
export const KEY_ENVIRONMENTS = ['live', 'test'] as const;
export type KeyEnvironment = (typeof KEY_ENVIRONMENTS)[number];

const RANDOM_LENGTH = 30;
const CHECKSUM_LENGTH = 6;
const HEAD_LENGTH = `${KEY_SERVICE_PREFIX}_live_`.length; // both environments are 4 letters
export const KEY_LENGTH = HEAD_LENGTH + RANDOM_LENGTH + CHECKSUM_LENGTH;
/** How many characters of a key may be shown: the head plus 4 random characters. */
export const DISPLAY_PREFIX_LENGTH = HEAD_LENGTH + 4;

export type KeyFormatProblem = 'prefix' | 'length' | 'alphabet' | 'checksum';

export type ParsedKey = { ok: true; environment: KeyEnvironment; displayPrefix: string } | { ok: false; problem: KeyFormatProblem };

function checksumOf(body: string): string {
  return encodeBase62(crc32(body), CHECKSUM_LENGTH);
}

export function generateCustomerKey(environment: KeyEnvironment): string {
  const body = `${KEY_SERVICE_PREFIX}_${environment}_${randomBase62(RANDOM_LENGTH)}`;
  return body + checksumOf(body);
}

export function displayPrefixOf(key: string): string {
  return key.slice(0, DISPLAY_PREFIX_LENGTH);
}

/** Validates shape and checksum only; says nothing about whether the key exists. */
const KEY_HEADS: readonly (readonly [KeyEnvironment, string])[] = KEY_ENVIRONMENTS.map((env) => [env, `${KEY_SERVICE_PREFIX}_${env}_`]);

export function parseCustomerKey(candidate: string): ParsedKey {
  const environment = KEY_HEADS.find(([, head]) => candidate.startsWith(head))?.[0];
  if (!environment) return { ok: false, problem: 'prefix' };
  if (candidate.length !== KEY_LENGTH) return { ok: false, problem: 'length' };
  const tail = candidate.slice(HEAD_LENGTH);
  if (!isBase62(tail)) return { ok: false, problem: 'alphabet' };
  const body = candidate.slice(0, KEY_LENGTH - CHECKSUM_LENGTH);
  if (checksumOf(body) !== candidate.slice(KEY_LENGTH - CHECKSUM_LENGTH)) {
    return { ok: false, problem: 'checksum' };
  }
  return { ok: true, environment, displayPrefix: displayPrefixOf(candidate) };
}

/** Keys are stored only as this hash. Unsalted is fine: the key has ~178 bits of entropy. */
export function hashCustomerKey(key: string): string {
  // crypto.hash (Node >= 20.12) is the one-shot form: no Hash object per call.
  return crypto.hash ? crypto.hash('sha256', key, 'hex') : crypto.createHash('sha256').update(key).digest('hex');
}

/** Anything that looks like one of our keys, for scrubbing free text such as paths. */
export const CUSTOMER_KEY_PATTERN = new RegExp(`${KEY_SERVICE_PREFIX}_(?:live|test)_[0-9A-Za-z]{8,}`, 'g');
