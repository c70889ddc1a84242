import { toAuthRequest } from '../../src/check/check-request';
import { decide } from '../../src/check/pipeline/decide';
import { toCheckAnswer } from '../../src/check/responses/check-response';
import { generateCustomerKey } from '../../src/keys/customer-key';
import { loadCheckRequestFixtures, materialize } from '../support/check-request-fixtures';
import { fixtureWorld, insertKey } from '../support/pipeline-fixture-world';
import { envoyCheckRequest } from '../support/envoy-official-client';

function fixtureRequest(file: string, secrets: Parameters<typeof materialize>[1]) {
  const fixture = loadCheckRequestFixtures().find((f) => f.file.endsWith(`${file}.json`));
  if (!fixture) throw new Error(`no fixture ${file}`);
  return toAuthRequest(materialize(fixture.check_request, secrets));
}

describe('decision pipeline: operator settings and time', () => {
  it('accepts ?key= on generative routes when the operator turns it on, and strips it', async () => {
    const world = await fixtureWorld({ acceptQueryKey: true });
    const decision = await decide(fixtureRequest('generative-query-key', world.secrets), world.deps);
    expect(decision.kind).toBe('allow');
    expect(decision.kind === 'allow' && decision.strip.queryParameters).toEqual(['key']);
  });

  it('keeps refusing ?key= on chat routes even when query keys are on', async () => {
    const world = await fixtureWorld({ acceptQueryKey: true });
    const request = toAuthRequest(envoyCheckRequest({ path: `/v1/chat/completions?key=${world.secrets.LIVE_KEY}` }));
    const decision = await decide(request, world.deps);
    expect(decision.kind === 'deny' && decision.reason).toBe('query_key_not_accepted');
  });

  it("restricted to the spec's spellings, x-goog-api-key and anthropic-version are not read", async () => {
    const world = await fixtureWorld({ acceptVendorHeaderSpellings: false });
    const goog = await decide(fixtureRequest('generative-goog-header-stream', world.secrets), world.deps);
    expect(goog.kind === 'deny' && goog.reason).toBe('missing_credential');
    expect(goog.kind === 'deny' && goog.message).toContain('x-vendorg-api-key');
    const messages = await decide(fixtureRequest('messages-x-api-key', world.secrets), world.deps);
    expect(messages.kind === 'deny' && messages.reason).toBe('missing_version_header');
    expect(messages.kind === 'deny' && messages.param).toBe('vendora-version');
    const spec = await decide(fixtureRequest('messages-spec-version-header', world.secrets), world.deps);
    expect(spec.kind).toBe('allow');
  });

  it.each(['2023-06-01', '2026-10-21'])(
    'accepts %s, which a current official Anthropic SDK sends, with no config at all',
    async (version) => {
      const world = await fixtureWorld();
      const request = toAuthRequest(
        envoyCheckRequest({
          path: '/v1/messages',
          headers: { authorization: `Bearer ${world.secrets.LIVE_KEY}`, 'anthropic-version': version },
        }),
      );
      expect((await decide(request, world.deps)).kind).toBe('allow');
    },
  );

  it('lets the operator narrow the accepted versions: with ["2023-06-01"] only, 2026-10-21 is 400 unsupported_version', async () => {
    const world = await fixtureWorld({ messagesVersions: ['2023-06-01'] });
    const request = toAuthRequest(
      envoyCheckRequest({ path: '/v1/messages', headers: { 'x-api-key': world.secrets.LIVE_KEY, 'anthropic-version': '2026-10-21' } }),
    );
    const decision = await decide(request, world.deps);
    expect(decision.kind === 'deny' && decision.reason).toBe('unsupported_version');
    expect(decision.kind === 'deny' && decision.message).toContain("Accepted values: '2023-06-01'.");
  });

  it('lets an operator-listed public route through without a key, stripping identity headers', async () => {
    const world = await fixtureWorld({ publicRoutes: [{ exact: '/healthz', methods: ['GET'] }] });
    const decision = await decide(fixtureRequest('other-healthz-refused-not-public', world.secrets), world.deps);
    expect(decision.kind).toBe('allow');
    expect(decision.kind === 'allow' && decision.identity).toBeUndefined();
    const answer = toCheckAnswer(decision, { requestId: '', storeFailureMode: 'deny', now: 0, versionHeaders: [] });
    expect(answer.kind === 'response' && answer.response.ok_response?.headers_to_remove).toEqual(
      expect.arrayContaining(['authorization', 'x-gateway-account-id', 'x-gateway-key-id']),
    );
    expect(world.lookup.lookups).toBe(0);
  });

  it.each(['//healthz', '/./healthz', '/x/../healthz', '/%68ealthz/%2e%2e/healthz'])(
    'does not treat the path trick %s as the public route',
    async (path) => {
      const publicRoutes = [{ exact: '/healthz' }, { prefix: '/x' }];
      // Refused as a path no route names by default; where those are enabled, it still needs a key.
      const world = await fixtureWorld({ publicRoutes });
      const decision = await decide(toAuthRequest(envoyCheckRequest({ method: 'GET', path })), world.deps);
      expect(decision.kind === 'deny' && decision.reason).toBe('route_not_enabled');
      const unlisted = await fixtureWorld({ publicRoutes, enabledRoutes: ['unlisted'] });
      const keyed = await decide(toAuthRequest(envoyCheckRequest({ method: 'GET', path })), unlisted.deps);
      expect(keyed.kind === 'deny' && keyed.reason).toBe('missing_credential');
    },
  );

  it('refuses a key after its expiry time on the injected clock, and not before', async () => {
    const world = await fixtureWorld();
    const key = generateCustomerKey('test');
    await insertKey(world.store, key, { expiresAt: new Date(world.clock.now() + 60_000).toISOString() });
    const request = toAuthRequest(envoyCheckRequest({ path: '/v1/chat/completions', headers: { authorization: `Bearer ${key}` } }));
    expect((await decide(request, world.deps)).kind).toBe('allow');
    world.clock.advance(59_999);
    expect((await decide(request, world.deps)).kind).toBe('allow');
    world.clock.advance(1);
    const expired = await decide(request, world.deps);
    expect(expired.kind === 'deny' && expired.reason).toBe('key_expired');
  });

  it('denies with store_unavailable (503) when the store fails, or answers a gRPC error if configured', async () => {
    const world = await fixtureWorld();
    const failing = { resolveKeyHash: () => Promise.reject(new Error('connection refused')) };
    const decision = await decide(fixtureRequest('chat-valid-bearer', world.secrets), { ...world.deps, keyIndex: failing });
    expect(decision.kind === 'deny' && decision.reason).toBe('store_unavailable');
    const denied = toCheckAnswer(decision, { requestId: '', storeFailureMode: 'deny', now: 0, versionHeaders: [] });
    expect(denied.kind === 'response' && denied.httpStatus).toBe(503);
    const rpcError = toCheckAnswer(decision, { requestId: '', storeFailureMode: 'grpc-unavailable', now: 0, versionHeaders: [] });
    expect(rpcError).toEqual({ kind: 'rpc-error', grpcCode: 14, details: 'key store unavailable' });
  });
});
