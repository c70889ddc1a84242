import { randomInt } from 'node:crypto';

/** A SHA-256 as eight 32-bit words (its bytes in order, read little-endian). */
export const HASH_WORDS = 8;

/**
 * A fixed number of entry slots, each named by a SHA-256, with no JavaScript
 * object per entry: the hashes sit in one typed array and the lookup index
 * (open addressing, linear probing, at most half full) in another, so the
 * garbage collector has nothing to mark or move however many entries there
 * are. Callers keep what an entry holds in typed arrays of their own, at the
 * entry's number.
 *
 * When every slot is taken, a new hash takes the slot of one chosen by CLOCK
 * (second chance): the hand passes over entries used since it last came by,
 * clearing their mark, and takes the first one that was not, or the first
 * one the caller says is stale. That approximates least-recently-used
 * without any work on a hit beyond setting one byte.
 *
 * The typed arrays are zero-filled allocations, so the memory of slots not
 * yet used is not resident.
 */
export class HashSlotTable {
  private readonly hashes: Uint32Array;
  private readonly usedSinceSweep: Uint8Array;
  /** Entry number + 1 at each position; 0 is free. */
  private readonly index: Int32Array;
  private readonly mask: number;
  /** Positions depend on a per-process secret, so nobody can choose keys that pile up in one probe run. */
  private readonly seedLow = randomInt(2 ** 32 - 1);
  private readonly seedHigh = randomInt(2 ** 32 - 1);
  private entries = 0;
  private hand = 0;

  constructor(readonly capacity: number) {
    if (!Number.isInteger(capacity) || capacity < 1) throw new RangeError(`capacity must be a whole number ≥ 1, got ${capacity}`);
    this.hashes = new Uint32Array(capacity * HASH_WORDS);
    this.usedSinceSweep = new Uint8Array(capacity);
    let positions = 2;
    while (positions < capacity * 2) positions *= 2;
    this.index = new Int32Array(positions);
    this.mask = positions - 1;
  }

  get size(): number {
    return this.entries;
  }

  /** The entry named by `hash`, or -1. */
  find(hash: Uint32Array): number {
    for (let position = this.home(hash, 0); ; position = (position + 1) & this.mask) {
      const stored = this.index[position]!;
      if (stored === 0) return -1;
      if (this.holds(stored - 1, hash)) return stored - 1;
    }
  }

  /** Marks an entry as used, so the next sweep of the hand passes it over. */
  touch(entry: number): void {
    this.usedSinceSweep[entry] = 1;
  }

  /**
   * The entry for `hash`: its own when present, else a free slot, else the
   * slot of the entry CLOCK evicts (`isStale(entry)` true: taken at once).
   * The caller then writes what the entry holds.
   */
  claim(hash: Uint32Array, isStale?: (entry: number) => boolean): number {
    const found = this.find(hash);
    if (found >= 0) return found;
    let entry: number;
    if (this.entries < this.capacity) {
      entry = this.entries;
      this.entries += 1;
    } else {
      entry = this.evict(isStale);
    }
    this.hashes.set(hash, entry * HASH_WORDS);
    this.usedSinceSweep[entry] = 0;
    let position = this.home(hash, 0);
    while (this.index[position] !== 0) position = (position + 1) & this.mask;
    this.index[position] = entry + 1;
    return entry;
  }

  private evict(isStale: ((entry: number) => boolean) | undefined): number {
    for (;;) {
      const entry = this.hand;
      this.hand = entry + 1 === this.capacity ? 0 : entry + 1;
      if (isStale?.(entry) || this.usedSinceSweep[entry] === 0) {
        this.unlink(entry);
        return entry;
      }
      this.usedSinceSweep[entry] = 0;
    }
  }

  /** Frees the entry's index position, shifting later members of its probe run back (no tombstones). */
  private unlink(entry: number): void {
    const offset = entry * HASH_WORDS;
    let free = this.home(this.hashes, offset);
    while (this.index[free] !== entry + 1) free = (free + 1) & this.mask;
    for (let position = (free + 1) & this.mask; this.index[position] !== 0; position = (position + 1) & this.mask) {
      const home = this.home(this.hashes, (this.index[position]! - 1) * HASH_WORDS);
      // The entry at `position` may move back to `free` only if its home is not cyclically within (free, position].
      const reachable = free <= position ? home > free && home <= position : home > free || home <= position;
      if (!reachable) {
        this.index[free] = this.index[position]!;
        free = position;
      }
    }
    this.index[free] = 0;
  }

  private holds(entry: number, hash: Uint32Array): boolean {
    const offset = entry * HASH_WORDS;
    const hashes = this.hashes;
    for (let word = 0; word < HASH_WORDS; word += 1) if (hashes[offset + word] !== hash[word]) return false;
    return true;
  }

  private home(words: Uint32Array, offset: number): number {
    let mixed = Math.imul(words[offset]! ^ this.seedLow, 0x85ebca6b) ^ Math.imul(words[offset + 1]! ^ this.seedHigh, 0xc2b2ae35);
    mixed ^= mixed >>> 16;
    return mixed & this.mask;
  }
}
