import Redis from 'ioredis';
import { createOfficialCheckClient, envoyCheckRequest, type OfficialCheckClient } from '../support/envoy-official-client';
import { parseDenyBody } from '../support/deny-body';
import { startTestRedis, type TestRedis } from '../support/redis-server';
import { startAppUnderTest, type AppUnderTest } from '../support/running-app';
import { isBackgroundCommand, untilWebhookWorkDone } from '../support/background-commands';

/**
 * `unpricedModels: "refuse"` end to end: a server on real Redis with a price
 * table from its config file, Checks over a real gRPC socket encoded with
 * Envoy's official protos. A Gemini path and a chat-completions `raw_body`
 * (ext_authz `with_request_body` with `pack_as_bytes`) naming unpriced models
 * are refused 404 in their styles, with no Redis command; priced models pass.
 */
let redis: TestRedis;
let server: AppUnderTest;
let client: OfficialCheckClient;
let stats: Redis;
let key: string;

beforeAll(async () => {
  redis = await startTestRedis();
  server = await startAppUnderTest({
    redisUrl: redis.url,
    // Last-used writes are batched off the hot path; keep them out of the command counts below.
    env: { LAST_USED_FLUSH_MS: '3600000' },
    config: {
      pricing: {
        models: [
          { model: 'gemini-2.5-flash*', input: 30, output: 250 },
          { model: 'gpt-4o-mini*', input: 15, output: 60 },
        ],
        default: { input: 100, output: 400, webSearchCall: 10_000 },
        unpricedModels: 'refuse',
      },
    },
  });
  client = createOfficialCheckClient(server.grpcAddress);
  stats = new Redis(redis.url);
  expect((await server.admin('POST', '/admin/accounts', { id: 'model-co', name: 'Model Co' })).status).toBe(201);
  const created = await server.admin('POST', '/admin/accounts/model-co/keys', { name: 'it' });
  expect(created.status).toBe(201);
  key = created.body.key;
});
afterAll(async () => {
  client?.close();
  stats?.disconnect();
  await server?.close();
  await redis?.stop();
});

const gemini = (model: string) =>
  envoyCheckRequest({ method: 'POST', path: `/v1beta/models/${model}:streamGenerateContent?alt=sse`, headers: { 'x-goog-api-key': key } });
const chat = (body: Buffer) =>
  envoyCheckRequest({ method: 'POST', path: '/v1/chat/completions', headers: { authorization: `Bearer ${key}` }, body });
const chatBody = (model: string) => Buffer.from(JSON.stringify({ messages: [{ role: 'user', content: 'hi' }], model }));

const headersOf = (options: { header: { key: string; value: string } }[]) =>
  Object.fromEntries(options.map((o) => [o.header.key, o.header.value]));

/** Redis commands the server ran during `run` (INFO commandstats, without the background ones). */
async function redisCommandsDuring(run: () => Promise<unknown>): Promise<number> {
  await untilWebhookWorkDone(stats);
  await stats.config('RESETSTAT');
  await run();
  const info = await stats.info('commandstats');
  return [...info.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)]
    .filter((m) => !isBackgroundCommand(m[1]!))
    .reduce((sum, m) => sum + Number(m[2]), 0);
}

describe('unpricedModels: "refuse" over gRPC on real Redis', () => {
  it('allows priced models: a Gemini path and a chat raw_body', async () => {
    expect((await client.check(gemini('gemini-2.5-flash'))).status.code).toBe(0);
    expect((await client.check(chat(chatBody('gpt-4o-mini-2024-07-18')))).status.code).toBe(0);
    // No body (Envoy not configured to send it): the model is unknown at Check time, and the request passes.
    expect(
      (await client.check(envoyCheckRequest({ path: '/v1/chat/completions', headers: { authorization: `Bearer ${key}` } }))).status.code,
    ).toBe(0);
  });

  it('refuses an unpriced Gemini model with 404 and a Google-style body, without a Redis command', async () => {
    await client.check(gemini('gemini-2.5-flash')); // the key's index entry is cached from here on
    let refused!: Awaited<ReturnType<OfficialCheckClient['check']>>;
    expect(await redisCommandsDuring(async () => (refused = await client.check(gemini('gemini-1.0-ultra'))))).toBe(0);
    expect(refused.status.code).toBe(5); // google.rpc.Code NOT_FOUND
    expect(refused.denied_response.status.code).toBe('NotFound');
    const headers = headersOf(refused.denied_response.headers);
    expect(headers['x-gateway-error-code']).toBe('model_not_priced');
    expect(headers['x-should-retry']).toBe('false');
    const body = parseDenyBody(refused.denied_response.body);
    expect(body.error).toMatchObject({ code: 404, status: 'NOT_FOUND' });
    expect(body.error.message).toContain("The model 'gemini-1.0-ultra' is not offered by this gateway.");
    expect(body.error.details[0]).toMatchObject({ reason: 'model_not_priced', domain: 'gateway-authz' });
  });

  it('refuses an unpriced model named in a chat raw_body with 404 and an OpenAI-style body', async () => {
    const refused = await client.check(chat(chatBody('mistral-large')));
    expect(refused.denied_response.status.code).toBe('NotFound');
    expect(headersOf(refused.denied_response.headers)['x-gateway-error-code']).toBe('model_not_priced');
    expect(parseDenyBody(refused.denied_response.body)).toEqual({
      error: {
        message:
          "The model 'mistral-large' is not offered by this gateway. Ask the gateway's operator which models are available; retrying will not help.",
        type: 'invalid_request_error',
        param: null,
        code: 'model_not_found',
      },
    });
  });

  it('counts the refusals by reason in the decision metric', async () => {
    const response = await fetch(`${server.adminUrl}/metrics`);
    expect(response.status).toBe(200);
    const metrics = await response.text();
    expect(metrics).toMatch(
      /gateway_authz_decisions_total\{style="generative",family="generative-content",result="deny",reason="model_not_priced"\} [1-9]/,
    );
    expect(metrics).toMatch(
      /gateway_authz_decisions_total\{style="chat",family="chat-completions",result="deny",reason="model_not_priced"\} [1-9]/,
    );
  });
});
