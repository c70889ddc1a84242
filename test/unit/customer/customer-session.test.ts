import {
  MAX_PENDING_LOGINS,
  parseStoredSession,
  PENDING_LOGIN_TTL_MS,
  pendingLoginsWithRoom,
  signedInState,
  storageTtlMs,
  storedFieldsOf,
  type PendingLogin,
} from '../../../src/http/sign-in/sign-in-session';

const T0 = Date.parse('2026-11-23T09:00:00Z');
const lifetime = { idleMs: 30 * 60_000, maxAgeMs: 12 * 3_600_000 };
const identity = { issuer: 'https://login.example.com', subject: 'u-1' };
const pending = (startedAtMs: number, state = `s${startedAtMs}`): PendingLogin => ({ state, nonce: 'n', codeVerifier: 'v', startedAtMs });

describe('signedInState', () => {
  it('is signed out without a person, whatever else the session holds', () => {
    expect(signedInState({}, T0, lifetime)).toEqual({ kind: 'signed_out' });
    expect(signedInState({ pendingLogins: [pending(T0)] }, T0, lifetime)).toEqual({ kind: 'signed_out' });
  });

  it('is signed in until the idle timeout has passed since the last request', () => {
    const session = { identity, signedInAtMs: T0, lastSeenAtMs: T0 + 60_000 };
    expect(signedInState(session, T0 + 60_000 + lifetime.idleMs - 1, lifetime)).toEqual({ kind: 'signed_in', identity });
    expect(signedInState(session, T0 + 60_000 + lifetime.idleMs, lifetime)).toEqual({ kind: 'ended', reason: 'idle' });
  });

  it('ends at the maximum age however recent the last request', () => {
    const session = { identity, signedInAtMs: T0, lastSeenAtMs: T0 + lifetime.maxAgeMs - 1 };
    expect(signedInState(session, T0 + lifetime.maxAgeMs - 1, lifetime).kind).toBe('signed_in');
    expect(signedInState(session, T0 + lifetime.maxAgeMs, lifetime)).toEqual({ kind: 'ended', reason: 'max_age' });
  });
});

describe('storageTtlMs', () => {
  it('keeps a signed-in session until whichever end comes first', () => {
    expect(storageTtlMs({ identity, signedInAtMs: T0, lastSeenAtMs: T0 }, T0 + 1_000, lifetime)).toBe(lifetime.idleMs - 1_000);
    const late = T0 + lifetime.maxAgeMs - 60_000;
    expect(storageTtlMs({ identity, signedInAtMs: T0, lastSeenAtMs: late }, late, lifetime)).toBe(60_000);
  });

  it('keeps a session with only pending sign-ins until the newest one expires, and nothing else at all', () => {
    expect(storageTtlMs({ pendingLogins: [pending(T0), pending(T0 + 5_000)] }, T0 + 5_000, lifetime)).toBe(PENDING_LOGIN_TTL_MS);
    expect(storageTtlMs({ _csrf: 'secret' }, T0, lifetime)).toBe(0);
    expect(storageTtlMs({ identity, signedInAtMs: T0 }, T0 + lifetime.maxAgeMs, lifetime)).toBeLessThanOrEqual(0);
  });
});

describe('pendingLoginsWithRoom', () => {
  it('drops expired sign-ins and the oldest beyond the limit, leaving room for one more', () => {
    const now = T0 + PENDING_LOGIN_TTL_MS;
    const logins = [pending(T0), pending(T0 + 1), pending(T0 + 2), pending(T0 + 3), pending(T0 + 4)];
    const kept = pendingLoginsWithRoom(logins, now);
    expect(kept.length).toBe(MAX_PENDING_LOGINS - 1);
    expect(kept.map((login) => login.startedAtMs)).toEqual([T0 + 3, T0 + 4]);
    expect(pendingLoginsWithRoom(undefined, now)).toEqual([]);
  });
});

describe('stored form', () => {
  it('keeps only the session fields, not the cookie options', () => {
    const session = { identity, signedInAtMs: T0, lastSeenAtMs: T0, _csrf: 'c', cookie: { path: '/', secure: true }, other: 1 };
    const stored = JSON.parse(JSON.stringify(storedFieldsOf(session))) as Record<string, unknown>;
    expect(stored).toEqual({ identity, signedInAtMs: T0, lastSeenAtMs: T0, _csrf: 'c' });
    expect(parseStoredSession(JSON.stringify(stored))).toEqual(stored);
  });

  it('reads anything else as no session', () => {
    for (const text of ['', 'not json', '[]', '{"identity":{"issuer":1}}', '{"signedInAtMs":"yesterday"}', 'null']) {
      expect(parseStoredSession(text)).toBeNull();
    }
  });
});
