import { RestrictionsCache } from '../../../src/check/restrictions-cache';
import { effectiveRestrictions, NO_RESTRICTIONS } from '../../../src/check/pipeline/restriction-step';
import { restrictionsStamp, restrictionsText } from '../../../src/keys/key-restrictions';

const chatOnly = restrictionsText({ endpoints: ['chat-completions'], sourceAddresses: ['127.0.0.0/8', '::1/128'] });
const embedOnly = restrictionsText({ endpoints: ['/v1/embeddings'] });

describe('RestrictionsCache', () => {
  it('holds one compiled form for keys with the same texts, so many restricted keys cost one each', () => {
    const cache = new RestrictionsCache(1_000);
    for (let i = 0; i < 500; i += 1) cache.set(`key_${i}`, effectiveRestrictions(chatOnly, ''));
    const first = cache.get('key_0');
    expect(first.keyStamp).toBe(restrictionsStamp(chatOnly));
    for (let i = 1; i < 500; i += 1) expect(cache.get(`key_${i}`)).toBe(first);
  });

  it('keeps different texts apart, the account part included', () => {
    const cache = new RestrictionsCache(10);
    cache.set('a', effectiveRestrictions(chatOnly, ''));
    cache.set('b', effectiveRestrictions(chatOnly, embedOnly));
    cache.set('c', effectiveRestrictions(embedOnly, ''));
    expect(cache.get('a')).not.toBe(cache.get('b'));
    expect(cache.get('b').accountStamp).toBe(restrictionsStamp(embedOnly));
    expect(cache.get('c').keyStamp).toBe(restrictionsStamp(embedOnly));
  });

  it('forgets a key whose restrictions were removed, and the oldest key past its bound', () => {
    const cache = new RestrictionsCache(2);
    cache.set('a', effectiveRestrictions(chatOnly, ''));
    cache.set('a', NO_RESTRICTIONS);
    expect(cache.get('a')).toBe(NO_RESTRICTIONS);
    cache.set('b', effectiveRestrictions(chatOnly, ''));
    cache.set('c', effectiveRestrictions(chatOnly, ''));
    cache.set('d', effectiveRestrictions(chatOnly, ''));
    expect(cache.get('b')).toBe(NO_RESTRICTIONS);
    expect(cache.get('d').keyStamp).toBe(restrictionsStamp(chatOnly));
  });
});
