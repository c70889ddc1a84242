import { ManualClock } from '../../../src/domain/clock';
import { CachedKeyIndex } from '../../../src/store/cached-key-index';
import type { KeyIds, KeyIndex } from '../../../src/store/store';

class ScriptedIndex implements KeyIndex {
  calls: string[] = [];
  constructor(public entries: Map<string, KeyIds>, public failing = false) {}
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
    const inner = new ScriptedIndex(new Map([['a', IDS], ['b', IDS], ['c', IDS]]));
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
