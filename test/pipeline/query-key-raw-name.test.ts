import fc from 'fast-check';
import { toAuthRequest } from '../../src/check/check-request';
import { decide } from '../../src/check/pipeline/decide';
import { toCheckAnswer } from '../../src/check/responses/check-response';
import { envoyCheckRequest } from '../support/envoy-official-client';
import { fixtureWorld, type FixtureWorld } from '../support/pipeline-fixture-world';

/**
 * Envoy's ext_authz removes `query_parameters_to_remove` by the parameter's
 * raw, undecoded name (QueryParamsMulti::parseQueryString with
 * decode_params=false, then an exact erase). A name that only decodes to
 * `key` is therefore never removed: the key would reach the upstream and its
 * logs. Such a request is refused, and a removal is only ever reported for a
 * parameter spelled exactly `key`.
 */
const GENERATE = '/v1beta/models/gemini-2.5-flash:generateContent';

/** The raw parameter names Envoy sees in a request target. */
function rawQueryNames(target: string): string[] {
  const mark = target.indexOf('?');
  if (mark === -1) return [];
  return target
    .slice(mark + 1)
    .split('&')
    .filter((part) => part !== '')
    .map((part) => part.split('=', 1)[0]!);
}

async function decideOn(world: FixtureWorld, path: string, headers: Record<string, string> = {}, method = 'POST') {
  return decide(toAuthRequest(envoyCheckRequest({ method, path, headers })), world.deps);
}

describe('query parameters that decode to "key" but are not spelled "key"', () => {
  let world: FixtureWorld;
  beforeAll(async () => {
    world = await fixtureWorld({ acceptQueryKey: true, publicRoutes: [{ exact: '/healthz' }] });
  });

  it.each([
    ['k%65y', 'an encoded letter'],
    ['%6B%65%79', 'every letter encoded, upper-case hex'],
    ['%6b%65%79', 'every letter encoded, lower-case hex'],
    ['ke%79', 'the last letter encoded'],
  ])('?%s= (%s) is 400 query_key_not_removable, naming the raw parameter', async (rawName) => {
    const decision = await decideOn(world, `${GENERATE}?${rawName}=${world.secrets.LIVE_KEY}`);
    expect(decision.kind).toBe('deny');
    if (decision.kind !== 'deny') return;
    expect(decision.reason).toBe('query_key_not_removable');
    expect(decision.param).toBe(rawName);
    expect(decision.message).toContain(`'${rawName}' reads as 'key'`);
    expect(decision.message).not.toContain(world.secrets.LIVE_KEY);
    const answer = toCheckAnswer(decision, { requestId: 'r', storeFailureMode: 'deny', now: 0, versionHeaders: [] });
    expect(answer.kind === 'response' && answer.httpStatus).toBe(400);
    expect(answer.kind === 'response' && answer.response.status.code).toBe(3);
    expect(world.lookup.lookups).toBe(0);
  });

  it('is refused even beside a valid header key and a plain ?key=', async () => {
    const decision = await decideOn(world, `${GENERATE}?key=${world.secrets.LIVE_KEY}&k%65y=${world.secrets.OTHER_LIVE_KEY}`, {
      'x-goog-api-key': world.secrets.LIVE_KEY,
    });
    expect(decision.kind === 'deny' && decision.reason).toBe('query_key_not_removable');
  });

  it('is refused after a second "?", whose raw name is "?key" to Envoy', async () => {
    const decision = await decideOn(world, `${GENERATE}??key=${world.secrets.LIVE_KEY}`, { 'x-goog-api-key': world.secrets.LIVE_KEY });
    expect(decision.kind === 'deny' && decision.reason).toBe('query_key_not_removable');
    expect(decision.kind === 'deny' && decision.param).toBe('?key');
  });

  it('is refused on chat routes too, where query keys are never read, and on a public route', async () => {
    const chat = await decideOn(world, `/v1/chat/completions?k%65y=${world.secrets.LIVE_KEY}`, {
      authorization: `Bearer ${world.secrets.LIVE_KEY}`,
    });
    expect(chat.kind === 'deny' && chat.reason).toBe('query_key_not_removable');
    expect(chat.kind === 'deny' && chat.message).toContain("'Authorization: Bearer <key>'");
    const open = await decideOn(world, `/healthz?k%65y=${world.secrets.LIVE_KEY}`, {}, 'GET');
    expect(open.kind === 'deny' && open.reason).toBe('query_key_not_removable');
    expect(open.kind === 'deny' && open.message).toContain('this route needs no API key');
  });

  it.each([
    [`?key=LIVE`, ['key']],
    [`?alt=sse&key=LIVE`, ['key']],
    [`?key=LIVE&key=LIVE`, ['key']],
    [`?key=`, ['key']],
    [`?key`, ['key']],
    [`?alt=sse`, []],
    [`?monkey=1&keys=2&key%20=3&Key=4`, []],
    [`?alt=%73se`, []],
  ])('a plainly spelled query is allowed, and only a raw "key" is reported for removal: %s', async (query, expected) => {
    const target = `${GENERATE}${query.replace(/LIVE/g, world.secrets.LIVE_KEY)}`;
    const decision = await decideOn(world, target, { 'x-goog-api-key': world.secrets.LIVE_KEY });
    expect(decision.kind).toBe('allow');
    expect(decision.kind === 'allow' && decision.strip.queryParameters).toEqual(expected);
    // Every reported removal is one Envoy performs: a raw name in the request.
    for (const name of decision.kind === 'allow' ? decision.strip.queryParameters : []) expect(rawQueryNames(target)).toContain(name);
  });
});

describe('whatever the query, a reported removal is one Envoy performs', () => {
  /** Each character of 'key' plain, or escaped in either hex case; sometimes other names around it. */
  const spelledKey = fc
    .tuple(
      ...[...'key'].map((char) =>
        fc.constantFrom(char, `%${char.charCodeAt(0).toString(16)}`, `%${char.charCodeAt(0).toString(16).toUpperCase()}`),
      ),
    )
    .map((chars) => chars.join(''));
  // No '#': Envoy refuses a request target with a fragment by default (http_reject_path_with_fragment), so a Check never carries one.
  const name = fc.oneof(
    spelledKey,
    fc.constantFrom('?key', 'Key', 'key%20', 'k%2565y', 'alt', 'monkey', ''),
    fc.string({ maxLength: 8 }).filter((text) => !text.includes('#')),
  );
  const part = fc
    .tuple(name, fc.option(fc.constantFrom('LIVE', 'sse', '', '%41'), { nil: undefined }))
    .map(([n, v]) => (v === undefined ? n : `${n}=${v}`));
  const query = fc.array(part, { minLength: 1, maxLength: 4 }).map((parts) => parts.join('&'));

  it('reports only a raw "key", and refuses any disguised one', async () => {
    const world = await fixtureWorld({ acceptQueryKey: true });
    await fc.assert(
      fc.asyncProperty(query, async (q) => {
        const target = `${GENERATE}?${q.replace(/LIVE/g, world.secrets.LIVE_KEY)}`;
        const decision = await decideOn(world, target, { 'x-goog-api-key': world.secrets.LIVE_KEY });
        const raw = rawQueryNames(target);
        const decoded = [...new URLSearchParams(target.slice(target.indexOf('?') + 1)).keys()];
        const disguised = decoded.filter((n) => n === 'key').length > raw.filter((n) => n === 'key').length;
        if (disguised) {
          expect(decision.kind === 'deny' && decision.reason).toBe('query_key_not_removable');
        } else if (decision.kind === 'allow') {
          for (const removed of decision.strip.queryParameters) expect(raw).toContain(removed);
        }
      }),
      { numRuns: 300 },
    );
  });
});
