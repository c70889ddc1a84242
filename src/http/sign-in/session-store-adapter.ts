import { createHash } from 'node:crypto';
import type { Session } from 'fastify';
import type { SessionStore } from '@fastify/session';
import type { Clock } from '../../platform/clock';
import type { SessionStorage } from './session-storage';
import { parseStoredSession, storageTtlMs, storedFieldsOf, type SessionLifetime } from './sign-in-session';

/** The storage never sees a live session id: only its SHA-256. */
export function sessionIdHash(sessionId: string): string {
  return createHash('sha256').update(sessionId).digest('hex');
}

/**
 * @fastify/session's store interface over the session storage port: entries
 * under the hash of the session id, only the session's own fields (not its
 * cookie options), with a time to live that ends when the session can no
 * longer be used. Idle and maximum age are also checked on every request
 * (customer-server.ts); the time to live only keeps the storage clean.
 */
export function sessionStoreOver(storage: SessionStorage, clock: Clock, lifetime: SessionLifetime): SessionStore {
  return {
    set(sessionId, session, callback) {
      const fields = storedFieldsOf(session);
      const ttlMs = storageTtlMs(fields, clock.now(), lifetime);
      const idHash = sessionIdHash(sessionId);
      const done = ttlMs > 0 ? storage.write(idHash, JSON.stringify(fields), ttlMs) : storage.remove(idHash);
      done.then(() => callback(), callback);
    },
    get(sessionId, callback) {
      storage.read(sessionIdHash(sessionId)).then((text) => {
        const stored = text === null ? null : parseStoredSession(text);
        // A session restored from these fields gets its cookie options from the configuration.
        callback(null, stored as Session | null);
      }, callback);
    },
    destroy(sessionId, callback) {
      storage.remove(sessionIdHash(sessionId)).then(() => callback(), callback);
    },
  };
}
