import fc from 'fast-check';
import { createOfficialCheckClient, envoyCheckRequest, type OfficialCheckClient } from '../support/envoy-official-client';
import { startTestRedis, type TestRedis } from '../support/redis-server';
import { startAppUnderTest, type AppUnderTest } from '../support/running-app';

/**
 * Malformed and extreme CheckRequests over real gRPC (bounded in count and
 * time): every one gets a well-formed answer, none is allowed without a
 * valid key, and the server stays up with bounded memory.
 */
let redis: TestRedis;
let server: AppUnderTest;
let client: OfficialCheckClient;
let validKey: string;

beforeAll(async () => {
  redis = await startTestRedis();
  server = await startAppUnderTest({ redisUrl: redis.url, env: { LOG_LEVEL: 'warn' } });
  client = createOfficialCheckClient(server.grpcAddress);
  await server.admin('POST', '/admin/accounts', { id: 'fuzz', name: 'Fuzz' });
  validKey = (await server.admin('POST', '/admin/accounts/fuzz/keys', {})).body.key;
});
afterAll(async () => {
  client?.close();
  await server?.close();
  await redis?.stop();
});

type Outcome = 'allowed' | 'denied' | 'rpc-error';
async function send(request: object): Promise<{ outcome: Outcome; body?: string; code?: number }> {
  try {
    const response = await client.check(request, 5000);
    if (response.status.code === 0) return { outcome: 'allowed' };
    return { outcome: 'denied', body: response.denied_response?.body };
  } catch (error) {
    return { outcome: 'rpc-error', code: (error as { code?: number }).code };
  }
}

const extremes: [string, () => object][] = [
  ['no attributes at all', () => ({})],
  ['attributes without request', () => ({ attributes: { source: {} } })],
  ['http without headers or path', () => ({ attributes: { request: { http: {} } } })],
  [
    '5000 headers',
    () =>
      envoyCheckRequest({
        path: '/v1/chat/completions',
        headers: Object.fromEntries(Array.from({ length: 5000 }, (_, i) => [`x-h-${i}`, 'v'])),
      }),
  ],
  [
    'a 1 MiB header value',
    () => envoyCheckRequest({ path: '/v1/chat/completions', headers: { authorization: `Bearer ${'a'.repeat(1 << 20)}` } }),
  ],
  [
    'a 1 MiB x-api-key',
    () => envoyCheckRequest({ path: '/v1/messages', headers: { 'x-api-key': 'k'.repeat(1 << 20), 'anthropic-version': '2023-06-01' } }),
  ],
  ['a 64 KiB path', () => envoyCheckRequest({ path: `/v1/${'p'.repeat(65_536)}` })],
  [
    'NUL bytes in the credential',
    () => envoyCheckRequest({ path: '/v1/chat/completions', headers: { authorization: `Bearer ${validKey}\u0000` } }),
  ],
  ['NUL bytes in the path', () => envoyCheckRequest({ path: '/v1/chat/completions\u0000/x' })],
  [
    'invalid UTF-8 in a raw header value',
    () => ({
      attributes: {
        request: {
          http: {
            method: 'POST',
            path: '/v1/chat/completions',
            header_map: {
              headers: [{ key: 'authorization', raw_value: Buffer.from([0x42, 0x65, 0x61, 0x72, 0x65, 0x72, 0x20, 0xff, 0xfe, 0xc3]) }],
            },
          },
        },
      },
    }),
  ],
  [
    'duplicate credential headers with different keys',
    () => envoyCheckRequest({ path: '/v1/chat/completions', headers: { authorization: `Bearer ${validKey},Bearer gk_live_x` } }),
  ],
  [
    'a valid key in a header this route does not read',
    () => envoyCheckRequest({ path: '/v1/chat/completions', headers: { 'x-api-key': validKey } }),
  ],
  [
    'a valid key with a trailing character',
    () => envoyCheckRequest({ path: '/v1/chat/completions', headers: { authorization: `Bearer ${validKey}x` } }),
  ],
  ['the key in the path', () => envoyCheckRequest({ path: `/v1/${validKey}` })],
  ['path trick //', () => envoyCheckRequest({ method: 'GET', path: '//v1/models' })],
  ['path trick /../', () => envoyCheckRequest({ method: 'GET', path: '/x/../v1/models' })],
  ['path trick %2F', () => envoyCheckRequest({ path: '/v1%2Fchat%2Fcompletions' })],
];

it.each(extremes)('%s: a well-formed answer, never an allow', async (_name, build) => {
  const result = await send(build());
  expect(result.outcome).not.toBe('allowed');
  if (result.outcome === 'denied') expect(() => JSON.parse(result.body!) as unknown).not.toThrow();
  else expect(result.code).toBe(8); // RESOURCE_EXHAUSTED: only for a message over gRPC's size limit
});

it('a 5 MiB CheckRequest is refused by gRPC (Envoy answers status_on_error), never allowed', async () => {
  const result = await send(envoyCheckRequest({ path: '/v1/chat/completions', headers: { 'x-big': 'b'.repeat(5 << 20) } }));
  expect(result).toEqual({ outcome: 'rpc-error', code: 8 });
});

it('random CheckRequests: none is allowed without the valid key; the server stays up with bounded memory', async () => {
  const before = process.memoryUsage().rss;
  const deadline = Date.now() + 15_000;
  const samples = fc.sample(
    fc.record({
      method: fc.constantFrom('GET', 'POST', 'PUT', '', 'g e t'),
      path: fc.oneof(
        fc.webPath(),
        fc.string({ maxLength: 500 }),
        fc.constantFrom('/v1/chat/completions', '/v1/messages', '/v1beta/models/m:generateContent'),
      ),
      headers: fc.dictionary(
        fc.oneof(
          fc.constantFrom('authorization', 'x-api-key', 'x-goog-api-key', 'anthropic-version'),
          fc.string({ minLength: 1, maxLength: 30 }),
        ),
        fc.oneof(fc.string({ maxLength: 300 }), fc.string({ unit: 'binary', maxLength: 100 })),
        { maxKeys: 20 },
      ),
    }),
    { numRuns: 600, seed: 42 },
  );
  let answered = 0;
  for (let i = 0; i < samples.length && Date.now() < deadline; i += 50) {
    const batch = samples.slice(i, i + 50).map((sample) => send(envoyCheckRequest(sample)));
    for (const result of await Promise.all(batch)) {
      expect(result.outcome).toBe('denied');
      answered += 1;
    }
  }
  expect(answered).toBeGreaterThanOrEqual(100);
  // Still deciding correctly afterwards.
  expect((await send(envoyCheckRequest({ path: '/v1/chat/completions', headers: { authorization: `Bearer ${validKey}` } }))).outcome).toBe(
    'allowed',
  );
  expect(process.memoryUsage().rss - before).toBeLessThan(300 * 1024 * 1024);
});
