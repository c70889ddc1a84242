import { toAuthRequest } from '../../src/check/check-request';
import { decide } from '../../src/check/pipeline/decide';
import { envoyCheckRequest } from '../support/envoy-official-client';
import { fixtureWorld, type FixtureWorld } from '../support/pipeline-fixture-world';

/**
 * A family path with a trailing slash (or `//`, or a query after the slash)
 * reaches the same upstream path through envoy.yaml, so it must be decided by
 * that family's rules: its credential headers, its version header, its error
 * body style. Before, each of these was "other": any header, no version.
 */
let world: FixtureWorld;
beforeAll(async () => {
  world = await fixtureWorld();
});

async function decideOn(method: string, path: string, headers: Record<string, string>) {
  return decide(toAuthRequest(envoyCheckRequest({ method, path, headers })), world.deps);
}

describe('messages with a trailing slash', () => {
  it.each(['/v1/messages/', '/v1/messages/?beta=true', '/v1/messages/count_tokens/', '/v1//messages'])(
    '%s needs the version header (400 missing_version_header, messages body)',
    async (path) => {
      const decision = await decideOn('POST', path, { 'x-api-key': world.secrets.LIVE_KEY });
      expect({ family: decision.route.family, style: decision.route.style }).toEqual({ family: 'messages', style: 'messages' });
      expect(decision.kind === 'deny' && decision.reason).toBe('missing_version_header');
    },
  );

  it('is allowed with the version header, and tells the upstream it is a messages request', async () => {
    const decision = await decideOn('POST', '/v1/messages/', { 'x-api-key': world.secrets.LIVE_KEY, 'anthropic-version': '2023-06-01' });
    expect(decision.kind).toBe('allow');
    expect(decision.route.family).toBe('messages');
  });

  it('does not read x-goog-api-key', async () => {
    const decision = await decideOn('POST', '/v1/messages/', {
      'x-goog-api-key': world.secrets.LIVE_KEY,
      'anthropic-version': '2023-06-01',
    });
    expect(decision.kind === 'deny' && decision.reason).toBe('missing_credential');
  });
});

describe('chat-completions with a trailing slash', () => {
  it.each(['/v1/chat/completions/', '/v1/embeddings/', '/v1/chat/completions/?stream=true'])(
    '%s reads only Authorization: Bearer (x-api-key is 401 missing_credential, chat body)',
    async (path) => {
      const decision = await decideOn('POST', path, { 'x-api-key': world.secrets.LIVE_KEY });
      expect({ family: decision.route.family, style: decision.route.style }).toEqual({ family: 'chat-completions', style: 'chat' });
      expect(decision.kind === 'deny' && decision.reason).toBe('missing_credential');
      expect(decision.kind === 'deny' && decision.message).toContain("'x-api-key'");
      const allowed = await decideOn('POST', path, { authorization: `Bearer ${world.secrets.LIVE_KEY}` });
      expect(allowed.kind).toBe('allow');
    },
  );
});

describe('generative-content with a trailing slash', () => {
  it('gets generative rules and body style', async () => {
    const path = '/v1beta/models/gemini-2.5-flash:generateContent/';
    const decision = await decideOn('POST', path, { 'x-goog-api-key': world.secrets.LIVE_KEY });
    expect(decision.kind).toBe('allow');
    expect({ family: decision.route.family, style: decision.route.style }).toEqual({ family: 'generative-content', style: 'generative' });
    const missing = await decideOn('POST', path, {});
    expect(missing.kind === 'deny' && missing.message).toContain("'x-vendorg-api-key: <key>'");
  });
});

describe('models with a trailing slash', () => {
  it.each([
    ['/v1/models/', { 'anthropic-version': '2023-06-01' }, 'messages'],
    ['/v1beta/models/', {}, 'generative'],
    ['/v1/models/gpt-4o/', {}, 'chat'],
  ] as const)('GET %s is the models route, styled by its headers', async (path, extra, style) => {
    const decision = await decideOn('GET', path, { ...extra, 'x-api-key': 'not-a-key' });
    expect({ family: decision.route.family, style: decision.route.style }).toEqual({ family: 'models', style });
  });
});

it('the logged path stays the one the client sent', async () => {
  const decision = await decideOn('POST', '/v1//messages/?beta=true', { 'x-api-key': world.secrets.LIVE_KEY });
  expect(decision.route.pathWithoutQuery).toBe('/v1//messages/');
});
