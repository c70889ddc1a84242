import { createHash, timingSafeEqual } from 'node:crypto';

/**
 * Compares a presented bearer token with the configured one in constant
 * time. Hashing first makes both sides the same length, so the comparison
 * leaks neither content nor length.
 */
export function adminTokenMatches(authorizationHeader: string | undefined, adminToken: string): boolean {
  const match = /^bearer\s+(\S+)\s*$/i.exec(authorizationHeader ?? '');
  const presented = match?.[1] ?? '';
  const digest = (value: string) => createHash('sha256').update(value).digest();
  return timingSafeEqual(digest(presented), digest(adminToken)) && presented !== '';
}
