import { LRUCache } from 'lru-cache';
import { systemClock, type Clock } from '../domain/clock';
import type { KeyIds } from '../domain/key-records';
import type { KeyIndex } from '../domain/authorization';

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
  /** Compact entries (see compactHash, packIds): about 150 bytes each instead of 290, so 200k cached keys fit the memory goal. */
  private readonly known: LRUCache<string, string>;
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
    const entry = compactHash(keyHash);
    const cached = this.known.get(entry);
    if (cached !== undefined) {
      this.onLookup?.('hit');
      return unpackIds(cached);
    }
    if (this.negativeCaching && this.unknown.get(entry)) {
      this.onLookup?.('negative_hit');
      return null;
    }
    this.onLookup?.('miss');
    const ids = await this.inner.resolveKeyHash(keyHash);
    if (ids) this.known.set(entry, packIds(ids));
    else if (this.negativeCaching) this.unknown.set(entry, true);
    return ids;
  }
}

/**
 * A SHA-256 in hex (64 characters, 80 bytes on the heap) as its 32 raw bytes
 * in a one-byte string (48 bytes). Anything that is not 64 hex digits is
 * kept as given: it cannot be mistaken for a 32-character compact form.
 */
function compactHash(keyHash: string): string {
  if (keyHash.length !== 64) return keyHash;
  const bytes = Buffer.from(keyHash, 'hex');
  return bytes.length === 32 ? bytes.toString('latin1') : keyHash;
}

/**
 * Ids are letters, digits, `_` and `-` (admin-schemas.ts), so one space
 * separates them, as in the Redis index entry. The latin1 round trip yields a
 * flat string that holds no reference to the store's reply or to its parts.
 */
function packIds(ids: KeyIds): string {
  return Buffer.from(`${ids.keyId} ${ids.accountId}`, 'latin1').toString('latin1');
}

function unpackIds(packed: string): KeyIds {
  const space = packed.indexOf(' ');
  return { keyId: packed.slice(0, space), accountId: packed.slice(space + 1) };
}
