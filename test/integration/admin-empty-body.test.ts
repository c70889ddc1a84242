import * as http from 'node:http';
import { startTestRedis, type TestRedis } from '../support/redis-server';
import { startAppUnderTest, TEST_ADMIN_TOKEN, type AppUnderTest } from '../support/running-app';

/**
 * A generic HTTP client (curl -X POST -H 'content-type: application/json', a
 * fetch without body, an HTTP library that always sets the header) sends
 * `Content-Type: application/json` and no body. Every action endpoint treats
 * that as `{}`: endpoints whose body is optional work, endpoints that need a
 * field name the missing field. A malformed non-empty body is still 400 invalid_json.
 * Over real HTTP, against real Redis.
 */
let redis: TestRedis;
let server: AppUnderTest;

beforeAll(async () => {
  redis = await startTestRedis();
  server = await startAppUnderTest({ redisUrl: redis.url });
  expect((await server.admin('POST', '/admin/accounts', { id: 'empty-body', name: 'Empty Body Ltd' })).status).toBe(201);
  expect((await server.admin('PATCH', '/admin/accounts/empty-body', { billing: { creditBalance: 100 } })).status).toBe(200);
});
afterAll(async () => {
  await server?.close();
  await redis?.stop();
});

interface Answer {
  status: number;
  body: { id?: string; status?: string; error?: { code: string; message: string; field?: string } } & Record<string, unknown>;
}

/** fetch with the JSON content type and no body: undici sends `content-length: 0`. */
async function fetchWithoutBody(method: string, path: string, contentType = 'application/json'): Promise<Answer> {
  const response = await fetch(`${server.adminUrl}${path}`, {
    method,
    headers: { authorization: `Bearer ${TEST_ADMIN_TOKEN}`, 'content-type': contentType },
  });
  const text = await response.text();
  return { status: response.status, body: text ? (JSON.parse(text) as Answer['body']) : {} };
}

/** What curl -X POST -H 'content-type: application/json' sends: no content-length and no body at all. */
function curlStyleWithoutBody(method: string, path: string): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const request = http.request(`${server.adminUrl}${path}`, {
      method,
      headers: { authorization: `Bearer ${TEST_ADMIN_TOKEN}`, 'content-type': 'application/json' },
    });
    request.on('response', (response) => {
      let text = '';
      response.setEncoding('utf8');
      response.on('data', (chunk: string) => (text += chunk));
      response.on('end', () => resolve({ status: response.statusCode ?? 0, body: text ? (JSON.parse(text) as Answer['body']) : {} }));
    });
    request.on('error', reject);
    request.end();
  });
}

async function createKey(): Promise<string> {
  const created = await server.admin('POST', '/admin/accounts/empty-body/keys', { name: 'to act on' });
  expect(created.status).toBe(201);
  return created.body.id;
}

describe.each([
  ['fetch (content-length: 0)', fetchWithoutBody],
  ['curl style (no content-length)', curlStyleWithoutBody],
] as const)('Content-Type: application/json with an empty body, sent by %s', (_client, send) => {
  it('revokes a key (POST /admin/keys/{id}/revoke)', async () => {
    const keyId = await createKey();
    const revoked = await send('POST', `/admin/keys/${keyId}/revoke`);
    expect(revoked).toMatchObject({ status: 200, body: { id: keyId, status: 'revoked' } });
  });

  it('rotates a key at once, as with {} (POST /admin/keys/{id}/rotate)', async () => {
    const keyId = await createKey();
    const rotated = await send('POST', `/admin/keys/${keyId}/rotate`);
    expect(rotated.status).toBe(201);
    expect(rotated.body).toMatchObject({ replaces: keyId, oldKey: { id: keyId, status: 'revoked' } }); // no grace: refused at once
  });

  it('creates a key with the defaults (POST /admin/accounts/{id}/keys)', async () => {
    const created = await send('POST', '/admin/accounts/empty-body/keys');
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({ accountId: 'empty-body', environment: 'live', name: 'live key' });
  });

  it.each([
    ['POST', '/admin/accounts/empty-body/credit', 'amount'],
    ['POST', '/admin/accounts', 'id'],
  ])('still requires the body of %s %s, naming the missing field', async (method, path, field) => {
    const answer = await send(method, path);
    expect(answer.status).toBe(400);
    expect(answer.body.error).toMatchObject({ code: 'invalid_field', field });
  });

  it.each([['/admin/accounts/empty-body'], ['/admin/keys/KEY']])(
    'answers PATCH %s with nothing to change as 400 invalid_field',
    async (path) => {
      const answer = await send('PATCH', path.includes('KEY') ? path.replace('KEY', await createKey()) : path);
      expect(answer.status).toBe(400);
      expect(answer.body.error?.code).toBe('invalid_field');
      expect(answer.body.error?.message).toMatch(/at least one of/i);
    },
  );
});

it('accepts the empty body with a charset parameter too', async () => {
  const keyId = await createKey();
  expect((await fetchWithoutBody('POST', `/admin/keys/${keyId}/revoke`, 'application/json; charset=utf-8')).status).toBe(200);
});

it('leaves the credit balance unchanged when the empty credit body is refused', async () => {
  expect((await fetchWithoutBody('POST', '/admin/accounts/empty-body/credit')).status).toBe(400);
  expect((await server.admin('GET', '/admin/accounts/empty-body')).body.billing.creditBalance).toBe(100);
});

describe('a malformed non-empty body is still refused', () => {
  it.each([['{'], ['{"graceSeconds": 0,'], ['   '], ['not json'], ['{"__proto__": {"x": 1}}']])(
    'answers %j with 400 invalid_json and a message that says the body is not valid JSON',
    async (body) => {
      const keyId = await createKey();
      const response = await fetch(`${server.adminUrl}/admin/keys/${keyId}/rotate`, {
        method: 'POST',
        headers: { authorization: `Bearer ${TEST_ADMIN_TOKEN}`, 'content-type': 'application/json' },
        body,
      });
      expect(response.status).toBe(400);
      const answer = (await response.json()) as { error: { code: string; message: string } };
      expect(answer.error.code).toBe('invalid_json');
      expect(answer.error.message).toMatch(/JSON/);
      // Nothing happened to the key.
      expect((await server.admin('GET', `/admin/keys/${keyId}`)).body.status).toBe('active');
    },
  );
});
