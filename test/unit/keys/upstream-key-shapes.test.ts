import { randomInt } from 'node:crypto';

import { crc32 } from 'node:zlib';
import { encodeBase62 } from '../../../src/keys/base62';
import { generateCustomerKey, parseCustomerKey } from '../../../src/keys/customer-key';
import { UPSTREAM_KEY_SHAPES, upstreamProviderOf } from '../../../src/keys/upstream-key-shapes';

/*
 * Every "key" here is fake and assembled at run time, so no file holds a
 * string shaped like a real secret. Shapes follow the gitleaks and
 * trufflehog detection rules for each provider's keys.
 */
const ALNUM = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';
const URLSAFE = `${ALNUM}_-`;
const HEX = '0123456789abcdef';
/** base64("OpenAI"): the marker every OpenAI secret key carries. */
const OPENAI_MARKER = Buffer.from('OpenAI').toString('base64');

function randomText(length: number, alphabet: string): string {
  let out = '';
  for (let i = 0; i < length; i++) out += alphabet[randomInt(alphabet.length)];
  return out;
}

type Maker = () => string;

const FAKE_KEYS: readonly [string, string, Maker][] = [
  ['OpenAI', 'project key', () => `sk-proj-${randomText(74, URLSAFE)}${OPENAI_MARKER}${randomText(74, URLSAFE)}`],
  ['OpenAI', 'service-account key', () => `sk-svcacct-${randomText(58, URLSAFE)}${OPENAI_MARKER}${randomText(58, URLSAFE)}`],
  ['OpenAI', 'admin key', () => `sk-admin-${randomText(58, URLSAFE)}${OPENAI_MARKER}${randomText(58, URLSAFE)}`],
  ['OpenAI', 'legacy user key', () => `sk-${randomText(20, ALNUM)}${OPENAI_MARKER}${randomText(20, ALNUM)}`],
  ['OpenAI', 'project key without the marker', () => `sk-proj-${'x'.repeat(40)}${randomText(20, ALNUM)}`],
  ['OpenAI', 'bare sk- key of 48 characters', () => `sk-${randomText(48, ALNUM)}`],
  ['OpenAI', 'bare sk- key of 32 hex (DeepSeek-like, refused as OpenAI-shaped)', () => `sk-${randomText(32, HEX)}`],
  ['OpenAI', 'marker inside an otherwise unknown string', () => `${randomText(10, ALNUM)}${OPENAI_MARKER}${randomText(10, ALNUM)}`],
  ['Anthropic', 'api03 key', () => `sk-ant-api03-${randomText(93, URLSAFE)}AA`],
  ['Anthropic', 'admin key', () => `sk-ant-admin01-${randomText(93, URLSAFE)}AA`],
  ['Google', 'AI Studio key', () => `AIzaSy${randomText(33, URLSAFE)}`],
  ['Google', 'GCP key', () => `AIza${randomText(35, URLSAFE)}`],
  ['OpenRouter', 'v1 key', () => `sk-or-v1-${randomText(64, HEX)}`],
  ['Groq', 'key', () => `gsk_${randomText(52, ALNUM)}`],
  ['xAI', 'key', () => `xai-${randomText(80, ALNUM)}`],
  ['Hugging Face', 'token', () => `hf_${randomText(34, ALNUM)}`],
  ['Perplexity', 'key', () => `pplx-${randomText(48, ALNUM)}`],
  ['Replicate', 'token', () => `r8_${randomText(37, ALNUM)}`],
];

describe('upstream provider keys are recognised and named', () => {
  it.each(FAKE_KEYS)('%s: %s', (provider, _label, make) => {
    for (let i = 0; i < 20; i++) expect(upstreamProviderOf(make())).toBe(provider);
  });

  it('an Anthropic key is not named OpenAI although it also starts with sk-', () => {
    const key = `sk-ant-api03-${'a'.repeat(60)}`;
    expect(key).toMatch(/^sk-[A-Za-z0-9_-]{16,}$/); // the generic OpenAI shape matches too
    expect(upstreamProviderOf(key)).toBe('Anthropic');
  });

  it('an OpenRouter key is not named OpenAI although it also starts with sk-', () => {
    const key = `sk-or-v1-${'0'.repeat(64)}`;
    expect(key).toMatch(/^sk-[A-Za-z0-9_-]{16,}$/);
    expect(upstreamProviderOf(key)).toBe('OpenRouter');
  });

  it('every provider in the table is covered by a case above', () => {
    const covered = new Set(FAKE_KEYS.map(([provider]) => provider));
    expect(new Set(UPSTREAM_KEY_SHAPES.map((shape) => shape.provider))).toEqual(covered);
  });

  it('the table cannot be changed at run time', () => {
    expect(Object.isFrozen(UPSTREAM_KEY_SHAPES)).toBe(true);
  });
});

describe('our own customer keys are never mistaken for an upstream key', () => {
  it('500 generated keys of both environments match no provider', () => {
    for (let i = 0; i < 500; i++) {
      const key = generateCustomerKey(i % 2 === 0 ? 'live' : 'test');
      expect([key, upstreamProviderOf(key)]).toEqual([key, undefined]);
    }
  });

  it('nor does a malformed key with our prefix', () => {
    expect(upstreamProviderOf(`gk_live_${'a'.repeat(10)}`)).toBeUndefined();
    expect(upstreamProviderOf(`gk_test_${randomText(60, ALNUM)}`)).toBeUndefined();
  });
});

describe('ordinary words and near misses match nothing', () => {
  it.each([
    '',
    'hello',
    'Bearer',
    'password123',
    'undefined',
    'null',
    'skeleton',
    'sk-',
    'sk-short',
    'sk-ant-',
    'sk-ant-short',
    'sk-or-',
    'sk-proj-',
    'AIza',
    'AIzaShort',
    'gsk_',
    'gsk_tooShort',
    'xai-grok',
    'hf_token',
    'pplx-',
    'r8_abc',
    'my-api-key',
    'gk_live_',
    // near misses: a longer bare sk- token with a character outside the shape
    `sk-${'a'.repeat(20)}.${'b'.repeat(5)}`,
    // a prefix that appears later in the string, not at the start
    `x${'AIza'}${'a'.repeat(35)}`,
    `token-gsk_${'a'.repeat(52)}`,
  ])('"%s"', (word) => {
    expect(upstreamProviderOf(word)).toBeUndefined();
  });
});

describe('our own keys are never taken for a provider key', () => {
  it('a valid key whose random part happens to contain the OpenAI marker is still ours', () => {
    const body = `gk_live_${Buffer.from('OpenAI').toString('base64')}${'a'.repeat(22)}`;
    const key = body + encodeBase62(crc32(body), 6);
    expect(parseCustomerKey(key).ok).toBe(true);
    expect(upstreamProviderOf(key)).toBeUndefined();
  });
});

describe('the one test of every shape at once', () => {
  /** What upstreamProviderOf answered before the union: each shape in turn, then the checksum. */
  const shapeByShape = (credential: string) => {
    const shape = UPSTREAM_KEY_SHAPES.find((candidate) => candidate.pattern.test(credential));
    return shape && !parseCustomerKey(credential).ok ? shape.provider : undefined;
  };

  it('names the same provider as testing each shape in turn, for keys, near misses and random text', () => {
    const candidates: string[] = [];
    for (const [, , make] of FAKE_KEYS) {
      const key = make();
      // The key, cut short, with a character outside its shape, behind a prefix, and with text around it.
      candidates.push(key, key.slice(0, 12), key.slice(0, 24), `${key.slice(0, 10)}.${key.slice(11)}`, `x${key}`, `${key} `);
    }
    for (let i = 0; i < 2000; i++) {
      const prefix = ['sk-', 'sk-ant-', 'sk-or-', 'sk-proj-', 'AIza', 'gsk_', 'xai-', 'hf_', 'pplx-', 'r8_', 'gk_live_', ''][i % 12]!;
      candidates.push(`${prefix}${randomText(randomInt(0, 60), URLSAFE)}${i % 7 === 0 ? OPENAI_MARKER : ''}`);
    }
    for (let i = 0; i < 200; i++) candidates.push(generateCustomerKey('live'), generateCustomerKey('test'));
    const mismatches = candidates.filter((credential) => upstreamProviderOf(credential) !== shapeByShape(credential));
    expect(mismatches).toEqual([]);
    // The comparison saw both answers.
    expect(candidates.filter((credential) => shapeByShape(credential) !== undefined).length).toBeGreaterThan(100);
    expect(candidates.filter((credential) => shapeByShape(credential) === undefined).length).toBeGreaterThan(100);
  });
});
