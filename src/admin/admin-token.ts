import { createHash, timingSafeEqual } from 'node:crypto';

/**
 * Compares a presented bearer token with the configured one in constant
 * time. Hashing first makes both sides the same length, so the comparison
 * leaks neither content nor length.
 */
export function adminTokenMatches(authorizationHeader: string | undefined, adminToken: string): boolean {
  const presented = bearerTokenOf(authorizationHeader) ?? '';
  const digest = (value: string) => createHash('sha256').update(value).digest();
  return timingSafeEqual(digest(presented), digest(adminToken)) && presented !== '';
}

/** The token of an `Authorization: Bearer <token>` header; undefined when there is none. */
export function bearerTokenOf(authorizationHeader: string | undefined): string | undefined {
  return /^bearer\s+(\S+)\s*$/i.exec(authorizationHeader ?? '')?.[1];
}
