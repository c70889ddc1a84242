import { z } from 'zod';
import type { CustomerIdentity } from '../../accounts/customer-identity';

/**
 * What a dashboard sign-in session holds (the customer dashboard's and the
 * operator dashboard's, each in its own cookie and storage keys), and how
 * long it lives. The session id travels in the cookie; everything here stays
 * in the session storage.
 */

/** A sign-in started in this browser and not finished yet: what the identity provider's answer must match. */
export interface PendingLogin {
  state: string;
  nonce: string;
  /** PKCE: the token request proves it comes from whoever started the sign-in. */
  codeVerifier: string;
  startedAtMs: number;
}

declare module 'fastify' {
  interface Session {
    identity?: CustomerIdentity;
    signedInAtMs?: number;
    /** The last request in this session, on the injected clock (rewritten at most every LAST_SEEN_GRANULARITY_MS). */
    lastSeenAtMs?: number;
    pendingLogins?: PendingLogin[];
    /** Operator dashboard only: the roles the identity provider's role claim mapped to at sign-in. */
    operatorRoles?: string[];
    /** @fastify/csrf-protection's per-session secret. */
    _csrf?: string;
  }
}

export interface SessionLifetime {
  /** Ends after this long without a request. */
  idleMs: number;
  /** Ends this long after sign-in, however active. */
  maxAgeMs: number;
}

/** A sign-in must come back from the identity provider within this time. */
export const PENDING_LOGIN_TTL_MS = 10 * 60_000;
/** Sign-ins started in other tabs of the same browser that may still complete. */
export const MAX_PENDING_LOGINS = 3;
/** A page and its burst of API calls cost one session write, not one each; idle expiry is exact to within this. */
export const LAST_SEEN_GRANULARITY_MS = 5_000;

/** The fields the storage keeps; anything else on the session object (its cookie options) is not stored. */
const storedSessionSchema = z.object({
  identity: z
    .object({
      issuer: z.string(),
      subject: z.string(),
      verifiedEmail: z.string().optional(),
      displayName: z.string().optional(),
    })
    .optional(),
  signedInAtMs: z.number().int().optional(),
  lastSeenAtMs: z.number().int().optional(),
  pendingLogins: z
    .array(z.object({ state: z.string(), nonce: z.string(), codeVerifier: z.string(), startedAtMs: z.number().int() }))
    .max(MAX_PENDING_LOGINS)
    .optional(),
  operatorRoles: z.array(z.string()).max(10).optional(),
  _csrf: z.string().optional(),
});

export type StoredSession = z.output<typeof storedSessionSchema>;

/** The stored fields of a session object (for writing). */
export function storedFieldsOf(session: StoredSession): StoredSession {
  const { identity, signedInAtMs, lastSeenAtMs, pendingLogins, operatorRoles, _csrf } = session;
  return { identity, signedInAtMs, lastSeenAtMs, pendingLogins, ...(operatorRoles ? { operatorRoles } : {}), _csrf };
}

/** A stored entry read back; null when it is not what this code writes (treated as no session). */
export function parseStoredSession(text: string): StoredSession | null {
  try {
    const parsed = storedSessionSchema.safeParse(JSON.parse(text));
    return parsed.success ? parsed.data : null;
  } catch {
    return null;
  }
}

export type SignedInState =
  | { kind: 'signed_in'; identity: CustomerIdentity }
  | { kind: 'signed_out' }
  /** The session had a person in it, and its time is up. */
  | { kind: 'ended'; reason: 'idle' | 'max_age' };

export function signedInState(session: StoredSession, nowMs: number, lifetime: SessionLifetime): SignedInState {
  const { identity, signedInAtMs, lastSeenAtMs } = session;
  if (!identity || signedInAtMs === undefined) return { kind: 'signed_out' };
  if (nowMs - signedInAtMs >= lifetime.maxAgeMs) return { kind: 'ended', reason: 'max_age' };
  if (nowMs - (lastSeenAtMs ?? signedInAtMs) >= lifetime.idleMs) return { kind: 'ended', reason: 'idle' };
  return { kind: 'signed_in', identity };
}

/**
 * How long the storage should keep an entry: until the session can no longer
 * be used (idle or maximum age, whichever comes first), or until its last
 * pending sign-in expires. Zero or less: nothing worth keeping.
 */
export function storageTtlMs(session: StoredSession, nowMs: number, lifetime: SessionLifetime): number {
  const ends: number[] = [];
  if (session.identity && session.signedInAtMs !== undefined) {
    ends.push(Math.min(session.signedInAtMs + lifetime.maxAgeMs, (session.lastSeenAtMs ?? session.signedInAtMs) + lifetime.idleMs));
  }
  for (const pending of session.pendingLogins ?? []) ends.push(pending.startedAtMs + PENDING_LOGIN_TTL_MS);
  return ends.length === 0 ? 0 : Math.max(...ends) - nowMs;
}

/** The pending sign-ins still within their time, newest last, with room for one more. */
export function pendingLoginsWithRoom(pending: readonly PendingLogin[] | undefined, nowMs: number): PendingLogin[] {
  const live = (pending ?? []).filter((login) => nowMs - login.startedAtMs < PENDING_LOGIN_TTL_MS);
  return live.slice(Math.max(0, live.length - (MAX_PENDING_LOGINS - 1)));
}
