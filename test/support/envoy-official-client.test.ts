import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';

import { loadAuthorizationService } from '../../src/check/proto-loading';
import {
  DEFAULT_AUTHORITY,
  OFFICIAL_EXTERNAL_AUTH_PROTO,
  OFFICIAL_LOADER_OPTIONS,
  createOfficialCheckClient,
  envoyCheckRequest,
  type EnvoyCheckRequest,
} from './envoy-official-client';

describe('envoyCheckRequest', () => {
  test('builds an Envoy-shaped CheckRequest', () => {
    const req = envoyCheckRequest({
      method: 'post',
      path: '/v1/chat/completions?stream=true',
      headers: { Authorization: 'Bearer sk-test', 'X-Api-Key': 'k1', 'Content-Type': 'application/json' },
      authority: 'api.example.com',
      requestId: 'rid-1',
      scheme: 'https',
      contextExtensions: { plan_scope: 'api' },
      sourceAddress: '203.0.113.7',
    });
    const http = req.attributes.request.http;
    expect(http.headers).toEqual({
      ':authority': 'api.example.com',
      ':path': '/v1/chat/completions?stream=true',
      ':method': 'POST',
      ':scheme': 'https',
      authorization: 'Bearer sk-test',
      'x-api-key': 'k1',
      'content-type': 'application/json',
      'x-forwarded-proto': 'https',
      'x-request-id': 'rid-1',
    });
    expect(http).toMatchObject({
      method: 'POST',
      path: '/v1/chat/completions?stream=true',
      host: 'api.example.com',
      scheme: 'https',
      query: '',
      fragment: '',
      protocol: 'HTTP/1.1',
      size: '0',
    });
    expect(http.id).toMatch(/^\d+$/);
    expect(http.id).not.toBe('rid-1');
    expect(req.attributes.context_extensions).toEqual({ plan_scope: 'api' });
    expect(req.attributes.source.address.socket_address.address).toBe('203.0.113.7');
    expect(req.attributes.source.address.socket_address.port_value).toBeGreaterThan(0);
    expect(req.attributes.destination.address.socket_address.port_value).toBeGreaterThan(0);
    const { seconds, nanos } = req.attributes.request.time;
    expect(Math.abs(Number(seconds) - Date.now() / 1000)).toBeLessThan(5);
    expect(nanos).toBeGreaterThanOrEqual(0);
    expect(nanos).toBeLessThan(1e9);
  });

  test('defaults: GET, http, HTTP/1.1, generated x-request-id, host header becomes :authority', () => {
    const a = envoyCheckRequest({ path: '/health' });
    const b = envoyCheckRequest({ path: '/health' });
    expect(a.attributes.request.http.method).toBe('GET');
    expect(a.attributes.request.http.headers[':method']).toBe('GET');
    expect(a.attributes.request.http.scheme).toBe('http');
    expect(a.attributes.request.http.headers['x-forwarded-proto']).toBe('http');
    expect(a.attributes.request.http.protocol).toBe('HTTP/1.1');
    expect(a.attributes.request.http.host).toBe(DEFAULT_AUTHORITY);
    expect(a.attributes.request.http.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/);
    expect(a.attributes.request.http.headers['x-request-id']).not.toBe(b.attributes.request.http.headers['x-request-id']);
    expect(a.attributes.request.http.id).not.toBe(b.attributes.request.http.id);

    const c = envoyCheckRequest({ path: '/', headers: { Host: 'h.example:8443', 'X-Request-Id': 'given' } });
    expect(c.attributes.request.http.host).toBe('h.example:8443');
    expect(c.attributes.request.http.headers[':authority']).toBe('h.example:8443');
    expect(c.attributes.request.http.headers).not.toHaveProperty('host');
    expect(c.attributes.request.http.headers['x-request-id']).toBe('given');
  });

  test('is accepted by the official CheckRequest type', () => {
    const def = protoLoader.loadSync(OFFICIAL_EXTERNAL_AUTH_PROTO, OFFICIAL_LOADER_OPTIONS);
    expect(def['envoy.service.auth.v3.CheckRequest']).toBeDefined();
    // Serialize/deserialize via the official service definition's serializers.
    const method = (def['envoy.service.auth.v3.Authorization'] as protoLoader.ServiceDefinition)['Check']!;
    const req = envoyCheckRequest({ path: '/v1/models?limit=5', headers: { 'x-api-key': 'k' } });
    const back = method.requestDeserialize(method.requestSerialize(req)) as EnvoyCheckRequest;
    expect(back.attributes.request.http.headers).toEqual(req.attributes.request.http.headers);
    expect(back.attributes.request.http.id).toBe(req.attributes.request.http.id);
    expect(back.attributes.request.time).toEqual(req.attributes.request.time);
    expect(back.attributes.source.address.socket_address.port_value).toBe(req.attributes.source.address.socket_address.port_value);
  });
});

describe('createOfficialCheckClient against a server built from proto/', () => {
  let server: grpc.Server;
  let address: string;
  let lastRequest: EnvoyCheckRequest;

  beforeAll(async () => {
    const { service } = loadAuthorizationService();
    server = new grpc.Server();
    server.addService(service, {
      Check: (call: grpc.ServerUnaryCall<EnvoyCheckRequest, object>, cb: grpc.sendUnaryData<object>) => {
        lastRequest = call.request;
        const path = call.request.attributes.request.http.path;
        if (path === '/boom') {
          cb({ code: grpc.status.UNAVAILABLE, details: 'backend down' });
        } else if (path === '/slow') {
          // Later than the client waits, which is the point; nothing waits for the answer, so it keeps no worker alive.
          setTimeout(() => cb(null, { status: { code: 0 } }), 500).unref();
        } else if (path === '/deny') {
          cb(null, {
            status: { code: grpc.status.UNAUTHENTICATED, message: 'no key' },
            denied_response: {
              status: { code: 'Unauthorized' },
              headers: [
                {
                  header: { key: 'content-type', value: 'application/json' },
                  append: { value: false },
                  append_action: 'OVERWRITE_IF_EXISTS_OR_ADD',
                },
              ],
              body: '{"error":"missing_api_key"}',
            },
          });
        } else {
          cb(null, {
            status: { code: 0 },
            ok_response: {
              headers: [{ header: { key: 'x-customer-id', value: 'cus_1' }, append: { value: false } }],
              headers_to_remove: ['x-api-key'],
            },
            dynamic_metadata: { fields: { customer_id: { stringValue: 'cus_1' } } },
          });
        }
      },
    });
    const port = await new Promise<number>((resolve, reject) =>
      server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))),
    );
    address = `127.0.0.1:${port}`;
  });

  afterAll(async () => {
    await new Promise<void>((resolve) => server.tryShutdown(() => resolve()));
  });

  test('OK response arrives as a plain object with keepCase names and enum names', async () => {
    const client = createOfficialCheckClient(address);
    try {
      const req = envoyCheckRequest({ path: '/v1/models?x=1', headers: { 'x-api-key': 'k' } });
      const res = await client.check(req);
      expect(lastRequest.attributes.request.http.headers['x-api-key']).toBe('k');
      expect(lastRequest.attributes.request.http.size).toBe('0');
      expect(res.status).toEqual({ code: 0, message: '', details: [] });
      expect(res.http_response).toBe('ok_response');
      expect(res.ok_response.headers[0]).toMatchObject({
        header: { key: 'x-customer-id', value: 'cus_1' },
        append: { value: false },
        append_action: 'APPEND_IF_EXISTS_OR_ADD',
      });
      expect(res.ok_response.headers_to_remove).toEqual(['x-api-key']);
      expect(res.dynamic_metadata.fields.customer_id!.stringValue).toBe('cus_1');
    } finally {
      client.close();
    }
  });

  test('denied response', async () => {
    const client = createOfficialCheckClient(address);
    try {
      const res = await client.check(envoyCheckRequest({ path: '/deny' }));
      expect(res.status.code).toBe(grpc.status.UNAUTHENTICATED);
      expect(res.http_response).toBe('denied_response');
      expect(res.denied_response.status.code).toBe('Unauthorized');
      expect(res.denied_response.body).toBe('{"error":"missing_api_key"}');
    } finally {
      client.close();
    }
  });

  test('gRPC errors and deadlines reject with a ServiceError', async () => {
    const client = createOfficialCheckClient(address);
    try {
      await expect(client.check(envoyCheckRequest({ path: '/boom' }))).rejects.toMatchObject({
        code: grpc.status.UNAVAILABLE,
        details: 'backend down',
      });
      await expect(client.check(envoyCheckRequest({ path: '/slow' }), 100)).rejects.toMatchObject({
        code: grpc.status.DEADLINE_EXCEEDED,
      });
    } finally {
      client.close();
    }
  });
});
