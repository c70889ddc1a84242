/** Result of reading one `Authorization` header value. */
export type AuthorizationParse = { ok: true; token: string } | { ok: false; problem: 'empty' | 'not_bearer' | 'not_one_token' };

/**
 * `Bearer <token>`: the scheme is case-insensitive (RFC 7235) and exactly one
 * token must follow. Other schemes (Basic, Token, …) are refused rather than
 * guessed at.
 */
export function parseAuthorization(value: string): AuthorizationParse {
  const trimmed = value.trim();
  if (trimmed === '') return { ok: false, problem: 'empty' };
  const space = trimmed.search(/\s/);
  const scheme = space === -1 ? trimmed : trimmed.slice(0, space);
  const rest = space === -1 ? '' : trimmed.slice(space).trim();
  if (scheme.toLowerCase() !== 'bearer') return { ok: false, problem: 'not_bearer' };
  if (rest === '') return { ok: false, problem: 'empty' };
  if (/\s/.test(rest)) return { ok: false, problem: 'not_one_token' };
  return { ok: true, token: rest };
}

/** The token part of any Authorization value, whatever its scheme: for upstream-key scanning. */
export function tokenPartOf(value: string): string {
  const trimmed = value.trim();
  const space = trimmed.search(/\s/);
  return space === -1 ? trimmed : trimmed.slice(space).trim();
}

/**
 * Envoy joins repeated headers with ','. No valid key or bearer token
 * contains a comma, so splitting recovers the individual values.
 */
export function splitRepeatedHeader(value: string): string[] {
  if (!value.includes(',')) {
    // The common case: one value, no array juggling.
    const trimmed = value.trim();
    return trimmed === '' ? [] : [trimmed];
  }
  return value
    .split(',')
    .map((part) => part.trim())
    .filter((part) => part !== '');
}
