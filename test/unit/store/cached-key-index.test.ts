import { createHash } from 'node:crypto';
import { ManualClock } from '../../../src/domain/clock';
import { CachedKeyIndex } from '../../../src/store/cached-key-index';
import type { KeyIds } from '../../../src/domain/key-records';
import type { KeyIndex } from '../../../src/domain/authorization';

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

const IDS = { keyId: 'key_a', accountId: 'acme' };
const options = (clock: ManualClock) => ({ maxEntries: 2, negativeTtlMs: 2000, maxNegativeEntries: 2, clock });

describe('CachedKeyIndex', () => {
  it('asks the store once for a known hash, then answers from memory', async () => {
    const inner = new ScriptedIndex(new Map([['h1', IDS]]));
    const cache = new CachedKeyIndex(inner, options(new ManualClock(1_000_000)));
    expect(await cache.resolveKeyHash('h1')).toEqual(IDS);
    expect(await cache.resolveKeyHash('h1')).toEqual(IDS);
    expect(inner.calls).toEqual(['h1']);
  });

  it('remembers an unknown hash only for the negative TTL, so a new key works soon after', async () => {
    const clock = new ManualClock(1_000_000);
    const inner = new ScriptedIndex(new Map());
    const cache = new CachedKeyIndex(inner, options(clock));
    expect(await cache.resolveKeyHash('new')).toBeNull();
    inner.entries.set('new', IDS);
    clock.advance(1999);
    expect(await cache.resolveKeyHash('new')).toBeNull();
    clock.advance(2);
    expect(await cache.resolveKeyHash('new')).toEqual(IDS);
    expect(inner.calls).toEqual(['new', 'new']);
  });

  it('is bounded: the least recently used entries are dropped', async () => {
    const inner = new ScriptedIndex(
      new Map([
        ['a', IDS],
        ['b', IDS],
        ['c', IDS],
      ]),
    );
    const cache = new CachedKeyIndex(inner, options(new ManualClock(1_000_000)));
    for (const hash of ['a', 'b', 'c', 'a']) await cache.resolveKeyHash(hash);
    expect(inner.calls).toEqual(['a', 'b', 'c', 'a']);
  });

  it('never caches a store failure', async () => {
    const inner = new ScriptedIndex(new Map([['h1', IDS]]), true);
    const cache = new CachedKeyIndex(inner, options(new ManualClock(1_000_000)));
    await expect(cache.resolveKeyHash('h1')).rejects.toThrow('down');
    inner.failing = false;
    expect(await cache.resolveKeyHash('h1')).toEqual(IDS);
  });

  it('with a zero negative TTL asks the store every time for unknown hashes', async () => {
    const inner = new ScriptedIndex(new Map());
    const cache = new CachedKeyIndex(inner, { ...options(new ManualClock(1_000_000)), negativeTtlMs: 0 });
    await cache.resolveKeyHash('x');
    await cache.resolveKeyHash('x');
    expect(inner.calls).toEqual(['x', 'x']);
  });
});

describe('CachedKeyIndex with real SHA-256 hashes (kept compact in memory)', () => {
  const sha = (text: string) => createHash('sha256').update(text).digest('hex');

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
});
