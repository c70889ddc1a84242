import { systemClock, type Clock } from '../platform/clock';
import type { KeyIds } from '../keys/key-records';
import type { KeyIndex } from './ports';
import { HASH_WORDS, HashSlotTable } from './hash-slot-table';

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
 * Bytes of ids one entry holds. Every pair the service mints fits: a key id
 * is `key_` + 16 base62 characters (key-minting.ts) and an account id at
 * most 64 characters (admin-schemas.ts), 84 together. A pair that does not
 * fit (only records written by something else could hold one) is not
 * cached: it is resolved by the store every time, never truncated.
 */
export const MAX_CACHED_ID_BYTES = 84;
/**
 * Id bytes an entry's slot holds: a key id (20 bytes) and an account id of up to 36 (a UUID) fit. The bytes of a
 * longer pair past these go to an overflow table, made for the first such pair. Slots of all 84 bytes held 5.6 MB
 * more at 200,000 entries, which pairs of this service's usual ids never use.
 */
const INLINE_ID_BYTES = 56;
/** Per entry: the key id's length, the account id's length, then both ids (their first INLINE_ID_BYTES). */
const ID_SLOT_BYTES = 2 + INLINE_ID_BYTES;
/** Per entry, in the overflow table: the rest of a longer pair. */
const OVERFLOW_ID_BYTES = MAX_CACHED_ID_BYTES - INLINE_ID_BYTES;

/** A key id length no cached mapping has (remember() refuses empty ids): the entry was forgotten. */
const FORGOTTEN = 0;

/** The only form the cache keys on: what hashCustomerKey returns. Anything else goes to the store uncached. */
const SHA256_HEX = /^[0-9a-f]{64}$/;

/**
 * Caches key hash → (key id, account id). That mapping is immutable (a
 * rotated key gets a new hash), so caching it cannot keep a revoked key
 * alive: status, expiry, billing and limits are read on every request.
 *
 * Both the known hashes and the recently unknown ones live in
 * HashSlotTables: the hash and the ids (or the expiry) of an entry are bytes
 * in typed arrays, not JavaScript objects. With 200,000 entries as strings
 * in a Map, every major GC marked and every compaction moved them all, and
 * its pauses were the Check path's latency tail.
 */
export class CachedKeyIndex implements KeyIndex {
  private readonly known: HashSlotTable;
  private readonly knownIds: Buffer;
  /** The bytes of longer pairs past INLINE_ID_BYTES, by entry; made when the first such pair is cached. */
  private knownIdsOverflow: Buffer | undefined;
  private readonly unknown: HashSlotTable | undefined;
  private readonly unknownUntil: Float64Array;
  private readonly negativeTtlMs: number;
  private readonly clock: Clock;
  private readonly onLookup: KeyIndexCacheOptions['onLookup'];
  /**
   * What the Check path keeps with a known entry, by entry number (a restricted key's compiled restrictions,
   * src/check/restrictions-cache.ts): read in the entry the lookup has just found, rather than in a structure of its
   * own as large as this one, and let go with the entry. Made on the first attach: one slot per entry, no object.
   */
  private attachments: unknown[] | undefined;
  /**
   * The hash the last lookup found or stored, and its entry: a Check reads its key's attachment right after its
   * lookup, and usually no other lookup has run in between, so it is read without hashing and probing again (that
   * second probe cost 0.8 to 1.8 µs with 200,000 keys, mostly cache misses). Cleared whenever an entry is claimed or
   * forgotten, so it never names an entry that now holds another hash.
   */
  private lastHash: string | undefined;
  private lastEntry = -1;
  /** The hash being looked up, as bytes and as the words the tables compare; rewritten by every lookup. */
  private readonly hashBytes: Buffer;
  private readonly hashWords: Uint32Array;

  constructor(
    private readonly inner: KeyIndex,
    options: KeyIndexCacheOptions,
  ) {
    this.known = new HashSlotTable(options.maxEntries);
    this.knownIds = Buffer.alloc(options.maxEntries * ID_SLOT_BYTES);
    this.negativeTtlMs = options.negativeTtlMs;
    this.unknown = options.negativeTtlMs > 0 ? new HashSlotTable(options.maxNegativeEntries) : undefined;
    this.unknownUntil = new Float64Array(this.unknown ? options.maxNegativeEntries : 0);
    this.clock = options.clock ?? systemClock;
    this.onLookup = options.onLookup;
    const words = new ArrayBuffer(HASH_WORDS * 4);
    this.hashBytes = Buffer.from(words);
    this.hashWords = new Uint32Array(words);
  }

  async resolveKeyHash(keyHash: string): Promise<KeyIds | null> {
    if (!SHA256_HEX.test(keyHash)) {
      this.onLookup?.('miss');
      return this.inner.resolveKeyHash(keyHash);
    }
    this.hashBytes.write(keyHash, 'hex');
    const entry = this.known.find(this.hashWords);
    if (entry >= 0 && this.knownIds[entry * ID_SLOT_BYTES] !== FORGOTTEN) {
      this.known.touch(entry);
      this.onLookup?.('hit');
      this.lastHash = keyHash;
      this.lastEntry = entry;
      return this.idsAt(entry);
    }
    if (this.unknown) {
      const negative = this.unknown.find(this.hashWords);
      if (negative >= 0 && this.unknownUntil[negative]! > this.clock.now()) {
        this.unknown.touch(negative);
        this.onLookup?.('negative_hit');
        return null;
      }
    }
    this.onLookup?.('miss');
    const ids = await this.inner.resolveKeyHash(keyHash);
    // Other lookups ran while the store answered: the hash is written again.
    this.hashBytes.write(keyHash, 'hex');
    if (ids) this.remember(keyHash, ids);
    else if (this.unknown) {
      const negative = this.unknown.claim(this.hashWords, this.isExpired);
      this.unknownUntil[negative] = this.clock.now() + this.negativeTtlMs;
    }
    return ids;
  }

  /**
   * The entry stays in the table (removing one from the middle of a probe run
   * is the eviction's job) with a key id length no mapping has: looked up, it
   * is a miss, and the store's answer is written over it.
   */
  forget(keyHash: string): void {
    if (!SHA256_HEX.test(keyHash)) return;
    this.lastHash = undefined;
    this.hashBytes.write(keyHash, 'hex');
    const entry = this.known.find(this.hashWords);
    if (entry >= 0) {
      this.knownIds[entry * ID_SLOT_BYTES] = FORGOTTEN;
      if (this.attachments) this.attachments[entry] = undefined;
    }
  }

  /** What attach() left with the cached entry of this hash; undefined when none, or when the hash is not cached. */
  attachment(keyHash: string): unknown {
    if (this.attachments === undefined) return undefined;
    const entry = this.knownEntry(keyHash);
    return entry < 0 ? undefined : this.attachments[entry];
  }

  /** Keeps `value` with the cached entry of this hash until the entry goes; nothing when the hash is not cached. */
  attach(keyHash: string, value: unknown): void {
    const entry = this.knownEntry(keyHash);
    if (entry < 0) return;
    this.attachments ??= new Array<unknown>(this.known.capacity);
    this.attachments[entry] = value;
  }

  private knownEntry(keyHash: string): number {
    if (keyHash === this.lastHash) return this.lastEntry;
    if (!SHA256_HEX.test(keyHash)) return -1;
    this.hashBytes.write(keyHash, 'hex');
    const entry = this.known.find(this.hashWords);
    return entry >= 0 && this.knownIds[entry * ID_SLOT_BYTES] !== FORGOTTEN ? entry : -1;
  }

  private readonly isExpired = (entry: number): boolean => this.unknownUntil[entry]! <= this.clock.now();

  private remember(keyHash: string, ids: KeyIds): void {
    const { keyId, accountId } = ids;
    // A claim may take the last hash's entry for this one (eviction): the memo goes first, whatever happens next.
    this.lastHash = undefined;
    if (!fitsSlot(keyId, accountId)) return;
    const entry = this.known.claim(this.hashWords);
    this.lastHash = keyHash;
    this.lastEntry = entry;
    // A new entry, or one taken from another hash: nothing of the former stays with it.
    if (this.attachments) this.attachments[entry] = undefined;
    const at = entry * ID_SLOT_BYTES;
    this.knownIds[at] = keyId.length;
    this.knownIds[at + 1] = accountId.length;
    if (keyId.length + accountId.length <= INLINE_ID_BYTES) {
      this.knownIds.write(keyId, at + 2, 'latin1');
      this.knownIds.write(accountId, at + 2 + keyId.length, 'latin1');
      return;
    }
    const pair = keyId + accountId;
    this.knownIds.write(pair, at + 2, INLINE_ID_BYTES, 'latin1');
    this.knownIdsOverflow ??= Buffer.allocUnsafe(this.known.capacity * OVERFLOW_ID_BYTES);
    this.knownIdsOverflow.write(pair.slice(INLINE_ID_BYTES), entry * OVERFLOW_ID_BYTES, 'latin1');
  }

  private idsAt(entry: number): KeyIds {
    const at = entry * ID_SLOT_BYTES;
    const keyIdLength = this.knownIds[at]!;
    const accountIdLength = this.knownIds[at + 1]!;
    if (keyIdLength + accountIdLength <= INLINE_ID_BYTES) {
      const keyIdEnd = at + 2 + keyIdLength;
      return {
        keyId: this.knownIds.toString('latin1', at + 2, keyIdEnd),
        accountId: this.knownIds.toString('latin1', keyIdEnd, keyIdEnd + accountIdLength),
      };
    }
    const rest = entry * OVERFLOW_ID_BYTES;
    const pair =
      this.knownIds.toString('latin1', at + 2, at + 2 + INLINE_ID_BYTES) +
      this.knownIdsOverflow!.toString('latin1', rest, rest + keyIdLength + accountIdLength - INLINE_ID_BYTES);
    return { keyId: pair.slice(0, keyIdLength), accountId: pair.slice(keyIdLength) };
  }
}

/**
 * Whether both ids fit one entry and read back exactly: non-empty, printable
 * ASCII without spaces (ids are letters, digits, `_` and `-`; the Redis index
 * separates them by a space), and MAX_CACHED_ID_BYTES together.
 */
function fitsSlot(keyId: string, accountId: string): boolean {
  if (keyId.length === 0 || accountId.length === 0 || keyId.length + accountId.length > MAX_CACHED_ID_BYTES) return false;
  return isPrintableAscii(keyId) && isPrintableAscii(accountId);
}

function isPrintableAscii(text: string): boolean {
  for (let i = 0; i < text.length; i += 1) {
    const code = text.charCodeAt(i);
    if (code <= 0x20 || code >= 0x7f) return false;
  }
  return true;
}
