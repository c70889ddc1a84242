import { systemClock, type Clock } from '../platform/clock';
import type { SessionStorage } from '../http/sign-in/session-storage';

/** Sessions kept at once; past it, the entry closest to expiry goes first. */
const DEFAULT_MAX_SESSIONS = 100_000;

interface Entry {
  data: string;
  expiresAtMs: number;
}

/**
 * Customer dashboard sessions in process, for the embedded store: lost on a
 * restart and not shared between replicas (the same limits as MemoryStore).
 * Expiry follows the injected clock.
 */
export class MemorySessionStorage implements SessionStorage {
  private readonly entries = new Map<string, Entry>();

  constructor(
    private readonly clock: Clock = systemClock,
    private readonly maxSessions = DEFAULT_MAX_SESSIONS,
  ) {}

  async read(idHash: string): Promise<string | null> {
    const entry = this.entries.get(idHash);
    if (!entry) return null;
    if (entry.expiresAtMs <= this.clock.now()) {
      this.entries.delete(idHash);
      return null;
    }
    return entry.data;
  }

  async write(idHash: string, data: string, ttlMs: number): Promise<void> {
    this.entries.delete(idHash);
    if (this.entries.size >= this.maxSessions) this.makeRoom();
    this.entries.set(idHash, { data, expiresAtMs: this.clock.now() + Math.max(1, ttlMs) });
  }

  async remove(idHash: string): Promise<void> {
    this.entries.delete(idHash);
  }

  async close(): Promise<void> {
    this.entries.clear();
  }

  /** Drops every expired entry; if none had expired, the one that expires soonest. */
  private makeRoom(): void {
    const now = this.clock.now();
    let soonest: [string, number] | undefined;
    for (const [idHash, entry] of this.entries) {
      if (entry.expiresAtMs <= now) this.entries.delete(idHash);
      else if (!soonest || entry.expiresAtMs < soonest[1]) soonest = [idHash, entry.expiresAtMs];
    }
    if (this.entries.size >= this.maxSessions && soonest) this.entries.delete(soonest[0]);
  }
}
