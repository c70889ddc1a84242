import { toAuthRequest, type CheckRequestMessage } from '../../src/check/check-request';
import { decide } from '../../src/check/pipeline/decide';
import { toCheckAnswer } from '../../src/check/responses/check-response';
import { loadCheckRequestFixtures, materialize } from '../support/check-request-fixtures';
import { FIXTURE_ACCOUNT, fixtureWorld, type FixtureWorld } from '../support/pipeline-fixture-world';

/** Denials that must be decided without asking the store. */
const OFFLINE_REASONS = new Set([
  'route_not_enabled',
  'missing_credential',
  'invalid_authorization_scheme',
  'malformed_authorization_header',
  'conflicting_credentials',
  'query_key_not_accepted',
  'query_key_not_removable',
  'malformed_key',
  'upstream_key_not_accepted',
  'missing_version_header',
  'unsupported_version',
]);

describe('decision pipeline on Envoy CheckRequest fixtures', () => {
  let world: FixtureWorld;
  beforeAll(async () => {
    world = await fixtureWorld();
  });

  const fixtures = loadCheckRequestFixtures();
  it('has fixtures for every family and both outcomes', () => {
    expect(new Set(fixtures.map((f) => f.expect.family))).toEqual(
      new Set(['chat-completions', 'messages', 'generative-content', 'models', 'other']),
    );
    expect(fixtures.filter((f) => f.expect.result === 'allow').length).toBeGreaterThan(5);
    expect(fixtures.filter((f) => f.expect.result === 'deny').length).toBeGreaterThan(20);
  });

  it.each(fixtures.map((f) => [f.name, f] as const))('%s', async (_name, fixture) => {
    const message = materialize(fixture.check_request, world.secrets) as CheckRequestMessage;
    const before = world.lookup.lookups;
    const decision = await decide(toAuthRequest(message), world.deps);
    const lookups = world.lookup.lookups - before;

    expect(decision.route.family).toBe(fixture.expect.family);
    expect(decision.route.style).toBe(fixture.expect.style);
    expect(decision.kind).toBe(fixture.expect.result);
    const answer = toCheckAnswer(decision, { requestId: 'r', storeFailureMode: 'deny', now: 0, versionHeaders: [] });
    expect(answer.kind === 'response' && answer.httpStatus).toBe(fixture.expect.http_status);

    if (decision.kind === 'deny') {
      expect(decision.reason).toBe(fixture.expect.reason);
      if (OFFLINE_REASONS.has(decision.reason)) expect(lookups).toBe(0);
      else expect(lookups).toBe(1);
      // No secret of any kind is echoed back to the client.
      for (const secret of Object.values(world.secrets)) expect(decision.message).not.toContain(secret);
    } else {
      expect(lookups).toBe(1);
      expect(decision.identity?.accountId).toBe(FIXTURE_ACCOUNT);
      expect(decision.strip.headers).toEqual(expect.arrayContaining(['authorization', 'x-api-key', 'x-vendorg-api-key', 'x-goog-api-key']));
    }
  });
});
