import { createOfficialCheckClient, envoyCheckRequest, type OfficialCheckClient } from '../support/envoy-official-client';
import { parseDenyBody } from '../support/deny-body';
import { startTestRedis, type TestRedis } from '../support/redis-server';
import { startAppUnderTest, type AppUnderTest } from '../support/running-app';

/**
 * Batches and file uploads, whose usage ext_proc does not meter, over a real
 * gRPC socket with Envoy's official protos, on real Redis: refused by default
 * with 404 route_not_enabled in the caller's own error style (OpenAI,
 * Anthropic, Gemini), and allowed once the operator lists them in
 * `enabledRoutes`.
 */
jest.setTimeout(60_000);

let redis: TestRedis;
let byDefault: AppUnderTest;
let enabled: AppUnderTest;
let defaultClient: OfficialCheckClient;
let enabledClient: OfficialCheckClient;
let key: string;

async function createKey(app: AppUnderTest): Promise<string> {
  expect((await app.admin('POST', '/admin/accounts', { id: 'batch-co', name: 'Batch Co' })).status).toBe(201);
  const created = await app.admin('POST', '/admin/accounts/batch-co/keys', { name: 'it' });
  expect(created.status).toBe(201);
  return created.body.key;
}

beforeAll(async () => {
  redis = await startTestRedis();
  byDefault = await startAppUnderTest({ redisUrl: redis.url });
  enabled = await startAppUnderTest({ redisUrl: redis.url, config: { enabledRoutes: ['batches', 'files', 'unlisted'] } });
  defaultClient = createOfficialCheckClient(byDefault.grpcAddress);
  enabledClient = createOfficialCheckClient(enabled.grpcAddress);
  // Both servers share the Redis, and so the key.
  key = await createKey(byDefault);
});
afterAll(async () => {
  defaultClient?.close();
  enabledClient?.close();
  await byDefault?.close();
  await enabled?.close();
  await redis?.stop();
});

const openai = (path: string, as = key) => envoyCheckRequest({ method: 'POST', path, headers: { authorization: `Bearer ${as}` } });
const anthropic = (path: string, as = key) =>
  envoyCheckRequest({ method: 'POST', path, headers: { 'x-api-key': as, 'anthropic-version': '2023-06-01' } });
const gemini = (path: string, as = key) => envoyCheckRequest({ method: 'POST', path, headers: { 'x-goog-api-key': as } });

const headersOf = (options: { header: { key: string; value: string } }[]) =>
  Object.fromEntries(options.map((o) => [o.header.key, o.header.value]));

/** Each as the caller's SDK sends it, with the key `as`. */
const REQUESTS = [
  ['OpenAI batch', (as?: string) => openai('/v1/batches', as), 'batch'],
  ['OpenAI file upload', (as?: string) => openai('/v1/files', as), 'file'],
  ['Anthropic message batch', (as?: string) => anthropic('/v1/messages/batches', as), 'batch'],
  ['Anthropic file upload', (as?: string) => anthropic('/v1/files?beta=true', as), 'file'],
  ['Gemini batch', (as?: string) => gemini('/v1beta/models/gemini-2.5-flash:batchGenerateContent', as), 'batch'],
  ['Gemini file upload', (as?: string) => gemini('/upload/v1beta/files?uploadType=resumable', as), 'file'],
] as const;

describe('batches and file uploads are refused by default', () => {
  it.each(REQUESTS)('%s: 404 route_not_enabled', async (_name, request, what) => {
    const refused = await defaultClient.check(request());
    expect(refused.status.code).toBe(5); // google.rpc.Code NOT_FOUND
    expect(refused.denied_response.status.code).toBe('NotFound');
    expect(headersOf(refused.denied_response.headers)['x-gateway-error-code']).toBe('route_not_enabled');
    expect(JSON.stringify(parseDenyBody(refused.denied_response.body))).toContain(`The ${what} API is not enabled on this gateway`);
  });

  it('in the OpenAI style', async () => {
    expect(parseDenyBody((await defaultClient.check(openai('/v1/batches'))).denied_response.body)).toEqual({
      error: {
        message: expect.stringContaining('The batch API is not enabled on this gateway, because its usage is not metered here.'),
        type: 'invalid_request_error',
        param: null,
        code: 'route_not_enabled',
      },
    });
  });

  it('in the Anthropic style', async () => {
    expect(
      parseDenyBody((await defaultClient.check(anthropic('/v1/messages/batches/msgbatch_01/results'))).denied_response.body),
    ).toMatchObject({
      type: 'error',
      error: { type: 'not_found_error', message: expect.stringContaining('The batch API is not enabled on this gateway') },
    });
  });

  it('in the Anthropic style for an Anthropic client of the Files API both upstreams serve', async () => {
    expect(parseDenyBody((await defaultClient.check(anthropic('/v1/files?beta=true'))).denied_response.body)).toMatchObject({
      type: 'error',
      error: { type: 'not_found_error', message: expect.stringContaining('The file API is not enabled on this gateway') },
    });
  });

  it('in the Gemini style', async () => {
    const body = parseDenyBody((await defaultClient.check(gemini('/upload/v1beta/files'))).denied_response.body);
    expect(body.error).toMatchObject({ code: 404, status: 'NOT_FOUND' });
    expect(body.error.message).toContain('The file API is not enabled on this gateway');
    expect(body.error.details[0]).toMatchObject({ reason: 'route_not_enabled', domain: 'gateway-authz' });
  });

  it('a generation on the same server is allowed', async () => {
    expect((await defaultClient.check(openai('/v1/chat/completions'))).status.code).toBe(0);
    expect((await defaultClient.check(gemini('/v1beta/models/gemini-2.5-flash:generateContent'))).status.code).toBe(0);
  });
});

/**
 * Paths no route names: their answers are not metered, and some mint upstream credentials whose use never passes the
 * gateway again. Refused like the gated families, before the key is read; allowed with a key once `unlisted` is enabled.
 */
const UNLISTED = [
  ['OpenAI image generation', (as?: string) => openai('/v1/images/generations', as)],
  ['OpenAI realtime client secret', (as?: string) => openai('/v1/realtime/client_secrets', as)],
  ['Gemini ephemeral token', (as?: string) => gemini('/v1alpha/auth_tokens', as)],
  ['Gemini image generation (OpenAI-compatible)', (as?: string) => openai('/v1beta/openai/images/generations', as)],
  ['a batch under a prefix no route names', (as?: string) => anthropic('/anthropic/v1/messages/batches', as)],
  ['a path with an encoded slash', (as?: string) => openai('/v1/messages%2Fbatches', as)],
] as const;

describe('paths no route names are refused by default', () => {
  it.each(UNLISTED)('%s: 404 route_not_enabled, whatever the key', async (_name, request) => {
    for (const refused of [await defaultClient.check(request()), await defaultClient.check(request('gk_live_not-a-real-key'))]) {
      expect(refused.status.code).toBe(5);
      expect(headersOf(refused.denied_response.headers)['x-gateway-error-code']).toBe('route_not_enabled');
      expect(JSON.stringify(parseDenyBody(refused.denied_response.body))).toContain('This endpoint is not offered by this gateway');
    }
  });

  it('Gemini v1alpha generations are routes of their own, and allowed', async () => {
    expect((await defaultClient.check(gemini('/v1alpha/models/gemini-2.5-flash:generateContent'))).status.code).toBe(0);
  });

  it.each(UNLISTED)('%s: allowed with a key once unlisted is enabled', async (_name, request) => {
    expect((await enabledClient.check(request())).status.code).toBe(0);
  });
});

describe('allowed once the operator enables them (enabledRoutes)', () => {
  it('the start-up log warns that what it lets through is not metered', () => {
    expect(enabled.logs.events('unmetered_routes_enabled')).toEqual([
      expect.objectContaining({ level: 'warn', routes: ['batches', 'files', 'unlisted'] }),
    ]);
    expect(byDefault.logs.events('unmetered_routes_enabled')).toEqual([]);
  });

  it.each(REQUESTS)('%s', async (_name, request) => {
    const allowed = await enabledClient.check(request());
    expect(allowed.status.code).toBe(0);
  });
});
