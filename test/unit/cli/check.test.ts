import { InvalidArgumentError } from 'commander';
import { checkRequestFor, envoyViewOf, type CheckResponseMessage } from '../../../src/cli/check-client';
import { checkViewOf, maskSecret, renderCheckView } from '../../../src/cli/check-view';
import { grpcTargetOption, headerLineOption, httpMethodOption, requestIdOption, requestPathOption } from '../../../src/cli/option-parsers';
import { toAuthRequest } from '../../../src/check/check-request';
import { generateCustomerKey } from '../../../src/keys/customer-key';
import { loadCheckTarget } from '../../../src/platform/settings';

const refuses = (parse: () => unknown, says: string) => {
  expect(parse).toThrow(InvalidArgumentError);
  expect(parse).toThrow(says);
};

describe('check options', () => {
  it('takes header lines as curl does: name lower-cased, value trimmed, repeats kept in order', () => {
    const first = headerLineOption('Authorization:  Bearer abc ');
    expect(headerLineOption('X-Api-Key:', first)).toEqual([
      { name: 'authorization', value: 'Bearer abc' },
      { name: 'x-api-key', value: '' },
    ]);
    expect(headerLineOption('x-a: b: c')).toEqual([{ name: 'x-a', value: 'b: c' }]);
  });

  it.each([
    ['no colon', "must be written 'name: value'"],
    [': value', 'has no header name'],
    [':authority: x', 'has no header name'],
    ['bad name: x', "'bad name' is not a header name"],
    ['x-a: one\r\ntwo', 'control character'],
    ['x-a: nul\u0000', 'control character'],
  ])('refuses the header line %j', (line, says) => refuses(() => headerLineOption(line), says));

  it('upper-cases a known method and refuses others', () => {
    expect(httpMethodOption('post')).toBe('POST');
    expect(httpMethodOption('GET')).toBe('GET');
    refuses(() => httpMethodOption('FETCH'), 'must be one of GET');
    refuses(() => httpMethodOption(''), 'must be one of GET');
  });

  it('takes a path with its query string, and refuses anything Envoy would not be given', () => {
    expect(requestPathOption('/v1beta/models/gemini-2.0-flash:generateContent?alt=sse&key=x')).toBe(
      '/v1beta/models/gemini-2.0-flash:generateContent?alt=sse&key=x',
    );
    refuses(() => requestPathOption('v1/models'), 'must start with /');
    refuses(() => requestPathOption(''), 'must start with /');
    refuses(() => requestPathOption('http://localhost:8080/v1/models'), 'must be the path only');
    refuses(() => requestPathOption('/v1/a b'), 'percent-encode');
    refuses(() => requestPathOption('/v1/é'), 'percent-encode');
    refuses(() => requestPathOption('/v1/models#top'), 'fragment');
  });

  it('takes host:port for --grpc-url', () => {
    expect(grpcTargetOption('127.0.0.1:9191')).toBe('127.0.0.1:9191');
    expect(grpcTargetOption('gateway-authz.internal:9191')).toBe('gateway-authz.internal:9191');
    expect(grpcTargetOption('[::1]:1')).toBe('[::1]:1');
    refuses(() => grpcTargetOption('grpc://127.0.0.1:9191'), 'without a scheme');
    refuses(() => grpcTargetOption('127.0.0.1'), 'host:port');
    refuses(() => grpcTargetOption('127.0.0.1:0'), 'from 1 to 65535');
    refuses(() => grpcTargetOption('127.0.0.1:65536'), 'from 1 to 65535');
  });

  it('takes 1 to 200 visible ASCII characters as a request id', () => {
    expect(requestIdOption('a'.repeat(200))).toBe('a'.repeat(200));
    refuses(() => requestIdOption('a'.repeat(201)), 'visible ASCII');
    refuses(() => requestIdOption(''), 'visible ASCII');
    refuses(() => requestIdOption('a b'), 'visible ASCII');
  });

  it('defaults the target to 127.0.0.1 and GRPC_PORT, else 9191', () => {
    expect(loadCheckTarget({})).toBe('127.0.0.1:9191');
    expect(loadCheckTarget({ GRPC_PORT: ' ' })).toBe('127.0.0.1:9191');
    expect(loadCheckTarget({ GRPC_PORT: ' 9300 ' })).toBe('127.0.0.1:9300');
    expect(() => loadCheckTarget({ GRPC_PORT: '0' })).toThrow("GRPC_PORT must be a port number from 1 to 65535, got '0'");
    expect(() => loadCheckTarget({ GRPC_PORT: 'x' })).toThrow('GRPC_PORT must be');
  });
});

describe('the CheckRequest check sends', () => {
  it('is what Envoy sends: Host as :authority, repeats comma-joined, x-request-id and x-forwarded-proto added', () => {
    const view = envoyViewOf({
      method: 'POST',
      path: '/v1/messages?beta=true',
      headers: [
        { name: 'host', value: 'api.example.test' },
        { name: 'x-api-key', value: 'a' },
        { name: 'x-api-key', value: 'b' },
      ],
      requestId: 'req-1',
    });
    expect(view).toEqual({
      method: 'POST',
      path: '/v1/messages?beta=true',
      authority: 'api.example.test',
      requestId: 'req-1',
      headers: { 'x-api-key': 'a,b', 'x-forwarded-proto': 'http', 'x-request-id': 'req-1' },
      sourceAddress: '127.0.0.1',
    });
    const message = checkRequestFor(view, 1_700_000_000_123) as { attributes: { request: { http: Record<string, unknown> } } };
    expect(message.attributes.request.http).toMatchObject({
      method: 'POST',
      path: '/v1/messages?beta=true',
      host: 'api.example.test',
      scheme: 'http',
      protocol: 'HTTP/1.1',
      headers: {
        ':authority': 'api.example.test',
        ':path': '/v1/messages?beta=true',
        ':method': 'POST',
        ':scheme': 'http',
        'x-api-key': 'a,b',
        'x-forwarded-proto': 'http',
        'x-request-id': 'req-1',
      },
    });
    // The service reads it as the request it stands for.
    expect(toAuthRequest(message)).toMatchObject({
      method: 'POST',
      path: '/v1/messages?beta=true',
      requestId: 'req-1',
      sourceAddress: '127.0.0.1',
    });
  });

  it("defaults the host to Envoy's listener and the request id to a new UUID; a given x-request-id header is kept", () => {
    const view = envoyViewOf({ method: 'GET', path: '/v1/models', headers: [] });
    expect(view.authority).toBe('localhost:8080');
    expect(view.requestId).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(envoyViewOf({ method: 'GET', path: '/', headers: [{ name: 'x-request-id', value: 'mine' }] }).requestId).toBe('mine');
  });
});

describe('what check prints', () => {
  const key = generateCustomerKey('live');
  const prefix = key.slice(0, 12);

  it('masks a secret to the display prefix, and never more than half of it', () => {
    expect(maskSecret(key)).toBe(`${prefix}…`);
    expect(maskSecret('abcdef')).toBe('abc…');
    expect(maskSecret('a')).toBe('…');
  });

  it('masks every credential it was given, even where the service would echo one', () => {
    const sent = envoyViewOf({
      method: 'GET',
      path: `/v1/models/${key}?key=${key}&x=1`,
      headers: [
        { name: 'authorization', value: `Bearer ${key}` },
        { name: 'x-goog-api-key', value: 'AIzaSyA-provider-key-0123456789' },
        { name: 'x-note', value: `see ${key}` },
      ],
    });
    // A service that puts the credentials back into its answer (ours never does): check still prints no full one.
    const response: CheckResponseMessage = {
      status: { code: 16, message: 'unknown_key' },
      denied_response: {
        status: { code: 401 },
        headers: [
          { header: { key: 'x-gateway-error-code', value: 'unknown_key' } },
          { header: { key: 'x-echo', value: 'AIzaSyA-provider-key-0123456789' } },
        ],
        body: JSON.stringify({ error: { message: `bad key ${key}` } }),
      },
    };
    const view = checkViewOf('127.0.0.1:9191', sent, response);
    const printed = renderCheckView(view) + JSON.stringify(view);
    expect(printed).not.toContain(key);
    expect(printed).not.toContain('AIzaSyA-provider-key-0123456789');
    expect(view.request.headers).toMatchObject({
      authorization: `Bearer ${prefix}…`,
      'x-goog-api-key': 'AIzaSyA-prov…',
      'x-note': `see ${prefix}…`,
    });
    expect(view.request.path).toBe(`/v1/models/${prefix}…?key=${prefix}…&x=1`);
    expect(view).toMatchObject({ decision: 'deny', httpStatus: 401, code: 'unknown_key', headers: { 'x-echo': 'AIzaSyA-prov…' } });
  });

  it('masks a percent-encoded query key name, each of several comma-joined keys, and a short credential', () => {
    const other = generateCustomerKey('test');
    const sent = envoyViewOf({
      method: 'GET',
      path: '/v1/models?k%65y=short-secret-value',
      headers: [
        { name: 'x-api-key', value: `${key}, ${other}` },
        // Too short to be searched for in text: masked where it stands.
        { name: 'authorization', value: 'Bearer abc123' },
      ],
    });
    const view = checkViewOf('t:1', sent, { status: { code: 0 }, ok_response: null });
    expect(view.request.path).toBe('/v1/models?k%65y=short-sec…');
    expect(view.request.headers['x-api-key']).toBe(`${prefix}…, ${other.slice(0, 12)}…`);
    expect(view.request.headers.authorization).toBe('Bearer abc…');
  });

  it('renders an allow: what Envoy sets, removes (names only) and adds', () => {
    const sent = envoyViewOf({
      method: 'GET',
      path: '/v1/models',
      headers: [{ name: 'authorization', value: `Bearer ${key}` }],
      requestId: 'r1',
    });
    const view = checkViewOf('127.0.0.1:9191', sent, {
      status: { code: 0, message: '' },
      ok_response: {
        headers: [{ header: { key: 'x-gateway-account-id', value: 'acme' } }],
        headers_to_remove: ['authorization'],
        query_parameters_to_remove: [],
        response_headers_to_add: [{ header: { key: 'x-ratelimit-remaining-requests', value: '9' } }],
      },
    });
    expect(renderCheckView(view)).toBe(
      [
        'Check sent to 127.0.0.1:9191: GET /v1/models',
        '  :authority: localhost:8080',
        `  authorization: Bearer ${prefix}…`,
        '  x-forwarded-proto: http',
        '  x-request-id: r1',
        '',
        'ALLOW: Envoy forwards the request upstream.',
        'Headers set on the upstream request:',
        '  x-gateway-account-id: acme',
        'Headers removed: authorization',
        'Query parameters removed: (none)',
        'Headers added to the response:',
        '  x-ratelimit-remaining-requests: 9',
        '',
      ].join('\n'),
    );
  });

  it('treats a denial without denied_response as Envoy does (403), and shows control characters escaped', () => {
    const sent = envoyViewOf({ method: 'GET', path: '/x', headers: [], requestId: 'r2' });
    const view = checkViewOf('h:1', sent, {
      status: { code: 7, message: 'no' },
      denied_response: { headers: [], body: 'line\n\u001b[2J' },
    });
    expect(view).toMatchObject({ decision: 'deny', httpStatus: 403, code: null, grpcStatus: { code: 7, message: 'no' } });
    expect(renderCheckView(view)).toContain(
      '\nDENY: 403 Forbidden, no x-gateway-error-code. Envoy answers the client:\n  (none)\n\nline\\n\\x1b[2J\n',
    );
  });
});
