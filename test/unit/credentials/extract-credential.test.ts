import { QUERY_KEY_PARAMETER, extractCredential, type CredentialResult } from '../../../src/check/credentials/extract-credential';
import { FAMILY_HEADER_RULES, rulesForModelsRoute, type FamilyHeaderRules } from '../../../src/check/routes/family-header-rules';
import {
  SPEC_VENDORG_KEY_HEADER,
  SPEC_VERSION_HEADER,
  VENDOR_VENDORG_KEY_HEADER,
  VENDOR_VERSION_HEADER,
  headerNamesFor,
  type HeaderNames,
} from '../../../src/check/routes/header-names';

const KEY = `gk_live_${'K'.repeat(36)}`;
const OTHER_KEY = `gk_live_${'Z'.repeat(36)}`;

const BOTH_SPELLINGS = headerNamesFor(true);
const SPEC_ONLY = headerNamesFor(false);

const CHAT = FAMILY_HEADER_RULES['chat-completions'];
const MESSAGES = FAMILY_HEADER_RULES.messages;
const GENERATIVE = FAMILY_HEADER_RULES['generative-content'];
const OTHER = FAMILY_HEADER_RULES.other;

interface Call {
  headers?: Record<string, string>;
  query?: string;
  acceptQueryKey?: boolean;
  names?: HeaderNames;
}

function extract(rules: FamilyHeaderRules, { headers = {}, query = '', acceptQueryKey = false, names = BOTH_SPELLINGS }: Call) {
  return extractCredential({ headers, query: new URLSearchParams(query) }, rules, { names, acceptQueryKey });
}

function denied(result: CredentialResult) {
  if (result.ok) throw new Error(`expected a refusal, got ${JSON.stringify(result)}`);
  return result;
}

describe('header names', () => {
  it('accept both spellings by default, spec names first', () => {
    expect(BOTH_SPELLINGS.versionHeaders).toEqual([SPEC_VERSION_HEADER, VENDOR_VERSION_HEADER]);
    expect(BOTH_SPELLINGS.vendorgKeyHeaders).toEqual([SPEC_VENDORG_KEY_HEADER, VENDOR_VENDORG_KEY_HEADER]);
    expect([SPEC_VERSION_HEADER, VENDOR_VERSION_HEADER]).toEqual(['vendora-version', 'anthropic-version']);
    expect([SPEC_VENDORG_KEY_HEADER, VENDOR_VENDORG_KEY_HEADER]).toEqual(['x-vendorg-api-key', 'x-goog-api-key']);
  });

  it('with spec-only spellings accept just the spec names', () => {
    expect(SPEC_ONLY.versionHeaders).toEqual(['vendora-version']);
    expect(SPEC_ONLY.vendorgKeyHeaders).toEqual(['x-vendorg-api-key']);
  });

  it('list every credential header in every spelling regardless of the setting (for stripping)', () => {
    const all = ['authorization', 'x-api-key', 'x-vendorg-api-key', 'x-goog-api-key'];
    expect([...BOTH_SPELLINGS.allCredentialHeaders].sort()).toEqual([...all].sort());
    expect([...SPEC_ONLY.allCredentialHeaders].sort()).toEqual([...all].sort());
  });
});

describe('family header rules', () => {
  it('chat-completions: Bearer only, no version header, no query key', () => {
    expect(CHAT).toEqual({
      style: 'chat',
      credentialSources: ['authorization-bearer'],
      requiresVersionHeader: false,
      queryKeyAllowed: false,
    });
  });

  it('messages: x-api-key first, then Bearer; version header required; no query key', () => {
    expect(MESSAGES).toEqual({
      style: 'messages',
      credentialSources: ['x-api-key', 'authorization-bearer'],
      requiresVersionHeader: true,
      queryKeyAllowed: false,
    });
  });

  it('generative-content: generative key header first, then Bearer, then x-api-key; query key allowed', () => {
    expect(GENERATIVE).toEqual({
      style: 'generative',
      credentialSources: ['vendorg-api-key', 'authorization-bearer', 'x-api-key'],
      requiresVersionHeader: false,
      queryKeyAllowed: true,
    });
  });

  it('other paths still need a key, from any header, never from the query', () => {
    expect(OTHER.style).toBe('generic');
    expect([...OTHER.credentialSources].sort()).toEqual(['authorization-bearer', 'vendorg-api-key', 'x-api-key']);
    expect(OTHER.queryKeyAllowed).toBe(false);
    expect(OTHER.requiresVersionHeader).toBe(false);
  });

  it('public routes read no credential', () => {
    expect(FAMILY_HEADER_RULES.public.credentialSources).toEqual([]);
  });
});

describe('chat-completions family (Bearer only)', () => {
  it.each(['Bearer', 'bearer', 'BEARER'])('takes the key from Authorization: %s <key>', (scheme) => {
    expect(extract(CHAT, { headers: { authorization: `${scheme} ${KEY}` } })).toEqual({
      ok: true,
      credential: KEY,
      source: 'authorization',
    });
  });

  it('refuses a missing key, recommending Bearer and the dashboard', () => {
    const result = denied(extract(CHAT, {}));
    expect(result.reason).toBe('missing_credential');
    expect(result.message).toContain("'Authorization: Bearer <key>'");
    expect(result.message).toContain('API Keys');
    expect(result.message).not.toContain('x-api-key');
  });

  it.each(['x-api-key', 'x-vendorg-api-key', 'x-goog-api-key'])('does not read %s, and says so while naming Bearer', (header) => {
    const result = denied(extract(CHAT, { headers: { [header]: KEY } }));
    expect(result.reason).toBe('missing_credential');
    expect(result.message).toContain(`'${header}'`);
    expect(result.message).toContain("'Authorization: Bearer <key>'");
    expect(result.message).not.toContain(KEY);
  });

  it.each([
    ['Basic', `Basic ${Buffer.from(`u:${KEY}`).toString('base64')}`],
    ['Token', `Token ${KEY}`],
    ['a bare key', KEY],
  ])('refuses the %s scheme, naming Bearer', (_label, value) => {
    const result = denied(extract(CHAT, { headers: { authorization: value } }));
    expect(result).toMatchObject({ reason: 'invalid_authorization_scheme', param: 'authorization' });
    expect(result.message).toContain('Bearer');
    expect(result.message).not.toContain(KEY);
  });

  it('refuses Bearer followed by more than one token', () => {
    const result = denied(extract(CHAT, { headers: { authorization: `Bearer ${KEY} ${KEY}` } }));
    expect(result).toMatchObject({ reason: 'malformed_authorization_header', param: 'authorization' });
    expect(result.message).toContain('exactly one');
  });

  it('treats an empty Bearer as no key', () => {
    expect(denied(extract(CHAT, { headers: { authorization: 'Bearer ' } })).reason).toBe('missing_credential');
    expect(denied(extract(CHAT, { headers: { authorization: '' } })).reason).toBe('missing_credential');
  });

  it('accepts the same Bearer token repeated (Envoy comma-joins duplicates)', () => {
    expect(extract(CHAT, { headers: { authorization: `Bearer ${KEY},Bearer ${KEY}` } })).toMatchObject({
      ok: true,
      credential: KEY,
    });
    expect(extract(CHAT, { headers: { authorization: `Bearer ${KEY}, bearer ${KEY}` } })).toMatchObject({ ok: true });
  });

  it('refuses two different Bearer tokens as conflicting, without echoing either', () => {
    const result = denied(extract(CHAT, { headers: { authorization: `Bearer ${KEY}, Bearer ${OTHER_KEY}` } }));
    expect(result.reason).toBe('conflicting_credentials');
    expect(result.message).toContain("'authorization'");
    expect(result.message).not.toContain(KEY);
    expect(result.message).not.toContain(OTHER_KEY);
  });

  it('refuses a repeated Authorization header when one copy uses another scheme', () => {
    const result = denied(extract(CHAT, { headers: { authorization: `Bearer ${KEY}, Basic abc` } }));
    expect(result.reason).toBe('invalid_authorization_scheme');
  });

  it.each([true, false])('refuses ?key= (operator switch %s): not a generative-content route', (acceptQueryKey) => {
    const result = denied(extract(CHAT, { query: `key=${KEY}`, acceptQueryKey }));
    expect(result).toMatchObject({ reason: 'query_key_not_accepted', param: QUERY_KEY_PARAMETER });
    expect(result.message).toContain("'Authorization: Bearer <key>'");
    expect(result.message).not.toContain(KEY);
  });
});

describe('messages family (x-api-key or Bearer)', () => {
  it('takes the key from x-api-key', () => {
    expect(extract(MESSAGES, { headers: { 'x-api-key': KEY } })).toEqual({ ok: true, credential: KEY, source: 'x-api-key' });
  });

  it('takes the key from Authorization: Bearer', () => {
    expect(extract(MESSAGES, { headers: { authorization: `Bearer ${KEY}` } })).toEqual({
      ok: true,
      credential: KEY,
      source: 'authorization',
    });
  });

  it('accepts the same key in both headers and reports x-api-key (the preferred source)', () => {
    expect(extract(MESSAGES, { headers: { authorization: `Bearer ${KEY}`, 'x-api-key': KEY } })).toEqual({
      ok: true,
      credential: KEY,
      source: 'x-api-key',
    });
  });

  it('refuses different keys in x-api-key and Authorization, naming both headers', () => {
    const result = denied(extract(MESSAGES, { headers: { authorization: `Bearer ${OTHER_KEY}`, 'x-api-key': KEY } }));
    expect(result.reason).toBe('conflicting_credentials');
    expect(result.message).toContain("'x-api-key'");
    expect(result.message).toContain("'authorization'");
  });

  it('accepts x-api-key repeated with the same value and refuses it with different values', () => {
    expect(extract(MESSAGES, { headers: { 'x-api-key': `${KEY}, ${KEY}` } })).toMatchObject({ ok: true, credential: KEY });
    expect(denied(extract(MESSAGES, { headers: { 'x-api-key': `${KEY},${OTHER_KEY}` } })).reason).toBe('conflicting_credentials');
  });

  it('refuses a missing key, recommending x-api-key first, then Bearer', () => {
    const result = denied(extract(MESSAGES, {}));
    expect(result.reason).toBe('missing_credential');
    expect(result.message).toContain("Send it as 'x-api-key: <key>' or 'Authorization: Bearer <key>'.");
  });

  it.each(['x-vendorg-api-key', 'x-goog-api-key'])('does not read %s, and names the accepted headers', (header) => {
    const result = denied(extract(MESSAGES, { headers: { [header]: KEY } }));
    expect(result.reason).toBe('missing_credential');
    expect(result.message).toContain(`'${header}'`);
    expect(result.message).toContain("'x-api-key: <key>'");
  });

  it('refuses a non-Bearer Authorization even when x-api-key is fine', () => {
    const result = denied(extract(MESSAGES, { headers: { 'x-api-key': KEY, authorization: `Basic ${KEY}` } }));
    expect(result).toMatchObject({ reason: 'invalid_authorization_scheme', param: 'authorization' });
  });

  it('refuses ?key= even with the operator switch on, naming x-api-key', () => {
    const result = denied(extract(MESSAGES, { query: `key=${KEY}`, acceptQueryKey: true }));
    expect(result).toMatchObject({ reason: 'query_key_not_accepted', param: 'key' });
    expect(result.message).toContain("'x-api-key: <key>'");
  });
});

describe('generative-content family (generative key header, Bearer or x-api-key)', () => {
  it.each([
    ['x-vendorg-api-key', { 'x-vendorg-api-key': KEY }, 'x-vendorg-api-key'],
    ['x-goog-api-key', { 'x-goog-api-key': KEY }, 'x-goog-api-key'],
    ['Authorization: Bearer', { authorization: `Bearer ${KEY}` }, 'authorization'],
    ['x-api-key', { 'x-api-key': KEY }, 'x-api-key'],
  ])('takes the key from %s', (_label, headers, source) => {
    expect(extract(GENERATIVE, { headers })).toEqual({ ok: true, credential: KEY, source });
  });

  it('accepts both spellings of the key header carrying the same key', () => {
    expect(extract(GENERATIVE, { headers: { 'x-vendorg-api-key': KEY, 'x-goog-api-key': KEY } })).toEqual({
      ok: true,
      credential: KEY,
      source: 'x-vendorg-api-key',
    });
  });

  it('refuses both spellings carrying different keys as conflicting', () => {
    const result = denied(extract(GENERATIVE, { headers: { 'x-vendorg-api-key': KEY, 'x-goog-api-key': OTHER_KEY } }));
    expect(result.reason).toBe('conflicting_credentials');
    expect(result.message).toContain("'x-vendorg-api-key'");
    expect(result.message).toContain("'x-goog-api-key'");
  });

  it('refuses a generative key header and Bearer carrying different keys', () => {
    const result = denied(extract(GENERATIVE, { headers: { 'x-goog-api-key': KEY, authorization: `Bearer ${OTHER_KEY}` } }));
    expect(result.reason).toBe('conflicting_credentials');
  });

  it('refuses a missing key, recommending the spec header name first', () => {
    const result = denied(extract(GENERATIVE, {}));
    expect(result.reason).toBe('missing_credential');
    expect(result.message).toContain("Send it as 'x-vendorg-api-key: <key>', 'Authorization: Bearer <key>' or 'x-api-key: <key>'.");
  });

  describe('with spec-only header spellings', () => {
    it('still takes x-vendorg-api-key', () => {
      expect(extract(GENERATIVE, { headers: { 'x-vendorg-api-key': KEY }, names: SPEC_ONLY })).toMatchObject({
        ok: true,
        source: 'x-vendorg-api-key',
      });
    });

    it('does not read x-goog-api-key, and points to x-vendorg-api-key', () => {
      const result = denied(extract(GENERATIVE, { headers: { 'x-goog-api-key': KEY }, names: SPEC_ONLY }));
      expect(result.reason).toBe('missing_credential');
      expect(result.message).toContain("'x-goog-api-key'");
      expect(result.message).toContain("'x-vendorg-api-key: <key>'");
    });

    it('ignores x-goog-api-key next to an accepted header (no conflict is seen)', () => {
      expect(extract(GENERATIVE, { headers: { 'x-vendorg-api-key': KEY, 'x-goog-api-key': OTHER_KEY }, names: SPEC_ONLY })).toEqual({
        ok: true,
        credential: KEY,
        source: 'x-vendorg-api-key',
      });
    });
  });

  describe('?key= query parameter', () => {
    it('is accepted when the operator turns it on', () => {
      expect(extract(GENERATIVE, { query: `alt=sse&key=${KEY}`, acceptQueryKey: true })).toEqual({
        ok: true,
        credential: KEY,
        source: 'query:key',
      });
    });

    it('is refused when the operator has not turned it on, naming the accepted header', () => {
      const result = denied(extract(GENERATIVE, { query: `key=${KEY}`, acceptQueryKey: false }));
      expect(result).toMatchObject({ reason: 'query_key_not_accepted', param: 'key' });
      expect(result.message).toContain("'?key='");
      expect(result.message).toContain("'x-vendorg-api-key: <key>'");
      expect(result.message).not.toContain(KEY);
    });

    it('when empty counts as no key', () => {
      expect(denied(extract(GENERATIVE, { query: 'key=', acceptQueryKey: true })).reason).toBe('missing_credential');
      expect(denied(extract(GENERATIVE, { query: 'key=', acceptQueryKey: false })).reason).toBe('missing_credential');
    });

    it('with the same key as a header is fine; the header is the reported source', () => {
      expect(extract(GENERATIVE, { headers: { 'x-goog-api-key': KEY }, query: `key=${KEY}`, acceptQueryKey: true })).toEqual({
        ok: true,
        credential: KEY,
        source: 'x-goog-api-key',
      });
    });

    it('with a different key from a header is conflicting, naming both places', () => {
      const result = denied(extract(GENERATIVE, { headers: { 'x-goog-api-key': KEY }, query: `key=${OTHER_KEY}`, acceptQueryKey: true }));
      expect(result.reason).toBe('conflicting_credentials');
      expect(result.message).toContain("'x-goog-api-key'");
      expect(result.message).toContain("'query:key'");
    });

    it('given twice with different keys is conflicting', () => {
      const result = denied(extract(GENERATIVE, { query: `key=${KEY}&key=${OTHER_KEY}`, acceptQueryKey: true }));
      expect(result.reason).toBe('conflicting_credentials');
    });

    it('is read URL-decoded', () => {
      const encoded = KEY.replace(/_/g, '%5F');
      expect(encoded).not.toBe(KEY);
      expect(extract(GENERATIVE, { query: `key=${encoded}`, acceptQueryKey: true })).toMatchObject({
        ok: true,
        credential: KEY,
      });
    });
  });
});

describe('other (unknown) paths', () => {
  it.each([
    [{ authorization: `Bearer ${KEY}` }, 'authorization'],
    [{ 'x-api-key': KEY }, 'x-api-key'],
    [{ 'x-vendorg-api-key': KEY }, 'x-vendorg-api-key'],
    [{ 'x-goog-api-key': KEY }, 'x-goog-api-key'],
  ])('take the key from any credential header %#', (headers, source) => {
    expect(extract(OTHER, { headers })).toEqual({ ok: true, credential: KEY, source });
  });

  it('still require a key', () => {
    expect(denied(extract(OTHER, {})).reason).toBe('missing_credential');
  });

  it('refuse ?key= even with the operator switch on', () => {
    expect(denied(extract(OTHER, { query: `key=${KEY}`, acceptQueryKey: true })).reason).toBe('query_key_not_accepted');
  });
});

describe('models route (style from headers)', () => {
  it('without style headers takes the key from any header (chat style)', () => {
    const rules = rulesForModelsRoute({ 'x-api-key': KEY }, '/v1/models', BOTH_SPELLINGS);
    expect(rules.style).toBe('chat');
    expect(extract(rules, { headers: { 'x-api-key': KEY } })).toMatchObject({ ok: true, source: 'x-api-key' });
  });

  it('with a version header follows messages rules', () => {
    const headers = { 'anthropic-version': '2023-06-01', 'x-api-key': KEY };
    const rules = rulesForModelsRoute(headers, '/v1/models', BOTH_SPELLINGS);
    expect(rules).toBe(MESSAGES);
    expect(extract(rules, { headers })).toMatchObject({ ok: true, source: 'x-api-key' });
  });
});

describe('messages never echo a credential', () => {
  const cases: [string, FamilyHeaderRules, Call][] = [
    ['scheme', CHAT, { headers: { authorization: `Token ${KEY}` } }],
    ['two tokens', CHAT, { headers: { authorization: `Bearer ${KEY} ${OTHER_KEY}` } }],
    ['conflict', OTHER, { headers: { authorization: `Bearer ${KEY}`, 'x-api-key': OTHER_KEY } }],
    ['ignored header', CHAT, { headers: { 'x-goog-api-key': KEY } }],
    ['query', GENERATIVE, { query: `key=${KEY}` }],
  ];
  it.each(cases)('%s', (_label, rules, call) => {
    const result = denied(extract(rules, call));
    expect(JSON.stringify(result)).not.toContain(KEY.slice(8));
    expect(JSON.stringify(result)).not.toContain(OTHER_KEY.slice(8));
  });
});
