import { parseAuthorization, splitRepeatedHeader, tokenPartOf } from '../../../src/check/credentials/authorization-header';

const TOKEN = `gk_live_${'A'.repeat(36)}`;

describe('parseAuthorization', () => {
  it.each(['Bearer', 'bearer', 'BEARER', 'bEaReR'])('accepts the scheme spelled %s (case-insensitive)', (scheme) => {
    expect(parseAuthorization(`${scheme} ${TOKEN}`)).toEqual({ ok: true, token: TOKEN });
  });

  it('tolerates surrounding whitespace and several spaces or a tab after the scheme', () => {
    expect(parseAuthorization(`  Bearer ${TOKEN}  `)).toEqual({ ok: true, token: TOKEN });
    expect(parseAuthorization(`Bearer    ${TOKEN}`)).toEqual({ ok: true, token: TOKEN });
    expect(parseAuthorization(`Bearer\t${TOKEN}`)).toEqual({ ok: true, token: TOKEN });
  });

  it('returns the token exactly, without changing its case', () => {
    expect(parseAuthorization('Bearer AbCdEf')).toEqual({ ok: true, token: 'AbCdEf' });
  });

  it.each([
    ['Basic', `Basic ${Buffer.from(`user:${TOKEN}`).toString('base64')}`],
    ['Token', `Token ${TOKEN}`],
    ['Digest', 'Digest username="x"'],
    ['ApiKey', `ApiKey ${TOKEN}`],
    ['a bare key without scheme', TOKEN],
    ['scheme glued to the token', `Bearer${TOKEN}`],
    ['Bearer with a trailing colon', `Bearer: ${TOKEN}`],
  ])('refuses %s as not_bearer', (_label, value) => {
    expect(parseAuthorization(value)).toEqual({ ok: false, problem: 'not_bearer' });
  });

  it.each([
    ['two tokens', `Bearer ${TOKEN} ${TOKEN}`],
    ['a token and a word', `Bearer ${TOKEN} extra`],
    ['a token split by a tab', `Bearer abc\tdef`],
    ['Bearer twice', `Bearer Bearer ${TOKEN}`],
  ])('refuses %s as not_one_token', (_label, value) => {
    expect(parseAuthorization(value)).toEqual({ ok: false, problem: 'not_one_token' });
  });

  it.each([
    ['empty', ''],
    ['blank', '   '],
    ['scheme only', 'Bearer'],
    ['scheme and spaces', 'Bearer    '],
  ])('reports %s as empty', (_label, value) => {
    expect(parseAuthorization(value)).toEqual({ ok: false, problem: 'empty' });
  });
});

describe('tokenPartOf (for upstream-key scanning, whatever the scheme)', () => {
  it('takes what follows the scheme', () => {
    expect(tokenPartOf(`Bearer ${TOKEN}`)).toBe(TOKEN);
    expect(tokenPartOf(`Token  ${TOKEN} `)).toBe(TOKEN);
    expect(tokenPartOf(`Basic\tabc`)).toBe('abc');
  });

  it('takes the whole value when there is no scheme', () => {
    expect(tokenPartOf(` ${TOKEN} `)).toBe(TOKEN);
  });

  it('keeps everything after the scheme when there are several words', () => {
    expect(tokenPartOf('Bearer a b')).toBe('a b');
  });
});

describe('splitRepeatedHeader (Envoy comma-joins repeated headers)', () => {
  it('gives back a single value unchanged', () => {
    expect(splitRepeatedHeader(`Bearer ${TOKEN}`)).toEqual([`Bearer ${TOKEN}`]);
  });

  it('splits on commas with or without a following space, trimming each part', () => {
    expect(splitRepeatedHeader('a,b')).toEqual(['a', 'b']);
    expect(splitRepeatedHeader('Bearer a, Bearer b')).toEqual(['Bearer a', 'Bearer b']);
    expect(splitRepeatedHeader(' a ,  b ,c ')).toEqual(['a', 'b', 'c']);
  });

  it('drops empty parts', () => {
    expect(splitRepeatedHeader(',a,,b,')).toEqual(['a', 'b']);
    expect(splitRepeatedHeader('')).toEqual([]);
    expect(splitRepeatedHeader(' , ')).toEqual([]);
  });

  it('keeps identical repeated values (deduplication is the caller’s business)', () => {
    expect(splitRepeatedHeader(`${TOKEN},${TOKEN}`)).toEqual([TOKEN, TOKEN]);
  });
});
