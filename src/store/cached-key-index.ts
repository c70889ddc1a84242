import { LRUCache } from 'lru-cache';
import { systemClock, type Clock } from '../domain/clock';
import type { KeyIds, KeyIndex } from './store';

export interface KeyIndexCacheOptions {
  /** Known hashes kept in process; the mapping never changes, so no expiry. */
  maxEntries: number;
  /** Unknown hashes kept this long, so a flood of made-up keys does not reach Redis each time. */
  negativeTtlMs: number;
  maxNegativeEntries: number;
  clock?: Clock;
  /** Told whether each lookup was answered from memory; for metrics. */
  onLookup?: (outcome: 'hit' | 'negative_hit' | 'miss') => void;
}

/**
 * Caches key hash → (key id, account id). That mapping is immutable (a
 * rotated key gets a new hash), so caching it cannot keep a revoked key
 * alive: status, expiry, billing and limits are read on every request.
 */
export class CachedKeyIndex implements KeyIndex {
  private readonly known: LRUCache<string, KeyIds>;
  private readonly unknown: LRUCache<string, true>;
  private readonly negativeCaching: boolean;
  private readonly onLookup: KeyIndexCacheOptions['onLookup'];

  constructor(
    private readonly inner: KeyIndex,
    options: KeyIndexCacheOptions,
  ) {
    this.known = new LRUCache({ max: options.maxEntries });
    this.negativeCaching = options.negativeTtlMs > 0;
    this.onLookup = options.onLookup;
    const clock = options.clock ?? systemClock;
    this.unknown = new LRUCache({
      max: options.maxNegativeEntries,
      ttl: options.negativeTtlMs,
      ttlAutopurge: false,
      // Read the injected clock on every check (no cached "now"), so expiry is exact and testable.
      ttlResolution: 0,
      perf: { now: () => clock.now() },
    });
  }

  async resolveKeyHash(keyHash: string): Promise<KeyIds | null> {
    const cached = this.known.get(keyHash);
    if (cached) {
      this.onLookup?.('hit');
      return cached;
    }
    if (this.negativeCaching && this.unknown.get(keyHash)) {
      this.onLookup?.('negative_hit');
      return null;
    }
    this.onLookup?.('miss');
    const ids = await this.inner.resolveKeyHash(keyHash);
    if (ids) this.known.set(keyHash, ids);
    else if (this.negativeCaching) this.unknown.set(keyHash, true);
    return ids;
  }
}
