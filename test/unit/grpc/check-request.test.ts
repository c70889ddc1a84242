import { toAuthRequest, type CheckRequestMessage } from '../../../src/check/check-request';

function http(fields: NonNullable<NonNullable<NonNullable<CheckRequestMessage['attributes']>['request']>['http']>) {
  return { attributes: { request: { http: fields } } };
}

describe('toAuthRequest', () => {
  describe('headers map (Envoy default)', () => {
    it('gives method, path, headers and request id', () => {
      const request = toAuthRequest(
        http({
          method: 'POST',
          path: '/v1/chat/completions?stream=true',
          headers: { authorization: 'Bearer k', 'x-request-id': 'req-1', ':authority': 'api.example' },
        }),
      );
      expect(request).toEqual({
        method: 'POST',
        path: '/v1/chat/completions?stream=true',
        headers: { authorization: 'Bearer k', 'x-request-id': 'req-1', ':authority': 'api.example' },
        requestId: 'req-1',
      });
    });

    it('lower-cases header names', () => {
      const request = toAuthRequest(http({ headers: { 'X-Api-Key': 'k', Authorization: 'Bearer t' } }));
      expect(request.headers['x-api-key']).toBe('k');
      expect(request.headers.authorization).toBe('Bearer t');
      expect(Object.keys(request.headers).sort()).toEqual(['authorization', 'x-api-key']);
    });

    it('lower-cases names with non-ASCII capitals as toLowerCase does, and keeps lower-case names as they are', () => {
      const request = toAuthRequest(http({ headers: { 'X-ÄPI-Key': 'a', 'x-öffnen': 'b', 'x-api-key': 'c', ':path': '/v1/x' } }));
      expect(Object.keys(request.headers).sort()).toEqual([':path', 'x-api-key', 'x-äpi-key', 'x-öffnen']);
      expect(request.headers['x-äpi-key']).toBe('a');
    });

    it("copies and lower-cases a null-prototype map (the decoder's) that has a capital in a name, and adopts one that has none", () => {
      const mixed = Object.assign(Object.create(null) as Record<string, string>, { 'x-api-key': 'a', 'X-API-KEY': 'b', ':path': '/' });
      const copied = toAuthRequest(http({ headers: mixed }));
      expect(copied.headers).not.toBe(mixed);
      expect({ ...copied.headers }).toEqual({ 'x-api-key': 'a,b', ':path': '/' });
      const lower = Object.assign(Object.create(null) as Record<string, string>, { 'x-api-key': 'a', ':path': '/' });
      expect(toAuthRequest(http({ headers: lower })).headers).toBe(lower);
      const withRaw = toAuthRequest(http({ headers: lower, header_map: { headers: [{ key: 'x-extra', value: 'e' }] } }));
      expect(withRaw.headers).not.toBe(lower);
      expect({ ...withRaw.headers }).toEqual({ 'x-api-key': 'a', ':path': '/', 'x-extra': 'e' });
    });

    it('joins names that differ only in case with a comma', () => {
      const request = toAuthRequest(http({ headers: { 'x-api-key': 'a', 'X-API-KEY': 'b' } }));
      expect(request.headers['x-api-key']).toBe('a,b');
    });

    it('keeps an already comma-joined value as is', () => {
      const request = toAuthRequest(http({ headers: { 'x-api-key': 'a,b' } }));
      expect(request.headers['x-api-key']).toBe('a,b');
    });

    it('upper-cases the method', () => {
      expect(toAuthRequest(http({ method: 'get', path: '/' })).method).toBe('GET');
    });
  });

  describe('header_map with raw values (encode_raw_headers)', () => {
    it('reads raw_value bytes as UTF-8', () => {
      const request = toAuthRequest(
        http({
          method: 'POST',
          path: '/v1/messages',
          header_map: {
            headers: [
              { key: 'x-api-key', raw_value: Buffer.from('gk_live_raw') },
              { key: 'x-request-id', raw_value: new Uint8Array(Buffer.from('req-raw')) },
              { key: 'x-note', raw_value: Buffer.from('café', 'utf8') },
            ],
          },
        }),
      );
      expect(request.headers['x-api-key']).toBe('gk_live_raw');
      expect(request.headers['x-note']).toBe('café');
      expect(request.requestId).toBe('req-raw');
    });

    it('prefers raw_value over value, and falls back to value when raw_value is empty or absent', () => {
      const request = toAuthRequest(
        http({
          header_map: {
            headers: [
              { key: 'a', value: 'from-value', raw_value: Buffer.from('from-raw') },
              { key: 'b', value: 'from-value', raw_value: Buffer.alloc(0) },
              { key: 'c', value: 'only-value' },
              { key: 'd' },
            ],
          },
        }),
      );
      expect(request.headers).toEqual({ a: 'from-raw', b: 'from-value', c: 'only-value', d: '' });
    });

    it('comma-joins repeated entries in order, lower-casing their names', () => {
      const request = toAuthRequest(
        http({
          header_map: {
            headers: [
              { key: 'Authorization', raw_value: Buffer.from('Bearer a') },
              { key: 'x-other', raw_value: Buffer.from('z') },
              { key: 'authorization', raw_value: Buffer.from('Bearer b') },
            ],
          },
        }),
      );
      expect(request.headers.authorization).toBe('Bearer a,Bearer b');
      expect(request.headers['x-other']).toBe('z');
    });

    it('skips entries without a key', () => {
      const request = toAuthRequest(http({ header_map: { headers: [{ value: 'orphan' }, { key: '', value: 'x' }] } }));
      expect(Object.keys(request.headers)).toEqual([]);
    });

    it('folds headers and header_map into one map when both are present', () => {
      const request = toAuthRequest(
        http({ headers: { 'x-api-key': 'a' }, header_map: { headers: [{ key: 'x-api-key', raw_value: Buffer.from('b') }] } }),
      );
      expect(request.headers['x-api-key']).toBe('a,b');
    });
  });

  describe('missing attributes', () => {
    it.each([
      ['an empty message', {}],
      ['no request', { attributes: {} }],
      ['no http', { attributes: { request: {} } }],
      ['an empty http', { attributes: { request: { http: {} } } }],
    ])('%s gives empty method, path, headers and request id', (_label, message: CheckRequestMessage) => {
      const request = toAuthRequest(message);
      expect(request.method).toBe('');
      expect(request.path).toBe('');
      expect(request.requestId).toBe('');
      expect(Object.keys(request.headers)).toEqual([]);
    });
  });

  describe('method and path fall back to pseudo-headers', () => {
    it('from the headers map', () => {
      const request = toAuthRequest(http({ headers: { ':method': 'post', ':path': '/v1/messages?x=1' } }));
      expect(request.method).toBe('POST');
      expect(request.path).toBe('/v1/messages?x=1');
    });

    it('from header_map', () => {
      const request = toAuthRequest(
        http({
          method: '',
          path: '',
          header_map: {
            headers: [
              { key: ':method', raw_value: Buffer.from('GET') },
              { key: ':path', raw_value: Buffer.from('/v1/models') },
            ],
          },
        }),
      );
      expect(request.method).toBe('GET');
      expect(request.path).toBe('/v1/models');
    });

    it('the http attributes win over the pseudo-headers', () => {
      const request = toAuthRequest(http({ method: 'POST', path: '/v1/messages', headers: { ':method': 'GET', ':path': '/public' } }));
      expect(request.method).toBe('POST');
      expect(request.path).toBe('/v1/messages');
    });
  });

  describe('the header map', () => {
    it('has no prototype, so header names such as __proto__ or constructor are plain entries', () => {
      const request = toAuthRequest(
        http({
          header_map: {
            headers: [
              { key: '__proto__', value: 'p' },
              { key: 'constructor', value: 'c' },
            ],
          },
        }),
      );
      expect(Object.getPrototypeOf(request.headers)).toBeNull();
      expect(request.headers['__proto__']).toBe('p');
      expect(request.headers['constructor']).toBe('c');
      expect('toString' in request.headers).toBe(false);
    });

    it('a missing x-request-id gives an empty request id', () => {
      expect(toAuthRequest(http({ headers: { 'x-api-key': 'k' } })).requestId).toBe('');
    });
  });
});
