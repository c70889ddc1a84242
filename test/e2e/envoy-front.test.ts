/**
 * Pins the Envoy behaviour that test/e2e/envoy-front.ts imitates (HTTP
 * connection manager, ext_authz filter, router), against a stub authz server
 * built from Envoy's OFFICIAL protos (as Envoy's own client is) and the fake
 * upstream. If the e2e tests are to mean anything for the real deployment,
 * the front must be Envoy in every rule the gateway relies on.
 */
import * as http from 'node:http';

import * as grpc from '@grpc/grpc-js';

import { type EnvoyCheckRequest } from '../support/envoy-official-client';
import { ALLOW, startStubAuthz, type StubAuthz } from '../support/stub-authz';
import { mutateQuery, requestIdSettingsFromEnvoyYaml, sendHttp, startEnvoyFront, type EnvoyFront } from './envoy-front';
import { startFakeUpstream, type FakeUpstream } from './fake-upstream';

function option(key: string, value: string, extra: object = {}): object {
  return { header: { key, value }, ...extra };
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

let stub: StubAuthz;
let upstream: FakeUpstream;
let front: EnvoyFront;

beforeAll(async () => {
  stub = await startStubAuthz();
  upstream = await startFakeUpstream({ sseEventGapMs: 60 });
  front = await startEnvoyFront({ authzAddress: stub.address, upstreamUrl: upstream.url });
});

afterAll(async () => {
  await front?.close();
  await upstream?.close();
  await stub?.close();
});

beforeEach(() => {
  stub.handler = async () => ALLOW;
  front.checks.length = 0;
  upstream.requests.length = 0;
});

// ---------------------------------------------------------------------------

describe('CheckRequest: what the front sends, as Envoy fills it', () => {
  it('carries lower-case headers with the pseudo-headers, the query in :path and path, and Envoy-only fields', async () => {
    let seen: EnvoyCheckRequest | undefined;
    stub.handler = async (request) => {
      seen = request;
      return ALLOW;
    };
    const reply = await sendHttp(front.url, {
      method: 'POST',
      path: '/v1/chat/completions?a=1&b=%2F',
      headers: {
        Host: 'api.example.test',
        'X-Mixed-Case': 'Value',
        'x-dup': ['one', 'two'],
        Authorization: ['Bearer a', 'Bearer b'],
        'content-type': 'application/json',
      },
      body: JSON.stringify({ model: 'm' }),
    });
    expect(reply.status).toBe(200);

    const http = seen!.attributes.request.http;
    expect(http.headers).toMatchObject({
      ':authority': 'api.example.test',
      ':path': '/v1/chat/completions?a=1&b=%2F',
      ':method': 'POST',
      ':scheme': 'http',
      'x-mixed-case': 'Value',
      'x-dup': 'one,two', // Envoy joins repeated headers with ',' (no space)
      authorization: 'Bearer a,Bearer b',
      'content-type': 'application/json',
      'x-forwarded-proto': 'http',
    });
    for (const key of Object.keys(http.headers)) expect(key).toBe(key.toLowerCase());
    expect(http.headers.host).toBeUndefined(); // Host is :authority in Envoy's header map
    expect(http.headers.connection).toBeUndefined(); // hop-by-hop, removed by the connection manager
    expect(http.headers['x-request-id']).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(http).toMatchObject({
      method: 'POST',
      path: '/v1/chat/completions?a=1&b=%2F',
      host: 'api.example.test',
      scheme: 'http',
      query: '',
      fragment: '',
      protocol: 'HTTP/1.1',
      size: '0',
      body: '',
    });
    expect(http.id).toMatch(/^\d+$/);
    expect(http.id).not.toBe(http.headers['x-request-id']);
    expect(seen!.attributes.source.address.socket_address).toMatchObject({ address: '127.0.0.1', protocol: 'TCP' });
    expect(seen!.attributes.source.address.socket_address.port_value).toBeGreaterThan(0);
    expect(seen!.attributes.destination.address.socket_address).toMatchObject({ address: '127.0.0.1', port_value: front.port });
    expect(front.checks).toHaveLength(1);

    // The x-request-id Envoy added travels upstream too.
    expect(upstream.requests[0]!.headers['x-request-id']).toBe(http.headers['x-request-id']);
  });

  it("replaces the client's x-request-id (preserve_external_request_id: false) and drops a client-sent x-envoy-auth-partial-body from the Check", async () => {
    expect(requestIdSettingsFromEnvoyYaml()).toEqual({ preserveExternalRequestId: false });
    await sendHttp(front.url, {
      path: '/v1/models',
      headers: { 'x-request-id': 'client-chosen-id', 'x-envoy-auth-partial-body': 'true' },
    });
    const headers = (front.checks[0] as EnvoyCheckRequest).attributes.request.http.headers;
    // The id counts a metered answer once: a client that could choose it could make a second answer look like the first.
    expect(headers['x-request-id']).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(headers['x-envoy-auth-partial-body']).toBeUndefined();
    expect(upstream.requests[0]!.headers['x-request-id']).toBe(headers['x-request-id']);
  });

  it('does not buffer the body: Check is called while the body is still arriving, and the body is streamed upstream', async () => {
    let checkArrived!: () => void;
    const arrived = new Promise<void>((resolve) => (checkArrived = resolve));
    stub.handler = async () => {
      checkArrived();
      return ALLOW;
    };
    const done = new Promise<{ status: number; body: string }>((resolve, reject) => {
      const req = http.request(
        {
          hostname: '127.0.0.1',
          port: front.port,
          method: 'POST',
          path: '/v1/chat/completions',
          agent: false,
          headers: { 'content-type': 'application/json' },
        },
        (res) => {
          let body = '';
          res.on('data', (c: Buffer) => (body += c.toString()));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
        },
      );
      req.on('error', reject);
      req.write('{"model":"streamed-');
      // The rest of the body is only sent once the Check has happened.
      void arrived.then(() => req.end('model"}'));
    });
    await arrived;
    const reply = await done;
    expect(reply.status).toBe(200);
    expect((JSON.parse(reply.body) as { model: string }).model).toBe('streamed-model');
    expect(upstream.requests[0]!.body).toBe('{"model":"streamed-model"}');
    expect((front.checks[0] as EnvoyCheckRequest).attributes.request.http.size).toBe('0');
  });
});

describe('RPC failures: status_on_error with an empty body', () => {
  it('sends the ext_authz timeout (250 ms by default) as the gRPC deadline', async () => {
    let remainingMs = -1;
    stub.handler = async (_request, call) => {
      remainingMs = new Date(call.getDeadline()).getTime() - Date.now();
      return ALLOW;
    };
    await sendHttp(front.url, { path: '/v1/models' });
    expect(remainingMs).toBeGreaterThan(100); // minus the time the call took to arrive
    expect(remainingMs).toBeLessThanOrEqual(250);
  });

  it('answers 503 with an empty body when the authz server misses the deadline, without reaching the upstream', async () => {
    stub.handler = async () => {
      await sleep(1000);
      return ALLOW;
    };
    const started = Date.now();
    const reply = await sendHttp(front.url, { method: 'POST', path: '/v1/chat/completions', body: '{}' });
    expect(reply.status).toBe(503);
    expect(reply.body).toBe('');
    expect(reply.headers['content-type']).toBeUndefined();
    expect(Date.now() - started).toBeLessThan(900);
    await sleep(1100 - (Date.now() - started)); // the late "allow" must not let it through afterwards
    expect(upstream.requests).toHaveLength(0);
  });

  it('answers 503 when the handler returns a gRPC error status (not a deny)', async () => {
    stub.handler = async () => ({ code: grpc.status.UNAVAILABLE, details: 'store down', metadata: new grpc.Metadata() });
    const reply = await sendHttp(front.url, { path: '/v1/models' });
    expect(reply.status).toBe(503);
    expect(reply.body).toBe('');
    expect(upstream.requests).toHaveLength(0);
  });

  it('answers status_on_error when nothing listens at the authz address, and honours a configured status', async () => {
    const unreachable = await startEnvoyFront({ authzAddress: '127.0.0.1:1', upstreamUrl: upstream.url, statusOnError: 403 });
    try {
      const reply = await sendHttp(unreachable.url, { path: '/v1/models' });
      expect(reply.status).toBe(403);
      expect(reply.body).toBe('');
      expect(upstream.requests).toHaveLength(0);
    } finally {
      await unreachable.close();
    }
  });
});

describe('allowed: ok_response applied to the upstream request', () => {
  it('removes headers_to_remove, but never pseudo-headers or host', async () => {
    stub.handler = async () => ({
      status: { code: 0 },
      ok_response: { headers_to_remove: ['authorization', 'X-Api-Key', ':path', ':authority', 'host', 'not-present'] },
    });
    const reply = await sendHttp(front.url, {
      path: '/v1/models/gpt-x',
      headers: { host: 'api.example.test', authorization: 'Bearer k', 'x-api-key': 'k', 'x-kept': 'yes' },
    });
    expect(reply.status).toBe(200);
    const received = upstream.requests[0]!;
    expect(received.path).toBe('/v1/models/gpt-x');
    expect(received.headers.host).toBe('api.example.test');
    expect(received.headers.authorization).toBeUndefined();
    expect(received.headers['x-api-key']).toBeUndefined();
    expect(received.headers['x-kept']).toBe('yes');
  });

  // [header, client value, HeaderValueOption fields, what the upstream receives]
  const APPEND_RULES: [string, string | undefined, object, string | undefined][] = [
    // `append` (BoolValue) set: Envoy <= 1.36 reads only this, and it wins over append_action.
    ['x-bool-false', 'client', { append: { value: false } }, 'authz'],
    ['x-bool-false-new', undefined, { append: { value: false } }, 'authz'],
    ['x-bool-true', 'client', { append: { value: true } }, 'client,authz'],
    ['x-bool-true-new', undefined, { append: { value: true } }, 'authz'],
    ['x-bool-false-wins', 'client', { append: { value: false }, append_action: 'APPEND_IF_EXISTS_OR_ADD' }, 'authz'],
    ['x-bool-true-wins', 'client', { append: { value: true }, append_action: 'OVERWRITE_IF_EXISTS_OR_ADD' }, 'client,authz'],
    // `append` unset: append_action, whose default (0) APPENDS.
    ['x-action-default', 'client', {}, 'client,authz'],
    ['x-action-default-new', undefined, {}, 'authz'],
    ['x-add-if-absent', 'client', { append_action: 'ADD_IF_ABSENT' }, 'client'],
    ['x-add-if-absent-new', undefined, { append_action: 'ADD_IF_ABSENT' }, 'authz'],
    ['x-overwrite-or-add', 'client', { append_action: 'OVERWRITE_IF_EXISTS_OR_ADD' }, 'authz'],
    ['x-overwrite-or-add-new', undefined, { append_action: 'OVERWRITE_IF_EXISTS_OR_ADD' }, 'authz'],
    ['x-overwrite-if-exists', 'client', { append_action: 'OVERWRITE_IF_EXISTS' }, 'authz'],
    ['x-overwrite-if-exists-new', undefined, { append_action: 'OVERWRITE_IF_EXISTS' }, undefined],
    // What the gateway sends for identity headers: both fields say overwrite, so a client cannot spoof them.
    ['x-gateway-account-id', 'spoofed', { append: { value: false }, append_action: 'OVERWRITE_IF_EXISTS_OR_ADD' }, 'authz'],
  ];

  it.each(APPEND_RULES)('request header %s (client %p, option %j) → %p upstream', async (key, clientValue, fields, expected) => {
    stub.handler = async () => ({ status: { code: 0 }, ok_response: { headers: [option(key, 'authz', fields)] } });
    await sendHttp(front.url, { path: '/v1/models', headers: clientValue === undefined ? {} : { [key]: clientValue } });
    expect(upstream.requests[0]!.headers[key]).toBe(expected);
  });

  it('applies query_parameters_to_remove and query_parameters_to_set to the upstream path only', async () => {
    stub.handler = async () => ({
      status: { code: 0 },
      ok_response: {
        query_parameters_to_remove: ['key'],
        query_parameters_to_set: [
          { key: 'alt', value: 'sse' },
          { key: 'new', value: 'a b' },
        ],
      },
    });
    await sendHttp(front.url, {
      method: 'POST',
      path: '/v1beta/models/gemini-x:streamGenerateContent?key=secret&alt=json&x=%2F&key=again',
    });
    expect(upstream.requests[0]!.path).toBe('/v1beta/models/gemini-x:streamGenerateContent?alt=sse&x=%2F&new=a%20b');
    // The Check saw the original target.
    expect((front.checks[0] as EnvoyCheckRequest).attributes.request.http.path).toContain('key=secret');
  });

  it('drops the ? when every query parameter is removed', () => {
    expect(mutateQuery('/v1/x?key=a', ['key'], [])).toBe('/v1/x');
    expect(mutateQuery('/v1/x?key=a', [], [])).toBe('/v1/x?key=a');
  });

  it('removes query parameters by their raw name only, as Envoy does', () => {
    expect(mutateQuery('/v1/x?k%65y=a&key=b&z=1', ['key'], [])).toBe('/v1/x?k%65y=a&z=1');
  });

  it('forwards method and body, and returns the upstream status, headers and body', async () => {
    const reply = await sendHttp(front.url, {
      method: 'POST',
      path: '/v1/messages',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'claude-x', max_tokens: 1, messages: [] }),
    });
    expect(reply.status).toBe(200);
    expect(reply.headers['content-type']).toBe('application/json');
    expect(reply.json).toMatchObject({ type: 'message', model: 'claude-x' });
    expect(upstream.requests[0]).toMatchObject({ method: 'POST', path: '/v1/messages' });
    expect(JSON.parse(upstream.requests[0]!.body)).toMatchObject({ model: 'claude-x' });

    const missing = await sendHttp(front.url, { path: '/nowhere' });
    expect(missing.status).toBe(404); // the upstream's own status passes through
  });

  it('adds response_headers_to_add to the client response by the same append rules', async () => {
    stub.handler = async () => ({
      status: { code: 0 },
      ok_response: {
        response_headers_to_add: [
          option('x-ratelimit-limit-requests', '600', { append: { value: false }, append_action: 'OVERWRITE_IF_EXISTS_OR_ADD' }),
          option('content-type', 'text/html', { append_action: 'ADD_IF_ABSENT' }), // present upstream: kept
          option('x-never', 'x', { append_action: 'OVERWRITE_IF_EXISTS' }), // absent: not added
          option('x-multi', 'a', { append: { value: true } }),
          option('x-multi', 'b', { append: { value: true } }), // response append adds a field line (addCopy)
        ],
      },
    });
    const reply = await sendHttp(front.url, { path: '/v1/models' });
    expect(reply.status).toBe(200);
    expect(reply.headers['x-ratelimit-limit-requests']).toBe('600');
    expect(reply.headers['content-type']).toBe('application/json');
    expect(reply.headers['x-never']).toBeUndefined();
    expect(reply.headerLines['x-multi']).toEqual(['a', 'b']);
  });

  it('streams SSE: the first event reaches the client long before the upstream finishes', async () => {
    const arrivals: number[] = [];
    let text = '';
    const started = Date.now();
    await new Promise<void>((resolve, reject) => {
      const req = http.request(
        {
          hostname: '127.0.0.1',
          port: front.port,
          method: 'POST',
          path: '/v1/chat/completions',
          agent: false,
          headers: { 'content-type': 'application/json' },
        },
        (res) => {
          expect(res.headers['content-type']).toMatch(/^text\/event-stream\b/);
          res.on('data', (chunk: Buffer) => {
            arrivals.push(Date.now() - started);
            text += chunk.toString();
          });
          res.on('end', () => resolve());
          res.on('error', reject);
        },
      );
      req.on('error', reject);
      req.end(JSON.stringify({ model: 'gpt-x', stream: true }));
    });
    expect(text.endsWith('data: [DONE]\n\n')).toBe(true);
    expect(text.match(/^data: /gm)).toHaveLength(5);
    // 5 events 60 ms apart: ≥ 4 gaps between the first and the last arrival.
    expect(arrivals.length).toBeGreaterThanOrEqual(3);
    expect(arrivals.at(-1)! - arrivals[0]!).toBeGreaterThanOrEqual(150);
  });
});

describe('denied: a local reply, and the upstream is never reached', () => {
  it('replies with denied_response status, headers and body', async () => {
    stub.handler = async () => ({
      status: { code: 16, message: 'unknown_key' },
      denied_response: {
        status: { code: 'Unauthorized' },
        headers: [
          option('content-type', 'application/json', { append: { value: false } }),
          option('www-authenticate', 'Bearer realm="gateway-authz"', { append_action: 'OVERWRITE_IF_EXISTS_OR_ADD' }),
          option('set-cookie', 'a=1'),
          option('set-cookie', 'b=2'),
        ],
        body: '{"error":{"code":"unknown_key"}}',
      },
    });
    const reply = await sendHttp(front.url, { method: 'POST', path: '/v1/chat/completions', body: '{"model":"m"}' });
    expect(reply.status).toBe(401);
    expect(reply.headers['content-type']).toBe('application/json');
    expect(reply.headers['www-authenticate']).toBe('Bearer realm="gateway-authz"');
    expect(reply.headerLines['set-cookie']).toEqual(['a=1', 'b=2']);
    expect(reply.json).toEqual({ error: { code: 'unknown_key' } });
    expect(upstream.requests).toHaveLength(0);
  });

  it.each([
    ['no denied_response at all', { status: { code: 7 } }],
    ['denied_response without a status', { status: { code: 16 }, denied_response: { body: '' } }],
    ['denied_response with status 0 (Empty)', { status: { code: 16 }, denied_response: { status: { code: 'Empty' } } }],
    ['a non-zero status with an ok_response', { status: { code: 7 }, ok_response: {} }],
  ])('answers 403 for %s', async (_name, answer) => {
    stub.handler = async () => answer;
    const reply = await sendHttp(front.url, { path: '/v1/models' });
    expect(reply.status).toBe(403);
    expect(reply.body).toBe('');
    expect(upstream.requests).toHaveLength(0);
  });

  it('labels a body without content-type text/plain, as Envoy does', async () => {
    stub.handler = async () => ({ status: { code: 8 }, denied_response: { status: { code: 429 }, body: 'slow down' } });
    const reply = await sendHttp(front.url, { path: '/v1/models' });
    expect(reply.status).toBe(429);
    expect(reply.headers['content-type']).toBe('text/plain');
    expect(reply.body).toBe('slow down');
  });
});
