/**
 * Where the customer dashboard keeps its sign-in sessions: Redis, shared by
 * every replica (so any replica serves any session), or the embedded memory
 * store. Entries are named by a hash of the session id, never the id itself,
 * so a dump of the storage holds no live session id.
 */
export interface SessionStorage {
  /** The stored data, or null when there is none (never stored, removed, or its time to live passed). */
  read(idHash: string): Promise<string | null>;
  /** Replaces the entry; it disappears on its own after `ttlMs` (≥ 1). */
  write(idHash: string, data: string, ttlMs: number): Promise<void>;
  remove(idHash: string): Promise<void>;
  close(): Promise<void>;
}
