import { generateCustomerKey, hashCustomerKey } from '../../src/keys/customer-key';
import { RedisStore } from '../../src/store/redis/redis-store';
import { loadCheckRequestFixtures, makeFixtureSecrets, materialize, type FixtureSecrets } from '../support/check-request-fixtures';
import { createOfficialCheckClient, type OfficialCheckClient } from '../support/envoy-official-client';
import { insertKey } from '../support/pipeline-fixture-world';
import { startTestRedis, type TestRedis } from '../support/redis-server';
import { startAppUnderTest, TEST_ADMIN_TOKEN, type AppUnderTest } from '../support/running-app';
import { parseDenyBody } from '../support/deny-body';

/**
 * The real server over real gRPC, against a real Redis, driven by a client
 * built from Envoy's official protos (not ours) with Envoy-shaped fixtures.
 */
const HTTP_STATUS_NAMES: Record<number, string> = { 400: 'BadRequest', 401: 'Unauthorized', 404: 'NotFound', 503: 'ServiceUnavailable' };
const MESSAGES_ERROR_TYPES: Record<number, string> = { 400: 'invalid_request_error', 401: 'authentication_error', 404: 'not_found_error' };
const GENERATIVE_STATUSES: Record<number, string> = { 400: 'INVALID_ARGUMENT', 401: 'UNAUTHENTICATED', 404: 'NOT_FOUND' };
const CREDENTIAL_HEADERS = ['authorization', 'x-api-key', 'x-vendorg-api-key', 'x-goog-api-key'];
const IDENTITY_HEADERS = ['x-gateway-account-id', 'x-gateway-key-id', 'x-gateway-key-prefix', 'x-gateway-route-family'];

let redis: TestRedis;
let server: AppUnderTest;
let client: OfficialCheckClient;
let secrets: FixtureSecrets;
let liveKeyId: string;

beforeAll(async () => {
  redis = await startTestRedis();
  server = await startAppUnderTest({ redisUrl: redis.url });
  client = createOfficialCheckClient(server.grpcAddress);

  expect((await server.admin('POST', '/admin/accounts', { id: 'acct_fixture', name: 'Fixture Inc' })).status).toBe(201);
  const live = await server.admin('POST', '/admin/accounts/acct_fixture/keys', { name: 'prod backend', environment: 'live' });
  const other = await server.admin('POST', '/admin/accounts/acct_fixture/keys', { name: 'staging' });
  expect(live.status).toBe(201);
  liveKeyId = live.body.id;
  // The admin API only creates active keys; a revoked one goes straight into Redis.
  const revoked = generateCustomerKey('live');
  const store = await RedisStore.connect({ url: redis.url, commandTimeoutMs: 1000 });
  await insertKey(store, revoked, { status: 'revoked' });
  await store.close();
  secrets = makeFixtureSecrets({ live: live.body.key, otherLive: other.body.key, revoked });
});

afterAll(async () => {
  client?.close();
  await server?.close();
  await redis?.stop();
});

function headerMap(options: { header: { key: string; value: string } }[]): Record<string, string> {
  return Object.fromEntries(options.map((o) => [o.header.key, o.header.value]));
}

describe('Check over gRPC with Envoy-shaped requests', () => {
  it.each(loadCheckRequestFixtures().map((f) => [f.name, f] as const))('%s', async (_name, fixture) => {
    // Fixtures may leave out any part of the request (one is empty).
    const request = materialize(fixture.check_request, secrets) as {
      attributes?: { request?: { http?: { headers?: Record<string, string> } } };
    };
    const response = await client.check(request);
    const requestId = request.attributes?.request?.http?.headers?.['x-request-id'] ?? '';

    if (fixture.expect.result === 'allow') {
      expect(response.status.code).toBe(0);
      expect(response.http_response).toBe('ok_response');
      const ok = response.ok_response;
      expect(ok.headers_to_remove).toEqual(expect.arrayContaining(CREDENTIAL_HEADERS));
      for (const option of ok.headers) {
        // Overwrite semantics for every Envoy version: append=false and OVERWRITE_IF_EXISTS_OR_ADD.
        expect(option.append).toEqual({ value: false });
        expect(option.append_action).toBe('OVERWRITE_IF_EXISTS_OR_ADD');
      }
      const identity = headerMap(ok.headers);
      expect(Object.keys(identity).sort()).toEqual([...IDENTITY_HEADERS].sort());
      expect(identity['x-gateway-account-id']).toBe('acct_fixture');
      expect(identity['x-gateway-route-family']).toBe(fixture.expect.family);
      if (JSON.stringify(request).includes(secrets.LIVE_KEY)) expect(identity['x-gateway-key-id']).toBe(liveKeyId);
      expect(identity['x-gateway-key-prefix']).toBe(secrets.LIVE_KEY.slice(0, 12));
      return;
    }

    // A denial is a successful RPC with a non-zero status and denied_response.
    expect(response.status.code).not.toBe(0);
    expect(response.http_response).toBe('denied_response');
    const denied = response.denied_response;
    expect(denied.status.code).toBe(HTTP_STATUS_NAMES[fixture.expect.http_status]);
    const headers = headerMap(denied.headers);
    expect(headers['content-type']).toBe('application/json');
    expect(headers['x-gateway-error-code']).toBe(fixture.expect.reason);
    if (fixture.expect.http_status === 401) expect(headers['www-authenticate']).toMatch(/^Bearer realm="gateway-authz"/);
    else expect(headers['www-authenticate']).toBeUndefined();
    if (requestId) expect(headers['x-request-id']).toBe(requestId);

    const body = parseDenyBody(denied.body);
    switch (fixture.expect.style) {
      case 'chat':
        expect(Object.keys(body)).toEqual(['error']);
        expect(Object.keys(body.error).sort()).toEqual(['code', 'message', 'param', 'type']);
        expect(body.error.code).toBe(fixture.expect.reason);
        break;
      case 'messages':
        expect(body.type).toBe('error');
        expect(body.error.type).toBe(MESSAGES_ERROR_TYPES[fixture.expect.http_status]);
        expect(body.error.details.error_code).toBe(fixture.expect.reason);
        expect(body.request_id).toBe(requestId);
        expect(headers['request-id']).toBe(requestId);
        break;
      case 'generative':
        expect(body.error.code).toBe(fixture.expect.http_status);
        expect(body.error.status).toBe(GENERATIVE_STATUSES[fixture.expect.http_status]);
        expect(body.error.details[0]!['@type']).toBe('type.googleapis.com/google.rpc.ErrorInfo');
        expect(body.error.details[0]!.reason).toBe(fixture.expect.reason);
        break;
      case 'generic':
        expect(body.error.code).toBe(fixture.expect.reason);
        expect(body.error.status).toBe(fixture.expect.http_status);
        break;
    }
    expect(typeof body.error.message).toBe('string');
    for (const secret of Object.values(secrets)) expect(denied.body).not.toContain(secret);
  });

  it('names the version header and the accepted values in the 400 body', async () => {
    const fixture = loadCheckRequestFixtures().find((f) => f.file.includes('messages-missing-version'))!;
    const response = await client.check(materialize(fixture.check_request, secrets));
    const body = parseDenyBody(response.denied_response.body);
    expect(body.error.message).toContain("'vendora-version'");
    expect(body.error.message).toContain("'2023-06-01'");
  });

  it('names the provider, and only the provider, for an upstream key', async () => {
    const fixture = loadCheckRequestFixtures().find((f) => f.file.includes('messages-anthropic-upstream-key'))!;
    const response = await client.check(materialize(fixture.check_request, secrets));
    const body = parseDenyBody(response.denied_response.body);
    expect(body.error.message).toContain('looks like an Anthropic API key');
    expect(body.error.message).toContain('API Keys');
    expect(response.denied_response.body).not.toContain('sk-ant');
  });

  it('writes one decision log line per Check with the display prefix and no secret', async () => {
    const before = server.logs.events('decision').length;
    const fixture = loadCheckRequestFixtures().find((f) => f.file.includes('chat-valid-bearer'))!;
    await client.check(materialize(fixture.check_request, secrets));
    const lines = server.logs.events('decision').slice(before);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({
      result: 'allow',
      reason: 'allowed',
      family: 'chat-completions',
      keyPrefix: secrets.LIVE_KEY.slice(0, 12),
      accountId: 'acct_fixture',
    });
    expect(typeof lines[0]!.durationMs).toBe('number');
  });

  it('never logs a full key, key hash, provider key or the admin token', () => {
    expect(server.logs.lines.length).toBeGreaterThan(40);
    expect(server.logs.leaksOf([...Object.values(secrets), TEST_ADMIN_TOKEN])).toEqual([]);
    expect(hashCustomerKey(secrets.LIVE_KEY)).toHaveLength(64);
  });
});
