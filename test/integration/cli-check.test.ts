import { createServer } from 'node:net';
import * as grpc from '@grpc/grpc-js';
import type { AllowView, CheckView, DenyView } from '../../src/cli/check-view';
import { generateCustomerKey, hashCustomerKey } from '../../src/keys/customer-key';
import { loadAuthorizationService } from '../../src/check/proto-loading';
import { ensureBuiltCli, runCli, type CliRun } from '../support/built-cli';
import { startTestRedis, type TestRedis } from '../support/redis-server';
import { recordCapture, registerSecrets } from '../support/secret-scan';
import { startAppUnderTest, TEST_ADMIN_TOKEN, type AppUnderTest } from '../support/running-app';

// Each CLI run is a fresh node process; allow for a loaded machine.
jest.setTimeout(60_000);

/** A loopback port nothing listens on: bound once, then released. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

describe('gateway-authz check (one real Check over gRPC, real Redis)', () => {
  let redis: TestRedis;
  let server: AppUnderTest;
  /** Every full key a test made; no CLI output may contain one, nor its hash. */
  const keys: string[] = [];

  /** Runs `check` against the server; its output joins the suite-wide secret scan and is checked for every key here. */
  const check = async (args: string[], env: Record<string, string> = {}): Promise<CliRun> => {
    const run = await runCli(['check', '--grpc-url', server.grpcAddress, ...args], env);
    recordCapture('bodies', 'gateway-authz check output', `${run.stdout}\n${run.stderr}`);
    for (const key of keys) {
      expect(run.stdout + run.stderr).not.toContain(key);
      expect(run.stdout + run.stderr).not.toContain(hashCustomerKey(key));
    }
    return run;
  };
  /** Runs `check --json`: its exit code and the one JSON document it printed (an allow or a deny, as the test expects). */
  const json = async <View extends CheckView>(args: string[]) => {
    const run = await check([...args, '--json']);
    expect(run.stderr).toBe('');
    return { code: run.code, view: JSON.parse(run.stdout) as View };
  };
  /** A deny body: JSON whose shape the test states with toMatchObject. */
  const bodyOf = (text: string) => JSON.parse(text) as unknown;

  const newKey = async (account: string): Promise<{ id: string; key: string; prefix: string }> => {
    const created = await server.admin('POST', `/admin/accounts/${account}/keys`, { name: 'check' });
    expect(created.status).toBe(201);
    const body = created.body as { id: string; key: string; prefix: string };
    keys.push(body.key);
    return body;
  };

  beforeAll(async () => {
    ensureBuiltCli();
    redis = await startTestRedis();
    server = await startAppUnderTest({ redisUrl: redis.url, env: { REDIS_TIMEOUT_MS: '1000' } });
    for (const id of ['check-acme', 'check-suspended']) {
      expect((await server.admin('POST', '/admin/accounts', { id, name: id })).status).toBe(201);
    }
  });
  afterAll(async () => {
    await server?.close();
    await redis?.stop();
  });

  it('allows a valid key: prints the identity headers, the removed credential by name, and exits 0', async () => {
    const { key, id, prefix } = await newKey('check-acme');
    const run = await check(['-X', 'POST', '-H', `Authorization: Bearer ${key}`, '/v1/chat/completions']);
    expect({ code: run.code, stderr: run.stderr }).toEqual({ code: 0, stderr: '' });
    expect(run.stdout).toMatch(new RegExp(`^Check sent to ${server.grpcAddress.replace(/\./g, '\\.')}: POST /v1/chat/completions$`, 'm'));
    expect(run.stdout).toContain(`  authorization: Bearer ${prefix}…\n`);
    expect(run.stdout).toContain('\nALLOW: Envoy forwards the request upstream.\n');
    expect(run.stdout).toContain('  x-gateway-account-id: check-acme\n');
    expect(run.stdout).toContain(`  x-gateway-key-id: ${id}\n`);
    expect(run.stdout).toContain(`  x-gateway-key-prefix: ${prefix}\n`);
    expect(run.stdout).toContain('  x-gateway-route-family: chat-completions\n');
    // x-gateway-hold too: this account holds nothing, and no client may name a hold for metering to release.
    expect(run.stdout).toMatch(/^Headers removed: authorization, x-api-key, x-vendorg-api-key, x-goog-api-key, x-gateway-hold$/m);
    expect(run.stdout).toMatch(/^Query parameters removed: \(none\)$/m);
    expect(run.stdout).toMatch(/^ {2}x-ratelimit-remaining-requests: \d+$/m);
  });

  it('--json: the request sent (credentials masked) and what Envoy would set, remove and add', async () => {
    const { key, id, prefix } = await newKey('check-acme');
    // A header key beside a query key: the header is used and ?key= is removed; both are masked in the echo.
    const path = `/v1beta/models/gemini-2.0-flash:generateContent?alt=sse&key=${key}`;
    const { code, view } = await json<AllowView>([
      '-X',
      'post',
      '-H',
      `x-goog-api-key: ${key}`,
      '-H',
      'Host: api.example.test',
      '--request-id',
      'req-123',
      path,
    ]);
    expect(code).toBe(0);
    expect(Object.keys(view)).toEqual([
      'decision',
      'request',
      'headers',
      'headersToRemove',
      'queryParametersToRemove',
      'responseHeadersToAdd',
    ]);
    expect(view).toEqual({
      decision: 'allow',
      request: {
        grpcTarget: server.grpcAddress,
        method: 'POST',
        path: `/v1beta/models/gemini-2.0-flash:generateContent?alt=sse&key=${prefix}…`,
        authority: 'api.example.test',
        requestId: 'req-123',
        headers: { 'x-goog-api-key': `${prefix}…`, 'x-forwarded-proto': 'http', 'x-request-id': 'req-123' },
      },
      headers: {
        'x-gateway-account-id': 'check-acme',
        'x-gateway-key-id': id,
        'x-gateway-key-prefix': prefix,
        'x-gateway-route-family': 'generative-content',
      },
      headersToRemove: ['authorization', 'x-api-key', 'x-vendorg-api-key', 'x-goog-api-key', 'x-gateway-hold'],
      queryParametersToRemove: ['key'],
      // Google's SDK reads no rate-limit headers: the generative style sends none.
      responseHeadersToAdd: {},
    });
  });

  it.each([
    ['a well-formed key that does not exist', () => generateCustomerKey('live'), 'unknown_key'],
    ['a malformed key', () => 'gk_live_not-a-real-key-at-all', 'malformed_key'],
  ])('denies %s with 401, its reason code, headers and body, and exits 2', async (_, makeKey, reason) => {
    const key = makeKey();
    keys.push(key);
    registerSecrets(key);
    const run = await check(['-H', `Authorization: Bearer ${key}`, '/v1/chat/completions']);
    expect({ code: run.code, stderr: run.stderr }).toEqual({ code: 2, stderr: '' });
    expect(run.stdout).toContain(`\nDENY: 401 Unauthorized, ${reason}. Envoy answers the client:\n`);
    expect(run.stdout).toContain(`  x-gateway-error-code: ${reason}\n`);
    expect(run.stdout).toContain('  www-authenticate: Bearer realm="gateway-authz", error="invalid_token"\n');
    expect(bodyOf(run.stdout.trimEnd().split('\n').at(-1)!)).toMatchObject({ error: { type: 'authentication_error', code: reason } });
  });

  it('denies a key of a suspended account with 402 account_suspended', async () => {
    const { key } = await newKey('check-suspended');
    expect((await server.admin('PATCH', '/admin/accounts/check-suspended', { billing: { status: 'suspended' } })).status).toBe(200);
    const { code, view } = await json<DenyView>(['-H', `x-api-key: ${key}`, '/v1/models']);
    expect(code).toBe(2);
    expect(view).toMatchObject({
      decision: 'deny',
      httpStatus: 402,
      code: 'account_suspended',
      grpcStatus: { code: 7, message: 'account_suspended' },
    });
    expect(view.headers['x-should-retry']).toBe('false');
    expect(view.headers['retry-after']).toBeUndefined();
    expect(bodyOf(view.body)).toMatchObject({ error: { code: 'account_suspended', type: 'billing_error' } });
  });

  it('denies the second call of a key limited to 1 per minute with 429 and retry-after', async () => {
    const { key, id } = await newKey('check-acme');
    expect((await server.admin('PATCH', `/admin/keys/${id}`, { limits: [{ limit: 1, window: '1m' }] })).status).toBe(200);
    const first = await json<AllowView>(['-H', `Authorization: Bearer ${key}`, '/v1/models']);
    expect(first.code).toBe(0);
    expect(first.view.responseHeadersToAdd).toMatchObject({ 'x-ratelimit-limit-requests': '1', 'x-ratelimit-remaining-requests': '0' });
    const second = await check(['-H', `Authorization: Bearer ${key}`, '/v1/models']);
    expect(second.code).toBe(2);
    expect(second.stdout).toContain('\nDENY: 429 Too Many Requests, rate_limited. Envoy answers the client:\n');
    expect(second.stdout).toMatch(/^ {2}retry-after: ([1-9]|[1-5]\d|60)$/m);
    expect(second.stdout).toContain('  x-gateway-ratelimit-scope: key\n');
    expect(second.stdout).toContain('  x-gateway-ratelimit-window: 1m\n');
  });

  it('--json deny: a messages-style request without the version header is 400 missing_version_header', async () => {
    const { key } = await newKey('check-acme');
    const { code, view } = await json<DenyView>(['-X', 'POST', '-H', `x-api-key: ${key}`, '--request-id', 'req-400', '/v1/messages']);
    expect(code).toBe(2);
    expect(Object.keys(view)).toEqual(['decision', 'request', 'httpStatus', 'code', 'headers', 'body', 'grpcStatus', 'restriction']);
    expect(view).toMatchObject({
      decision: 'deny',
      httpStatus: 400,
      code: 'missing_version_header',
      grpcStatus: { code: 3, message: 'missing_version_header' },
      headers: {
        'content-type': 'application/json',
        'x-gateway-error-code': 'missing_version_header',
        'x-request-id': 'req-400',
        'request-id': 'req-400',
      },
    });
    expect(bodyOf(view.body)).toMatchObject({ type: 'error', error: { type: 'invalid_request_error' }, request_id: 'req-400' });
  });

  it('sends to 127.0.0.1 and GRPC_PORT when no --grpc-url is given', async () => {
    const port = server.grpcAddress.split(':')[1]!;
    const run = await runCli(['check', '/v1/models'], { GRPC_PORT: port });
    expect(run.code).toBe(2);
    expect(run.stdout).toMatch(new RegExp(`^Check sent to 127\\.0\\.0\\.1:${port}: GET /v1/models$`, 'm'));
    expect(run.stdout).toContain('DENY: 401 Unauthorized, missing_credential.');
  });

  it('says which setting is wrong when GRPC_PORT is not a port', async () => {
    const run = await runCli(['check', '/v1/models'], { GRPC_PORT: 'abc' });
    expect({ code: run.code, stdout: run.stdout }).toEqual({ code: 1, stdout: '' });
    expect(run.stderr).toBe("error: GRPC_PORT must be a port number from 1 to 65535, got 'abc'\n");
  });

  it.each([
    [['-H', 'authorization Bearer x', '/v1/models'], "must be written 'name: value'"],
    [['-H', 'bad name: x', '/v1/models'], "'bad name' is not a header name"],
    [['-H', ':path: /x', '/v1/models'], "has no header name before ':'"],
    [['-H', 'x-a: one\ntwo', '/v1/models'], 'control character'],
    [['-X', 'FETCH', '/v1/models'], 'must be one of GET, HEAD, POST'],
    [['v1/models'], 'must start with /'],
    [['https://api.example.test/v1/models'], 'must be the path only'],
    [['/v1/models with space'], 'percent-encode'],
    [['/v1/models', '--path', '/v1/models'], 'give the path once'],
    [[], 'give the request path'],
    [['--request-id', 'a', '-H', 'x-request-id: b', '/v1/models'], 'give the request id once'],
    [['--request-id', 'has space', '/v1/models'], 'visible ASCII'],
    [['--grpc-url', 'http://127.0.0.1:9191', '/v1/models'], 'without a scheme'],
    [['--grpc-url', '127.0.0.1', '/v1/models'], 'must be host:port'],
    [['--grpc-url', '127.0.0.1:70000', '/v1/models'], 'from 1 to 65535'],
    [['--deadline', '0', '/v1/models'], 'seconds from 0.1 to 120'],
    [['--deadline', '2s', '/v1/models'], 'seconds from 0.1 to 120'],
  ])('refuses %j before any call, saying why, with exit code 1', async (args, says) => {
    // Aimed at a port where nothing listens: had a call been tried, the error would be "cannot reach".
    const port = await closedPort();
    const decisions = server.logs.events('decision').length;
    const run = await runCli(['check', ...args], { GRPC_PORT: String(port) });
    expect({ code: run.code, stdout: run.stdout }).toEqual({ code: 1, stdout: '' });
    expect(run.stderr).toMatch(/^error: /);
    expect(run.stderr).toContain(says);
    expect(run.stderr).not.toContain('cannot reach');
    expect(server.logs.events('decision')).toHaveLength(decisions);
  });

  it('exits 1 with a clear message when no service listens there', async () => {
    const port = await closedPort();
    const started = Date.now();
    const run = await runCli(['check', '--deadline', '2', '--grpc-url', `127.0.0.1:${port}`, '/v1/models'], {});
    expect({ code: run.code, stdout: run.stdout }).toEqual({ code: 1, stdout: '' });
    expect(run.stderr).toBe(
      `error: cannot reach the Check service at 127.0.0.1:${port}: no connection within 2 s ` +
        '(is gateway-authz serve running there? give --grpc-url host:port, or set GRPC_PORT)\n',
    );
    // The 2 s deadline, plus a node start-up.
    expect(Date.now() - started).toBeLessThan(10_000);
  });

  describe('a service that answers Check with a gRPC error, or not at all', () => {
    const servers: grpc.Server[] = [];
    /** A Check service on a free loopback port whose Check is `handler`. */
    const fakeService = async (handler: grpc.handleUnaryCall<unknown, unknown>): Promise<string> => {
      const fake = new grpc.Server();
      servers.push(fake);
      fake.addService(loadAuthorizationService().service, { Check: handler });
      const port = await new Promise<number>((resolve, reject) =>
        fake.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (error, bound) => (error ? reject(error) : resolve(bound))),
      );
      return `127.0.0.1:${port}`;
    };
    afterAll(() => servers.forEach((fake) => fake.forceShutdown()));

    it('prints the gRPC status and exits 1: there is no decision to print', async () => {
      const address = await fakeService((_call, callback) => callback({ code: grpc.status.UNAVAILABLE, details: 'key store unavailable' }));
      for (const extra of [[], ['--json']]) {
        const run = await runCli(['check', '--grpc-url', address, '/v1/models', ...extra], {});
        expect({ code: run.code, stdout: run.stdout }).toEqual({ code: 1, stdout: '' });
        expect(run.stderr).toBe(`error: the Check service at ${address} answered gRPC status 14 UNAVAILABLE: key store unavailable\n`);
      }
    });

    it('gives up after the 2 s deadline when the service never answers', async () => {
      const address = await fakeService(() => undefined);
      const run = await runCli(['check', '--deadline', '2', '--grpc-url', address, '/v1/models'], {});
      expect({ code: run.code, stdout: run.stdout }).toEqual({ code: 1, stdout: '' });
      expect(run.stderr).toBe(
        `error: the Check service at ${address} accepted the connection but did not answer within 2 s (gRPC status 4 DEADLINE_EXCEEDED)\n`,
      );
    });
  });

  it('restricts a key with `keys restrict`, and shows which restriction decided a denial', async () => {
    const { id, key } = await newKey('check-acme');
    const admin = { ADMIN_URL: server.adminUrl, ADMIN_TOKEN: TEST_ADMIN_TOKEN };
    const set = await runCli(['keys', 'restrict', '--id', id, '--source-addresses', '10.0.0.0/8, 2001:db8::/32', '--read-only'], admin);
    expect(set.stderr).toBe('');
    expect(set.stdout).toMatch(/restrictions +read-only; source addresses 10\.0\.0\.0\/8, 2001:db8::\/32/);
    const bad = await runCli(['keys', 'restrict', '--id', id, '--source-addresses', '10.0.0.0/99'], admin);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain('the prefix length must be 0 to 32');

    const auth = ['-H', `authorization: Bearer ${key}`];
    const inside = await json<AllowView>(['/v1/models', ...auth, '--source-address', '10.9.8.7']);
    expect(inside.code).toBe(0);
    const outside = await json<DenyView>(['/v1/models', ...auth, '--source-address', '192.0.2.1']);
    expect(outside.code).toBe(2);
    expect(outside.view).toMatchObject({ httpStatus: 401, code: 'address_not_permitted', restriction: 'address' });
    const written = await check(['-X', 'POST', '/v1/chat/completions', ...auth, '--source-address', '2001:db8::1']);
    expect(written.code).toBe(2);
    expect(written.stdout).toContain("Decided by the key's restrictions (its own or its account's): endpoint (or read-only).");
    expect((await check(['/v1/models', ...auth, '--source-address', '10.0.0'])).stderr).toContain('must be an IPv4 or IPv6 address');

    const cleared = await runCli(['keys', 'restrict', '--id', id, '--clear', '--json'], admin);
    expect((JSON.parse(cleared.stdout) as { restrictions: unknown }).restrictions).toBeNull();
    expect((await json<AllowView>(['/v1/models', ...auth, '--source-address', '192.0.2.1'])).code).toBe(0);
  });

  it('logged no key material for any of these Checks', () => {
    expect(server.logs.leaksOf(keys)).toEqual([]);
  });
});
