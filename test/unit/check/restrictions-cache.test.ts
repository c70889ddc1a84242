import { RestrictionsCache } from '../../../src/check/restrictions-cache';
import { CachedKeyIndex } from '../../../src/check/cached-key-index';
import { effectiveRestrictions, NO_RESTRICTIONS } from '../../../src/check/pipeline/restriction-step';
import { restrictionsStamp, restrictionsText } from '../../../src/keys/key-restrictions';
import { hashCustomerKey } from '../../../src/keys/customer-key';

const chatOnly = restrictionsText({ endpoints: ['chat-completions'], sourceAddresses: ['127.0.0.0/8', '::1/128'] });
const embedOnly = restrictionsText({ endpoints: ['/v1/embeddings'] });

/** A key cache of `maxEntries` over a store that knows every hash, and the restrictions kept in its entries. */
function cacheOf(maxEntries: number) {
  const keyIndex = new CachedKeyIndex(
    { resolveKeyHash: async (hash: string) => ({ keyId: `key_${hash.slice(0, 8)}`, accountId: 'acct' }) },
    { maxEntries, negativeTtlMs: 0, maxNegativeEntries: 1 },
  );
  return { keyIndex, cache: new RestrictionsCache(keyIndex) };
}

/** A key's hash, cached by the key index as a Check's lookup leaves it. */
async function cachedHash(keyIndex: CachedKeyIndex, name: string): Promise<string> {
  const hash = hashCustomerKey(name);
  await keyIndex.resolveKeyHash(hash);
  return hash;
}

describe('RestrictionsCache', () => {
  it('holds one compiled form for keys with the same texts, so many restricted keys cost one each', async () => {
    const { keyIndex, cache } = cacheOf(1_000);
    const hashes = await Promise.all(Array.from({ length: 500 }, (_, i) => cachedHash(keyIndex, `k${i}`)));
    for (const hash of hashes) cache.set(hash, effectiveRestrictions(chatOnly, ''));
    const first = cache.get(hashes[0]!);
    expect(first.keyStamp).toBe(restrictionsStamp(chatOnly));
    for (const hash of hashes) expect(cache.get(hash)).toBe(first);
  });

  it('keeps different texts apart, the account part included', async () => {
    const { keyIndex, cache } = cacheOf(10);
    const [a, b, c] = await Promise.all(['a', 'b', 'c'].map((name) => cachedHash(keyIndex, name)));
    cache.set(a!, effectiveRestrictions(chatOnly, ''));
    cache.set(b!, effectiveRestrictions(chatOnly, embedOnly));
    cache.set(c!, effectiveRestrictions(embedOnly, ''));
    expect(cache.get(a!)).not.toBe(cache.get(b!));
    expect(cache.get(b!).accountStamp).toBe(restrictionsStamp(embedOnly));
    expect(cache.get(c!).keyStamp).toBe(restrictionsStamp(embedOnly));
  });

  it("lets a key's restrictions go when they are removed, and with its key cache entry", async () => {
    const { keyIndex, cache } = cacheOf(2);
    const a = await cachedHash(keyIndex, 'a');
    cache.set(a, effectiveRestrictions(chatOnly, ''));
    cache.set(a, NO_RESTRICTIONS);
    expect(cache.get(a)).toBe(NO_RESTRICTIONS);
    // Forgotten by the key cache (a reply crossed with another's): its restrictions go with it, and a key cached
    // again in that entry starts with none.
    cache.set(a, effectiveRestrictions(chatOnly, ''));
    keyIndex.forget(a);
    expect(cache.get(a)).toBe(NO_RESTRICTIONS);
    await keyIndex.resolveKeyHash(a);
    expect(cache.get(a)).toBe(NO_RESTRICTIONS);
    // Past the key cache's bound, an entry taken by another key holds nothing of the one before.
    const hashes = [a, await cachedHash(keyIndex, 'b')];
    for (const hash of hashes) cache.set(hash, effectiveRestrictions(chatOnly, ''));
    const later = [await cachedHash(keyIndex, 'c'), await cachedHash(keyIndex, 'd')];
    for (const hash of [...hashes, ...later]) expect(cache.get(hash)).toBe(NO_RESTRICTIONS);
    // A key the key cache does not hold keeps nothing.
    cache.set(hashCustomerKey('never looked up'), effectiveRestrictions(chatOnly, ''));
    expect(cache.get(hashCustomerKey('never looked up'))).toBe(NO_RESTRICTIONS);
  });

  it('reads the entry of the lookup just made without a second probe, and never one that now holds another key', async () => {
    const { keyIndex, cache } = cacheOf(1);
    const a = await cachedHash(keyIndex, 'a');
    cache.set(a, effectiveRestrictions(chatOnly, ''));
    await keyIndex.resolveKeyHash(a);
    expect(cache.get(a).keyStamp).toBe(restrictionsStamp(chatOnly));
    // Forgotten right after its lookup: nothing is kept for it, nor read back, until the store answers it again.
    keyIndex.forget(a);
    cache.set(a, effectiveRestrictions(embedOnly, ''));
    expect(cache.get(a)).toBe(NO_RESTRICTIONS);
    // Its one entry taken by another key right after a lookup of it: nothing of it is read for either.
    await keyIndex.resolveKeyHash(a);
    cache.set(a, effectiveRestrictions(chatOnly, ''));
    await keyIndex.resolveKeyHash(a);
    const b = await cachedHash(keyIndex, 'b');
    expect(cache.get(a)).toBe(NO_RESTRICTIONS);
    expect(cache.get(b)).toBe(NO_RESTRICTIONS);
    cache.set(b, effectiveRestrictions(embedOnly, ''));
    expect(cache.get(a)).toBe(NO_RESTRICTIONS);
    expect(cache.get(b).keyStamp).toBe(restrictionsStamp(embedOnly));
  });
});
