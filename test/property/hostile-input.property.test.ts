import fc from 'fast-check';
import { parseAuthorization } from '../../src/check/credentials/authorization-header';
import { toAuthRequest } from '../../src/check/check-request';
import { generateCustomerKey, parseCustomerKey } from '../../src/keys/customer-key';
import { decide } from '../../src/check/pipeline/decide';
import { classifyFamily, isCanonicalPath } from '../../src/check/routes/classify';
import { toCheckAnswer } from '../../src/check/responses/check-response';
import { fixtureWorld, type FixtureWorld } from '../support/pipeline-fixture-world';

/**
 * Property tests: whatever a client sends, nothing is allowed without a valid
 * key, every answer is well formed, and parsing never throws.
 */
const RUNS = { numRuns: 400 };
const headerName = fc.constantFrom(
  'authorization',
  'x-api-key',
  'x-goog-api-key',
  'x-vendorg-api-key',
  'anthropic-version',
  'vendora-version',
  'content-type',
  'x-request-id',
  'x-gateway-account-id',
);
const nastyText = fc.oneof(
  fc.string({ maxLength: 200 }),
  fc.string({ unit: 'binary', maxLength: 200 }),
  fc.constantFrom(
    'Bearer',
    'Bearer ',
    'bearer  x  y',
    'Basic Zm9vOmJhcg==',
    '\u0000',
    'gk_live_',
    ',,,',
    'Bearer gk_live_AAAA,Bearer gk_live_BBBB',
  ),
);
const path = fc
  .oneof(
    fc.constantFrom(
      '/v1/chat/completions',
      '/v1/messages',
      '/v1beta/models/g:generateContent',
      '/v1/models',
      '//v1/chat/completions',
      '/v1/../v1/messages',
      '/v1%2Fchat%2Fcompletions',
      '/V1/CHAT/COMPLETIONS',
      '/v1/chat/completions/',
      '/healthz',
    ),
    fc.string({ maxLength: 300 }).map((s) => `/${s}`),
    fc.webPath(),
  )
  .chain((p) => fc.option(fc.string({ maxLength: 100 }), { nil: undefined }).map((q) => (q === undefined ? p : `${p}?${q}`)));

describe('customer key format', () => {
  it('accepts every generated key and refuses every single-character change to one', () => {
    fc.assert(
      fc.property(
        fc.constantFrom('live', 'test' as const),
        fc.nat(43),
        fc.string({ minLength: 1, maxLength: 1 }),
        (env, index, replacement) => {
          const key = generateCustomerKey(env);
          expect(parseCustomerKey(key).ok).toBe(true);
          const mutated = key.slice(0, index) + replacement + key.slice(index + 1);
          if (mutated !== key) expect(parseCustomerKey(mutated).ok).toBe(false);
        },
      ),
      RUNS,
    );
  });

  it('never accepts random text as a key, and never throws', () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 80 }), (text) => expect(parseCustomerKey(text).ok).toBe(false)),
      RUNS,
    );
  });
});

describe('credential and route parsing', () => {
  it('parses any Authorization value without throwing, and only Bearer with one token gives a token', () => {
    fc.assert(
      fc.property(nastyText, (value) => {
        const parsed = parseAuthorization(value);
        if (parsed.ok) {
          expect(value.trim().toLowerCase().startsWith('bearer')).toBe(true);
          expect(parsed.token).not.toMatch(/\s/);
        }
      }),
      RUNS,
    );
  });

  it('never treats a non-canonical path as public', () => {
    fc.assert(
      fc.property(path, (target) => {
        const p = target.split('?')[0]!;
        if (!isCanonicalPath(p)) {
          const table = {
            families: [],
            publicRoutes: [{ describe: 'all', matches: () => true }],
            refusedRoutes: [],
            refusesUnlisted: true,
            enabled: [],
          };
          expect(classifyFamily(table, 'GET', p)).toBe('other');
        }
      }),
      RUNS,
    );
  });
});

describe('the whole pipeline on hostile CheckRequests', () => {
  let world: FixtureWorld;
  beforeAll(async () => {
    world = await fixtureWorld();
  });

  it('allows only with a stored active key, and always produces a well-formed answer', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.dictionary(headerName, nastyText, { maxKeys: 6 }),
        path,
        fc.constantFrom('GET', 'POST', '', 'DELETE', 'get'),
        fc.boolean(),
        async (headers, target, method, withValidKey) => {
          const allHeaders: Record<string, string> = { ...headers };
          if (withValidKey) allHeaders['authorization'] = `Bearer ${world.secrets.LIVE_KEY}`;
          const request = toAuthRequest({ attributes: { request: { http: { method, path: target, headers: allHeaders } } } });
          const decision = await decide(request, world.deps);
          const answer = toCheckAnswer(decision, { requestId: 'r', storeFailureMode: 'deny', now: 0, versionHeaders: ['vendora-version'] });
          expect(answer.kind).toBe('response');
          if (answer.kind !== 'response') return;
          if (decision.kind === 'allow') {
            // Only the stored live key (alone, in an accepted header) can get here; public routes are off.
            expect(decision.identity?.keyPrefix).toBe(world.secrets.LIVE_KEY.slice(0, 12));
            expect(answer.response.status.code).toBe(0);
          } else {
            expect(answer.response.status.code).not.toBe(0);
            expect(() => JSON.parse(answer.response.denied_response!.body) as unknown).not.toThrow();
            for (const secret of Object.values(world.secrets)) expect(answer.response.denied_response!.body).not.toContain(secret);
          }
        },
      ),
      RUNS,
    );
  });
});
