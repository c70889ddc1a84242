import { createHash } from 'node:crypto';
import fc from 'fast-check';
import { ManualClock } from '../../../src/platform/clock';
import { CachedKeyIndex, MAX_CACHED_ID_BYTES } from '../../../src/check/cached-key-index';
import type { KeyIds } from '../../../src/keys/key-records';
import type { KeyIndex } from '../../../src/check/ports';

/** The cache keys on what hashCustomerKey returns: a SHA-256 in lower-case hex. */
const sha = (text: string) => createHash('sha256').update(text).digest('hex');

class ScriptedIndex implements KeyIndex {
  calls: string[] = [];
  constructor(
    public entries: Map<string, KeyIds>,
    public failing = false,
  ) {}
  async resolveKeyHash(keyHash: string): Promise<KeyIds | null> {
    this.calls.push(keyHash);
    if (this.failing) throw new Error('down');
    return this.entries.get(keyHash) ?? null;
  }
}

/** A store whose answers wait until the test releases them (while `holding`), to interleave lookups. */
class HeldIndex implements KeyIndex {
  holding = true;
  readonly held: { keyHash: string; release: () => void }[] = [];
  readonly calls: string[] = [];
  constructor(private readonly entries: Map<string, KeyIds>) {}
  resolveKeyHash(keyHash: string): Promise<KeyIds | null> {
    this.calls.push(keyHash);
    const answer = this.entries.get(keyHash) ?? null;
    if (!this.holding) return Promise.resolve(answer);
    return new Promise((resolve) => this.held.push({ keyHash, release: () => resolve(answer) }));
  }
}

const IDS = { keyId: 'key_a', accountId: 'acme' };
const options = (clock: ManualClock) => ({ maxEntries: 2, negativeTtlMs: 2000, maxNegativeEntries: 2, clock });
const [H1, NEW, A, B, C, X] = ['h1', 'new', 'a', 'b', 'c', 'x'].map(sha) as [string, string, string, string, string, string];

describe('CachedKeyIndex', () => {
  it('asks the store once for a known hash, then answers from memory', async () => {
    const inner = new ScriptedIndex(new Map([[H1, IDS]]));
    const cache = new CachedKeyIndex(inner, options(new ManualClock(1_000_000)));
    expect(await cache.resolveKeyHash(H1)).toEqual(IDS);
    expect(await cache.resolveKeyHash(H1)).toEqual(IDS);
    expect(inner.calls).toEqual([H1]);
  });

  it('asks the store again for a forgotten hash and remembers its answer; other entries stay', async () => {
    const inner = new ScriptedIndex(
      new Map([
        [H1, IDS],
        [A, { keyId: 'key_b', accountId: 'beta' }],
      ]),
    );
    const cache = new CachedKeyIndex(inner, options(new ManualClock(1_000_000)));
    await cache.resolveKeyHash(H1);
    await cache.resolveKeyHash(A);
    cache.forget(H1);
    cache.forget(X); // never cached: nothing to do
    inner.entries.set(H1, { keyId: 'key_c', accountId: 'acme' });
    expect(await cache.resolveKeyHash(H1)).toEqual({ keyId: 'key_c', accountId: 'acme' });
    expect(await cache.resolveKeyHash(H1)).toEqual({ keyId: 'key_c', accountId: 'acme' });
    expect(await cache.resolveKeyHash(A)).toEqual({ keyId: 'key_b', accountId: 'beta' });
    expect(inner.calls).toEqual([H1, A, H1]);
  });

  it('remembers an unknown hash only for the negative TTL, so a new key works soon after', async () => {
    const clock = new ManualClock(1_000_000);
    const inner = new ScriptedIndex(new Map());
    const cache = new CachedKeyIndex(inner, options(clock));
    expect(await cache.resolveKeyHash(NEW)).toBeNull();
    inner.entries.set(NEW, IDS);
    clock.advance(1999);
    expect(await cache.resolveKeyHash(NEW)).toBeNull();
    clock.advance(2);
    expect(await cache.resolveKeyHash(NEW)).toEqual(IDS);
    expect(inner.calls).toEqual([NEW, NEW]);
  });

  it('is bounded: an entry not used since the others came in is dropped first', async () => {
    const inner = new ScriptedIndex(
      new Map([
        [A, IDS],
        [B, IDS],
        [C, IDS],
      ]),
    );
    const cache = new CachedKeyIndex(inner, options(new ManualClock(1_000_000)));
    for (const hash of [A, B, C, A]) await cache.resolveKeyHash(hash);
    expect(inner.calls).toEqual([A, B, C, A]);
  });

  it('keeps an entry used again over one that was not (second chance)', async () => {
    const inner = new ScriptedIndex(
      new Map([
        [A, IDS],
        [B, IDS],
        [C, IDS],
      ]),
    );
    const cache = new CachedKeyIndex(inner, options(new ManualClock(1_000_000)));
    for (const hash of [A, B, A, C, A, B]) await cache.resolveKeyHash(hash);
    expect(inner.calls).toEqual([A, B, C, B]);
  });

  it('never caches a store failure', async () => {
    const inner = new ScriptedIndex(new Map([[H1, IDS]]), true);
    const cache = new CachedKeyIndex(inner, options(new ManualClock(1_000_000)));
    await expect(cache.resolveKeyHash(H1)).rejects.toThrow('down');
    inner.failing = false;
    expect(await cache.resolveKeyHash(H1)).toEqual(IDS);
  });

  it('with a zero negative TTL asks the store every time for unknown hashes', async () => {
    const inner = new ScriptedIndex(new Map());
    const cache = new CachedKeyIndex(inner, { ...options(new ManualClock(1_000_000)), negativeTtlMs: 0 });
    await cache.resolveKeyHash(X);
    await cache.resolveKeyHash(X);
    expect(inner.calls).toEqual([X, X]);
  });

  it('bounds the unknown hashes too, dropping an expired one before one that is still valid', async () => {
    const clock = new ManualClock(1_000_000);
    const inner = new ScriptedIndex(new Map());
    const cache = new CachedKeyIndex(inner, { ...options(clock), maxNegativeEntries: 2 });
    await cache.resolveKeyHash(A);
    await cache.resolveKeyHash(A); // used again: the hand alone would pass A over and drop B
    clock.advance(1500);
    await cache.resolveKeyHash(B);
    clock.advance(600); // A has expired, B has not
    await cache.resolveKeyHash(C);
    await cache.resolveKeyHash(B);
    await cache.resolveKeyHash(C);
    expect(inner.calls).toEqual([A, B, C]);
  });

  it('reports each lookup as hit, negative_hit or miss', async () => {
    const outcomes: string[] = [];
    const inner = new ScriptedIndex(new Map([[H1, IDS]]));
    const cache = new CachedKeyIndex(inner, { ...options(new ManualClock(1_000_000)), onLookup: (outcome) => outcomes.push(outcome) });
    for (const hash of [H1, H1, X, X]) await cache.resolveKeyHash(hash);
    expect(outcomes).toEqual(['miss', 'hit', 'miss', 'negative_hit']);
  });

  it('stores each answer under its own hash when other lookups run while the store answers', async () => {
    const other = { keyId: 'key_other', accountId: 'acct-other' };
    const inner = new HeldIndex(
      new Map([
        [A, IDS],
        [B, other],
      ]),
    );
    const cache = new CachedKeyIndex(inner, { ...options(new ManualClock(1_000_000)), maxEntries: 10 });
    const first = cache.resolveKeyHash(A);
    const second = cache.resolveKeyHash(B);
    const third = cache.resolveKeyHash(C);
    inner.holding = false;
    for (const { release } of inner.held) release();
    expect(await Promise.all([first, second, third])).toEqual([IDS, other, null]);
    expect(await cache.resolveKeyHash(A)).toEqual(IDS);
    expect(await cache.resolveKeyHash(B)).toEqual(other);
    expect(await cache.resolveKeyHash(C)).toBeNull();
    expect(inner.calls).toEqual([A, B, C]);
  });
});

describe('CachedKeyIndex with real SHA-256 hashes (kept as bytes)', () => {
  it('keeps hashes that differ only in their last hex digit apart, and returns each its own ids', async () => {
    const first = sha('gk_live_one');
    const second = `${first.slice(0, 63)}${first.at(-1) === '0' ? '1' : '0'}`;
    const entries = new Map<string, KeyIds>([
      [first, { keyId: 'key_AbC-1_x', accountId: 'acct_one-1' }],
      [second, { keyId: 'key_Zz9', accountId: 'acct-two' }],
    ]);
    const inner = new ScriptedIndex(entries);
    const cache = new CachedKeyIndex(inner, { ...options(new ManualClock(1_000_000)), maxEntries: 10 });
    for (let round = 0; round < 2; round += 1) {
      expect(await cache.resolveKeyHash(first)).toEqual(entries.get(first));
      expect(await cache.resolveKeyHash(second)).toEqual(entries.get(second));
    }
    expect(inner.calls).toEqual([first, second]);
  });

  it('remembers an unknown real hash without confusing it with a known one', async () => {
    const known = sha('known');
    const unknown = sha('unknown');
    const inner = new ScriptedIndex(new Map([[known, IDS]]));
    const cache = new CachedKeyIndex(inner, { ...options(new ManualClock(1_000_000)), maxEntries: 10 });
    expect(await cache.resolveKeyHash(unknown)).toBeNull();
    expect(await cache.resolveKeyHash(known)).toEqual(IDS);
    expect(await cache.resolveKeyHash(unknown)).toBeNull();
    expect(await cache.resolveKeyHash(known)).toEqual(IDS);
    expect(inner.calls).toEqual([unknown, known]);
  });

  it('caches the longest ids the service mints (a 20-character key id, a 64-character account id) exactly', async () => {
    const ids = { keyId: `key_${'Z9'.repeat(8)}`, accountId: 'a-_9'.repeat(16) };
    expect(ids.keyId.length + ids.accountId.length).toBe(MAX_CACHED_ID_BYTES);
    const inner = new ScriptedIndex(new Map([[H1, ids]]));
    const cache = new CachedKeyIndex(inner, { ...options(new ManualClock(1_000_000)), maxEntries: 10 });
    expect(await cache.resolveKeyHash(H1)).toEqual(ids);
    expect(await cache.resolveKeyHash(H1)).toEqual(ids);
    expect(inner.calls).toEqual([H1]);
  });

  it('reads back pairs of 56, 57 and 84 bytes exactly, in one entry taken by each in turn', async () => {
    const pairs = [56, 57, 84, 56, 84, 57].map((bytes, i) => ({
      keyId: `key_${String(i).repeat(16)}`,
      accountId: 'acct'.padEnd(bytes - 20, `${i}`),
    }));
    const hashes = pairs.map((_, i) => sha(`pair-${i}`));
    const inner = new ScriptedIndex(new Map(hashes.map((hash, i) => [hash, pairs[i]!])));
    // One entry: each pair evicts the one before and writes its ids over them.
    const cache = new CachedKeyIndex(inner, { ...options(new ManualClock(1_000_000)), maxEntries: 1 });
    for (const [i, hash] of hashes.entries()) {
      expect(pairs[i]!.keyId.length + pairs[i]!.accountId.length).toBe([56, 57, 84, 56, 84, 57][i]);
      expect(await cache.resolveKeyHash(hash)).toEqual(pairs[i]);
      expect(await cache.resolveKeyHash(hash)).toEqual(pairs[i]);
    }
    expect(inner.calls).toEqual(hashes);
  });

  it('holds 58 bytes of ids an entry until a pair longer than 56 bytes is cached', async () => {
    const entries = 100_000;
    const before = process.memoryUsage().arrayBuffers;
    const cache = new CachedKeyIndex(
      new ScriptedIndex(
        new Map([
          [A, { keyId: 'key_a', accountId: 'a'.repeat(51) }],
          [B, { keyId: 'key_b', accountId: 'b'.repeat(52) }],
        ]),
      ),
      {
        maxEntries: entries,
        negativeTtlMs: 0,
        maxNegativeEntries: 0,
      },
    );
    await cache.resolveKeyHash(A);
    const made = process.memoryUsage().arrayBuffers - before;
    // The hash table (32 + 1 bytes an entry, 4 bytes a position, 2 positions an entry or more) and 58 bytes of ids:
    // short of what 86-byte slots alone would take with the hashes.
    expect(made).toBeLessThan(entries * (32 + 1 + 2 + 84));
    // A 57-byte pair: the table of the bytes past 56, 28 an entry.
    const beforeLong = process.memoryUsage().arrayBuffers;
    await cache.resolveKeyHash(B);
    expect(process.memoryUsage().arrayBuffers - beforeLong).toBeGreaterThanOrEqual(entries * 28 * 0.9);
    expect(await cache.resolveKeyHash(B)).toEqual({ keyId: 'key_b', accountId: 'b'.repeat(52) });
  });

  it('never truncates ids too long for an entry: it returns them whole and asks the store each time', async () => {
    const long = { keyId: `key_${'x'.repeat(124)}`, accountId: 'a'.repeat(64) };
    const justOver = { keyId: `key_${'y'.repeat(17)}`, accountId: 'b'.repeat(64) };
    const inner = new ScriptedIndex(
      new Map([
        [A, long],
        [B, justOver],
      ]),
    );
    const cache = new CachedKeyIndex(inner, { ...options(new ManualClock(1_000_000)), maxEntries: 10 });
    for (let round = 0; round < 2; round += 1) {
      expect(await cache.resolveKeyHash(A)).toEqual(long);
      expect(await cache.resolveKeyHash(B)).toEqual(justOver);
    }
    expect(inner.calls).toEqual([A, B, A, B]);
  });

  it('does not cache ids that would not read back exactly (a space, a character beyond ASCII, an empty id)', async () => {
    const odd = [
      { keyId: 'key a', accountId: 'acme' },
      { keyId: 'key_é', accountId: 'acme' },
      { keyId: 'key_a', accountId: 'ac\u0100me' },
      { keyId: '', accountId: 'acme' },
    ];
    const hashes = odd.map((_, i) => sha(`odd-${i}`));
    const inner = new ScriptedIndex(new Map(hashes.map((hash, i) => [hash, odd[i]!])));
    const cache = new CachedKeyIndex(inner, { ...options(new ManualClock(1_000_000)), maxEntries: 10 });
    for (let round = 0; round < 2; round += 1) {
      for (const [i, hash] of hashes.entries()) expect(await cache.resolveKeyHash(hash)).toEqual(odd[i]);
    }
    expect(inner.calls).toEqual([...hashes, ...hashes]);
  });

  it('passes anything but a lower-case hex SHA-256 to the store uncached, and never answers it from an entry', async () => {
    const upper = H1.toUpperCase();
    const inner = new ScriptedIndex(
      new Map([
        [H1, IDS],
        ['not-a-hash', { keyId: 'key_b', accountId: 'acme' }],
      ]),
    );
    const cache = new CachedKeyIndex(inner, { ...options(new ManualClock(1_000_000)), maxEntries: 10 });
    expect(await cache.resolveKeyHash(H1)).toEqual(IDS);
    // The same bytes in upper case are another Redis key, which holds nothing: the store says so each time.
    expect(await cache.resolveKeyHash(upper)).toBeNull();
    expect(await cache.resolveKeyHash(upper)).toBeNull();
    expect(await cache.resolveKeyHash('not-a-hash')).toEqual({ keyId: 'key_b', accountId: 'acme' });
    expect(await cache.resolveKeyHash(`${H1}0`)).toBeNull();
    expect(await cache.resolveKeyHash(H1)).toEqual(IDS);
    expect(inner.calls).toEqual([H1, upper, upper, 'not-a-hash', `${H1}0`]);
  });
});

describe('CachedKeyIndex against a Map of the truth', () => {
  const universe = Array.from({ length: 16 }, (_, i) => sha(`key-${i}`));
  /** Half the hashes name keys (with ids of every length that fits, and some that do not); the other half are unknown. */
  const truth = new Map<string, KeyIds>(
    universe
      .filter((_, i) => i % 2 === 0)
      .map((hash, i) => [hash, { keyId: `key_${'k'.repeat(i * 7)}`, accountId: `acct-${'a'.repeat(i * 5)}${i}` }]),
  );
  const step = fc.oneof(
    { weight: 4, arbitrary: fc.record({ lookup: fc.constantFrom(...universe) }) },
    { weight: 1, arbitrary: fc.record({ advanceMs: fc.integer({ min: 0, max: 3000 }) }) },
  );

  it('always answers what the store would, asking it only for hashes not answered before (unknown ones: not within the TTL)', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(step, { maxLength: 200 }), async (steps) => {
        const clock = new ManualClock(1_000_000);
        const inner = new ScriptedIndex(truth);
        const cache = new CachedKeyIndex(inner, {
          maxEntries: universe.length,
          negativeTtlMs: 2000,
          maxNegativeEntries: universe.length,
          clock,
        });
        // The model: what a cache big enough for everything must do.
        const knownCached = new Set<string>();
        const unknownUntil = new Map<string, number>();
        for (const entry of steps) {
          if ('advanceMs' in entry) {
            clock.advance(entry.advanceMs);
            continue;
          }
          const hash = entry.lookup;
          const asked = inner.calls.length;
          expect(await cache.resolveKeyHash(hash)).toEqual(truth.get(hash) ?? null);
          const ids = truth.get(hash);
          const fits = ids !== undefined && ids.keyId.length + ids.accountId.length <= MAX_CACHED_ID_BYTES;
          const expectAsk = ids ? !knownCached.has(hash) : !((unknownUntil.get(hash) ?? 0) > clock.now());
          expect(inner.calls.length - asked).toBe(expectAsk ? 1 : 0);
          if (fits) knownCached.add(hash);
          if (!ids && expectAsk) unknownUntil.set(hash, clock.now() + 2000);
        }
      }),
      { numRuns: 200 },
    );
  });

  it('with room for only a few entries, still always answers what the store would', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1, max: 5 }),
        fc.integer({ min: 1, max: 5 }),
        fc.array(step, { maxLength: 200 }),
        async (maxEntries, maxNegativeEntries, steps) => {
          const clock = new ManualClock(1_000_000);
          const inner = new ScriptedIndex(truth);
          const cache = new CachedKeyIndex(inner, { maxEntries, negativeTtlMs: 2000, maxNegativeEntries, clock });
          const answeredUnknownAt = new Map<string, number>();
          for (const entry of steps) {
            if ('advanceMs' in entry) {
              clock.advance(entry.advanceMs);
              continue;
            }
            const asked = inner.calls.length;
            const answer = await cache.resolveKeyHash(entry.lookup);
            expect(answer).toEqual(truth.get(entry.lookup) ?? null);
            if (inner.calls.length > asked && answer === null) answeredUnknownAt.set(entry.lookup, clock.now());
            // An unknown hash is answered from memory only within the TTL of the store saying so.
            if (inner.calls.length === asked && answer === null) {
              expect(clock.now() - answeredUnknownAt.get(entry.lookup)!).toBeLessThan(2000);
            }
          }
        },
      ),
      { numRuns: 200 },
    );
  });
});
