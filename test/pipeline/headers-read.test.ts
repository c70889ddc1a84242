import fc from 'fast-check';
import { checkRequestHeaderSelection, toAuthRequest, type CheckRequestMessage } from '../../src/check/check-request';
import { decodeCheckRequest } from '../../src/check/check-request-decoding';
import { loadAuthorizationService } from '../../src/check/proto-loading';
import type { AuthRequest } from '../../src/check/auth-request';
import type { Decision } from '../../src/check/decision';
import { decide } from '../../src/check/pipeline/decide';
import { headersThePipelineReads } from '../../src/check/pipeline/headers-read';
import { loadCheckRequestFixtures, materialize } from '../support/check-request-fixtures';
import { fixtureWorld, type FixtureWorld } from '../support/pipeline-fixture-world';
import { officialCheckMethod } from '../support/envoy-official-client';

/** protobufjs through proto-loader: every header, as grpc-js would hand them over. */
const generic = loadAuthorizationService().service.Check!;
const official = officialCheckMethod();

const fixtures = loadCheckRequestFixtures();
const SETTINGS_VARIANTS: [string, object | undefined][] = [
  ['default settings', undefined],
  ["the spec's spellings only", { acceptVendorHeaderSpellings: false }],
  ['query keys on', { acceptQueryKey: true }],
];

/** A request whose headers note every name the pipeline looks up, and any walk over all of them. */
function watched(request: AuthRequest, read: Set<string>): AuthRequest {
  const headers = new Proxy(request.headers, {
    get(target, name) {
      if (typeof name === 'string') read.add(name);
      return target[name as string];
    },
    has(target, name) {
      if (typeof name === 'string') read.add(name);
      return name in target;
    },
    ownKeys(target) {
      read.add('(every header)');
      return Reflect.ownKeys(target);
    },
  });
  return { ...request, headers };
}

/** What the client and the upstream get out of a decision; the rate-limit counts move with every decision, so they are left out. */
function comparable(decision: Decision): object {
  const { rateLimit: _rateLimit, tokenBudget: _tokenBudget, ...rest } = decision;
  return rest;
}

describe.each(SETTINGS_VARIANTS)('the headers the pipeline reads, with %s', (_label, config) => {
  let world: FixtureWorld;
  let selected: ReadonlySet<string>;
  beforeAll(async () => {
    world = await fixtureWorld(config);
    selected = new Set(headersThePipelineReads(world.settings.pipeline.headerNames));
  });
  afterEach(() => world.clock.advance(3_600_000));

  it('are all it reads, on every Envoy-shaped fixture', async () => {
    const read = new Set<string>();
    for (const fixture of fixtures) {
      await decide(watched(toAuthRequest(materialize(fixture.check_request, world.secrets)), read), world.deps);
      world.clock.advance(3_600_000);
    }
    expect([...read].filter((name) => !selected.has(name))).toEqual([]);
    // The list is not wider than the reads: every credential and version header was looked at.
    expect([...selected].filter((name) => !read.has(name))).toEqual([]);
  });

  it('decide every fixture, with other headers added, as all the headers do (through the gRPC decoder that keeps only those)', async () => {
    const selection = checkRequestHeaderSelection(world.settings.pipeline.headerNames);
    const names = [...selected, ':path', ':method', 'x-request-id'];
    const headerName = fc.oneof(
      fc.constantFrom(...names),
      fc.constantFrom(...names).map((name) => name.toUpperCase()),
      fc.constantFrom(...names).map((name) => name.replace('k', '\u212a')), // the Kelvin sign lower-cases to k
      fc.constantFrom('user-agent', 'x-stainless-lang', 'content-type', 'X-Mixed-Case', 'x-api-key2', 'authorizatio'),
      fc.string({ maxLength: 16 }),
    );
    const headerValue = fc.oneof(
      fc.constant(world.secrets.LIVE_KEY),
      fc.constant(`Bearer ${world.secrets.LIVE_KEY}`),
      fc.constantFrom('2023-06-01', 'sk-proj-abcdefghijklmnopqrstuvwxyz0123456789ABCD', ''),
      fc.string({ maxLength: 40 }),
    );
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(...fixtures.filter((fixture) => (fixture.check_request as CheckRequestMessage).attributes?.request?.http)),
        fc.dictionary(headerName, headerValue, { maxKeys: 6 }),
        fc.array(fc.record({ key: headerName, value: headerValue }), { maxLength: 3 }),
        async (fixture, extra, raw) => {
          const request = materialize(fixture.check_request, world.secrets) as CheckRequestMessage;
          const http = request.attributes!.request!.http!;
          const withExtra = {
            ...request,
            attributes: {
              ...request.attributes,
              request: {
                ...request.attributes!.request,
                http: {
                  ...http,
                  headers: { ...http.headers, ...extra },
                  ...(raw.length > 0 ? { header_map: { headers: raw } } : {}),
                },
              },
            },
          };
          const bytes = official.requestSerialize(withExtra);
          const all = toAuthRequest(generic.requestDeserialize(bytes));
          const kept = toAuthRequest(decodeCheckRequest(bytes, selection));
          const fromAll = await decide(all, world.deps);
          const fromKept = await decide(kept, world.deps);
          world.clock.advance(3_600_000);
          expect(comparable(fromKept)).toEqual(comparable(fromAll));
          expect(kept.requestId).toBe(all.requestId);
          expect(kept.method).toBe(all.method);
          expect(kept.path).toBe(all.path);
        },
      ),
      { numRuns: 300, seed: 14 },
    );
  });
});
