import { randomBytes } from 'node:crypto';

export const BASE62_ALPHABET = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
const BASE62_CHAR = /^[0-9A-Za-z]*$/;

export function isBase62(text: string): boolean {
  return BASE62_CHAR.test(text);
}

/** Fixed-width base62 of a non-negative integer, left-padded with '0'. */
export function encodeBase62(value: number, width: number): string {
  let out = '';
  let rest = value;
  while (rest > 0) {
    out = BASE62_ALPHABET[rest % 62] + out;
    rest = Math.floor(rest / 62);
  }
  return out.padStart(width, '0');
}

/** Uniformly random base62 text (rejection sampling, so no modulo bias). */
export function randomBase62(length: number): string {
  let out = '';
  while (out.length < length) {
    for (const byte of randomBytes(length * 2)) {
      if (byte < 248) out += BASE62_ALPHABET[byte % 62];
      if (out.length === length) break;
    }
  }
  return out;
}
