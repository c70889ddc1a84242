/**
 * `unpricedModels: "refuse"` at Check time: a request naming a model the
 * price table does not price is refused 404 `model_not_priced` before the
 * store's authorize (no Redis round trip, no rate-limit token), where Check
 * knows the model: the Gemini-style path, or the top-level `model` of a body
 * that Envoy sends (ext_authz `with_request_body`).
 */
import type { Authorizer } from '../../src/check/ports';
import { toAuthRequest } from '../../src/check/check-request';
import fc from 'fast-check';
import { decide } from '../../src/check/pipeline/decide';
import { topLevelModelOf } from '../../src/check/pipeline/model-step';
import { toCheckAnswer } from '../../src/check/responses/check-response';
import { parseDenyBody } from '../support/deny-body';
import { envoyCheckRequest, type EnvoyCheckRequestOptions } from '../support/envoy-official-client';
import { fixtureWorld, type FixtureWorld } from '../support/pipeline-fixture-world';

const pricing = (unpricedModels: 'refuse' | 'charge-default') => ({
  pricing: {
    models: [
      { model: 'gemini-2.5-flash*', input: 30, output: 250 },
      { model: 'gpt-4o-mini*', input: 15, output: 60 },
      { model: 'claude-sonnet-4-5', input: 300, output: 1500 },
    ],
    default: { input: 100, output: 400, webSearchCall: 10_000 },
    unpricedModels,
  },
});

/** Counts the store's authorize calls: a refused model must not reach it. */
function countingAuthorizer(world: FixtureWorld): { calls: number } {
  const counter = { calls: 0 };
  const inner: Authorizer = world.deps.authorizer;
  world.deps.authorizer = {
    authorize: (request) => {
      counter.calls += 1;
      return inner.authorize(request);
    },
  };
  return counter;
}

async function decideFor(world: FixtureWorld, options: EnvoyCheckRequestOptions) {
  return decide(toAuthRequest(envoyCheckRequest(options)), world.deps);
}

const gemini = (world: FixtureWorld, model: string, method = 'generateContent'): EnvoyCheckRequestOptions => ({
  method: 'POST',
  path: `/v1beta/models/${model}:${method}`,
  headers: { 'x-goog-api-key': world.secrets.LIVE_KEY },
});

const chat = (world: FixtureWorld, body?: string | Buffer): EnvoyCheckRequestOptions => ({
  method: 'POST',
  path: '/v1/chat/completions',
  headers: { authorization: `Bearer ${world.secrets.LIVE_KEY}` },
  ...(body === undefined ? {} : { body }),
});

const messages = (world: FixtureWorld, body: string | Buffer): EnvoyCheckRequestOptions => ({
  method: 'POST',
  path: '/v1/messages',
  headers: { 'x-api-key': world.secrets.LIVE_KEY, 'anthropic-version': '2023-06-01' },
  body,
});

describe('unpricedModels: "refuse" at Check time', () => {
  it('refuses a Gemini path naming an unpriced model with 404 model_not_priced, without calling the store', async () => {
    const world = await fixtureWorld(pricing('refuse'));
    const authorize = countingAuthorizer(world);
    for (const method of ['generateContent', 'streamGenerateContent', 'countTokens']) {
      const decision = await decideFor(world, gemini(world, 'gemini-1.0-ultra', method));
      expect(decision.kind === 'deny' && decision.reason).toBe('model_not_priced');
      expect(decision.kind === 'deny' && decision.message).toBe(
        "The model 'gemini-1.0-ultra' is not offered by this gateway. Ask the gateway's operator which models are available; retrying will not help.",
      );
      expect(decision.kind === 'deny' && decision.accountId).toBe('acct_fixture');
    }
    expect(authorize.calls).toBe(0);
    const answer = toCheckAnswer(await decideFor(world, gemini(world, 'gemini-1.0-ultra')), {
      requestId: 'r1',
      storeFailureMode: 'deny',
      now: 0,
      versionHeaders: [],
    });
    expect(answer.kind === 'response' && answer.httpStatus).toBe(404);
    expect(answer.kind === 'response' && parseDenyBody(answer.response.denied_response!.body).error.status).toBe('NOT_FOUND');
  });

  it('allows a priced Gemini model (a prefix pattern), on /v1beta and /v1', async () => {
    const world = await fixtureWorld(pricing('refuse'));
    expect((await decideFor(world, gemini(world, 'gemini-2.5-flash-lite'))).kind).toBe('allow');
    const v1 = await decideFor(world, { ...gemini(world, 'x'), path: '/v1/models/gemini-2.5-flash:generateContent' });
    expect(v1.kind).toBe('allow');
  });

  it('under charge-default, and without a price table, allows every model (metering charges the default)', async () => {
    for (const config of [pricing('charge-default'), undefined]) {
      const world = await fixtureWorld(config);
      expect((await decideFor(world, gemini(world, 'gemini-1.0-ultra'))).kind).toBe('allow');
      expect((await decideFor(world, chat(world, '{"model":"mistral-large"}'))).kind).toBe('allow');
    }
  });

  it('decodes the path model once: %2D is "-", %252D stays the text "%2D", a bad escape or an escaped "/" is 400', async () => {
    const world = await fixtureWorld(pricing('refuse'));
    expect((await decideFor(world, gemini(world, 'gemini-2.5%2Dflash'))).kind).toBe('allow');
    const twice = await decideFor(world, gemini(world, 'gemini-2.5%252Dflash'));
    expect(twice.kind === 'deny' && twice.reason).toBe('model_not_priced');
    expect(twice.kind === 'deny' && twice.message).toContain("'gemini-2.5%2Dflash'");
    for (const model of ['gemini-2.5-flash%', 'gemini-2.5-flash%zz', 'gemini-2.5-flash%2Fx', 'gemini%00', '%C3']) {
      const decision = await decideFor(world, gemini(world, model));
      expect({ model, reason: decision.kind === 'deny' && decision.reason }).toEqual({ model, reason: 'malformed_model_name' });
    }
  });

  it('reads the model a dot-segment path resolves to, as the upstream would', async () => {
    const world = await fixtureWorld(pricing('refuse'));
    const decision = await decideFor(world, { ...gemini(world, 'x'), path: '/v1beta/models/gemini-2.5-flash/../unpriced:generateContent' });
    expect(decision.kind === 'deny' && decision.reason).toBe('model_not_priced');
  });

  it('refuses a chat or messages body naming an unpriced model, as string body or raw_body bytes', async () => {
    const world = await fixtureWorld(pricing('refuse'));
    const authorize = countingAuthorizer(world);
    // The Python SDKs put `messages` before `model`: the model is found wherever it is in the top-level object.
    const body = JSON.stringify({ messages: [{ role: 'user', content: 'hi', model: 'gpt-4o-mini' }], model: 'mistral-large' });
    for (const options of [chat(world, body), chat(world, Buffer.from(body)), messages(world, body)]) {
      const decision = await decideFor(world, options);
      expect(decision.kind === 'deny' && decision.reason).toBe('model_not_priced');
      expect(decision.kind === 'deny' && decision.message).toContain("'mistral-large'");
    }
    expect(authorize.calls).toBe(0);
    expect((await decideFor(world, chat(world, '{"model":"gpt-4o-mini-2024-07-18","messages":[]}'))).kind).toBe('allow');
    expect((await decideFor(world, messages(world, '{"model":"claude-sonnet-4-5","max_tokens":1}'))).kind).toBe('allow');
    expect(authorize.calls).toBe(2);
  });

  it('allows a body-style request without a body (Envoy does not send one): the model is unknown at Check time', async () => {
    const world = await fixtureWorld(pricing('refuse'));
    expect((await decideFor(world, chat(world))).kind).toBe('allow');
  });

  it.each([
    ['cut short (allow_partial_message)', '{"model":"mistral-large","messages":[{"role":"user","content":"hel'],
    ['not JSON', 'model=mistral-large'],
    ['a nested model only', '{"request":{"model":"mistral-large"}}'],
    ['a model that is no string', '{"model":["mistral-large"]}'],
    ['a JSON array', '[{"model":"mistral-large"}]'],
    ['trailing garbage', '{"model":"mistral-large"} x'],
    ['invalid UTF-8', Buffer.from([0x7b, 0x22, 0x6d, 0xff, 0xfe, 0x7d])],
  ])('allows a body %s, without crashing (the upstream answers it)', async (_name, body) => {
    const world = await fixtureWorld(pricing('refuse'));
    expect((await decideFor(world, chat(world, body))).kind).toBe('allow');
  });

  it('bounds and sanitises the model it quotes: at most 80 characters, no control characters or quotes', async () => {
    const world = await fixtureWorld(pricing('refuse'));
    const decision = await decideFor(world, chat(world, JSON.stringify({ model: `evil'\n\u0000${'x'.repeat(5000)}` })));
    expect(decision.kind === 'deny' && decision.reason).toBe('model_not_priced');
    const message = decision.kind === 'deny' ? decision.message : '';
    expect(message).toContain(`'evil???${'x'.repeat(73)}…'`);
    expect(message.length).toBeLessThan(250);
    // eslint-disable-next-line no-control-regex
    expect(message).not.toMatch(/[\u0000-\u001f]/);
  });

  it('answers an unauthenticated or unknown caller 401 first: model policy is told only to known keys', async () => {
    const world = await fixtureWorld(pricing('refuse'));
    const missing = await decideFor(world, { ...gemini(world, 'gemini-1.0-ultra'), headers: {} });
    expect(missing.kind === 'deny' && missing.reason).toBe('missing_credential');
    const unknown = await decideFor(world, {
      ...gemini(world, 'gemini-1.0-ultra'),
      headers: { 'x-goog-api-key': world.secrets.UNKNOWN_KEY },
    });
    expect(unknown.kind === 'deny' && unknown.reason).toBe('unknown_key');
    const malformed = await decideFor(world, chat({ ...world, secrets: { ...world.secrets, LIVE_KEY: 'gk_live_nope' } }, '{"model":"x"}'));
    expect(malformed.kind === 'deny' && malformed.reason).toBe('malformed_key');
  });
});

describe('topLevelModelOf: the body model, held to JSON.parse', () => {
  /** What JSON.parse says the top-level model string is, for a complete document. */
  function expected(text: string): string | undefined {
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      return undefined;
    }
    if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) return undefined;
    const model = (parsed as Record<string, unknown>).model;
    return typeof model === 'string' ? model : undefined;
  }

  const body = fc.oneof(
    fc
      .record({ model: fc.oneof(fc.string({ maxLength: 40 }), fc.jsonValue({ maxDepth: 2 })), messages: fc.jsonValue({ maxDepth: 3 }) })
      .map((value) => JSON.stringify(value)),
    fc
      .record({ messages: fc.jsonValue({ maxDepth: 3 }), model: fc.string({ unit: 'binary', maxLength: 40 }) })
      .map((value) => JSON.stringify(value)),
    fc.json({ maxDepth: 3 }),
    fc.string({ maxLength: 60 }),
  );

  it('agrees with JSON.parse on whole, cut and duplicated-key bodies, one after another on the shared scanner', () => {
    fc.assert(
      fc.property(fc.array(fc.tuple(body, fc.nat(), fc.boolean()), { minLength: 1, maxLength: 8 }), (cases) => {
        for (const [text, cut, duplicate] of cases) {
          // A cut anywhere (as allow_partial_message would), or a second "model" key after the first (the last wins).
          const variant = duplicate && text.startsWith('{"') ? `{"model":"first",${text.slice(1)}` : text.slice(0, text.length - (cut % 3));
          expect({ variant, model: topLevelModelOf(Buffer.from(variant)) }).toEqual({ variant, model: expected(variant) });
        }
      }),
      { numRuns: 500, seed: 16 },
    );
  });
});
