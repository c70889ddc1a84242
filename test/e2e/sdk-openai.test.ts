/**
 * The official `openai` SDK against the gateway, through the Envoy-faithful
 * front to the fake upstream: the current major (7.x, package.json's `openai`)
 * and the previous one (6.x, installed as `openai-v6`), which customers on
 * older Node still use. What docs/reference/works-with.md's table promises for
 * OpenAI-style clients is what this file checks.
 */
import OpenAI, { APIError, AuthenticationError, RateLimitError } from 'openai';
import OpenAIV6, {
  APIError as APIErrorV6,
  AuthenticationError as AuthenticationErrorV6,
  RateLimitError as RateLimitErrorV6,
} from 'openai-v6';
import { totalTokens } from '../../src/metering/usage';
import { displayPrefixOf } from '../../src/keys/customer-key';
import { registerSecrets } from '../support/secret-scan';
import { type E2EWorld } from './e2e-world';
import { authenticationFailureCases, CREDENTIAL_HEADERS, RETRY_TIMEOUT_MS, startSdkWorld } from './sdk-world';
import { expectMeteredAsUpstreamReported } from './side-stream-expectations';
import {
  chargeOf,
  deliveredOutcome,
  giveSmallTokenBudget,
  giveTokenBudget,
  meteredLedger,
  METERED_USAGE,
  SLOW_TOKEN_BUDGET,
  SMALL_TOKEN_BUDGET_MESSAGE,
  startMeteredWorld,
  sumOf,
  tokensLeftAfter,
  totalsOf,
  waitForRefill,
  BALANCE_FOR_TWO_ANSWERS,
} from './ledger-expectations';

let world: E2EWorld;

beforeAll(async () => {
  world = await startSdkWorld();
}, 60_000);

afterAll(async () => {
  await world?.close();
});

/** One HTTP exchange as the SDK saw it (our fetch wraps the real one). */
interface Exchange {
  requestHeaders: Headers;
  status: number;
  responseHeaders: Headers;
  receivedAt: number;
}

/** One major of the SDK: its client class and the error classes a caller catches. */
interface Major {
  sdk: string;
  /** Accounts of this major's tests (oa7-…, oa6-…), so neither meets the other's limits or billing. */
  accountPrefix: string;
  Client: typeof OpenAI;
  APIError: typeof APIError;
  AuthenticationError: typeof AuthenticationError;
  RateLimitError: typeof RateLimitError;
}

const MAJORS: Major[] = [
  { sdk: 'openai 7.59.0', accountPrefix: 'oa7', Client: OpenAI, APIError, AuthenticationError, RateLimitError },
  {
    sdk: 'openai 6.49.0',
    accountPrefix: 'oa6',
    Client: OpenAIV6 as unknown as typeof OpenAI,
    APIError: APIErrorV6 as unknown as typeof APIError,
    AuthenticationError: AuthenticationErrorV6 as unknown as typeof AuthenticationError,
    RateLimitError: RateLimitErrorV6 as unknown as typeof RateLimitError,
  },
];

function clientOf(Client: typeof OpenAI, apiKey: string, options: { maxRetries: number; exchanges?: Exchange[] }): OpenAI {
  const exchanges = options.exchanges;
  return new Client({
    apiKey,
    baseURL: `${world.url}/v1`,
    maxRetries: options.maxRetries,
    organization: null,
    project: null,
    ...(exchanges
      ? {
          fetch: async (input: string | URL | Request, init?: RequestInit) => {
            const response = await fetch(input, init);
            exchanges.push({
              requestHeaders: new Headers(init?.headers),
              status: response.status,
              responseHeaders: response.headers,
              receivedAt: Date.now(),
            });
            return response;
          },
        }
      : {}),
  });
}

/** How many Checks the gateway decided for this key: the SDK's attempts, denials included. */
function attemptsOf(key: string): number {
  const prefix = displayPrefixOf(key);
  return world.gateway.logs.events('decision').filter((line) => line.keyPrefix === prefix).length;
}

async function caught(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  throw new Error('expected the SDK call to fail');
}

const chat = (openai: OpenAI) => openai.chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] });

describe.each(MAJORS)('$sdk', ({ accountPrefix, Client, APIError, AuthenticationError, RateLimitError }) => {
  const client = (apiKey: string, options: { maxRetries: number; exchanges?: Exchange[] }) => clientOf(Client, apiKey, options);

  describe('allowed calls', () => {
    const calls: { name: string; family: string; streamed: boolean; call: (openai: OpenAI) => Promise<void> }[] = [
      {
        name: 'chat.completions.create',
        family: 'chat-completions',
        streamed: false,
        call: async (openai) => {
          const completion = await chat(openai);
          expect(completion.choices[0]?.message.content).toEqual(expect.any(String));
        },
      },
      {
        name: 'chat.completions.create (stream: true)',
        family: 'chat-completions',
        streamed: true,
        call: async (openai) => {
          const stream = await openai.chat.completions.create({
            model: 'gpt-4o-mini',
            messages: [{ role: 'user', content: 'hi' }],
            stream: true,
          });
          let text = '';
          for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? '';
          expect(text.length).toBeGreaterThan(0);
        },
      },
      {
        name: 'chat.completions.create (stream: true, stream_options.include_usage)',
        family: 'chat-completions',
        streamed: true,
        call: async (openai) => {
          const stream = await openai.chat.completions.create({
            model: 'gpt-4o-mini',
            messages: [{ role: 'user', content: 'hi' }],
            stream: true,
            stream_options: { include_usage: true },
          });
          let usage: unknown;
          for await (const chunk of stream) usage = chunk.usage ?? usage;
          expect(usage).toMatchObject({ completion_tokens: 9 });
        },
      },
      {
        name: 'responses.create',
        family: 'chat-completions',
        streamed: false,
        call: async (openai) => {
          const response = await openai.responses.create({ model: 'gpt-4o-mini', input: 'hi' });
          expect(response.output_text).toBe('hi');
        },
      },
      {
        name: 'responses.create (stream: true)',
        family: 'chat-completions',
        streamed: true,
        call: async (openai) => {
          const stream = await openai.responses.create({ model: 'gpt-4o-mini', input: 'hi', stream: true });
          const types: string[] = [];
          for await (const event of stream) types.push(event.type);
          expect(types[types.length - 1]).toBe('response.completed');
        },
      },
      {
        name: 'models.list',
        family: 'models',
        streamed: false,
        call: async (openai) => {
          const page = await openai.models.list();
          expect(Array.isArray(page.data)).toBe(true);
        },
      },
    ];

    test.each(calls)('$name succeeds; the upstream gets the identity headers and no credential', async ({ family, streamed, call }) => {
      const { key, keyId, accountId } = await world.newKey(`${accountPrefix}-allowed`);
      const exchanges: Exchange[] = [];
      const before = world.upstream.requests.length;

      await call(client(key, { maxRetries: 0, exchanges }));

      expect(exchanges.map((e) => e.requestHeaders.get('authorization'))).toEqual([`Bearer ${key}`]);
      const forwarded = world.upstream.requests.slice(before);
      expect(forwarded).toHaveLength(1);
      const [upstream] = forwarded;
      for (const header of CREDENTIAL_HEADERS) expect(upstream!.headers[header]).toBeUndefined();
      expect(JSON.stringify(upstream)).not.toContain(key);
      expect(upstream!.headers).toMatchObject({
        'x-gateway-account-id': accountId,
        'x-gateway-key-id': keyId,
        'x-gateway-key-prefix': displayPrefixOf(key),
        'x-gateway-route-family': family,
      });
      if (streamed) expect(JSON.parse(upstream!.body)).toMatchObject({ stream: true });
      await expectMeteredAsUpstreamReported(world, upstream!);
    });
  });

  describe('authentication failures raise AuthenticationError', () => {
    const cases = authenticationFailureCases(
      async () => {
        const { key, keyId } = await world.newKey(`${accountPrefix}-revoked`);
        await world.revoke(keyId);
        return key;
      },
      { name: 'OpenAI provider key', text: 'looks like an OpenAI API key', key: `sk-proj-${'a'.repeat(40)}T3BlbkFJ${'b'.repeat(40)}` },
    );

    test.each(cases)('$name → 401 $code', async ({ code, text, key: makeKey }) => {
      const key = await makeKey();
      registerSecrets(key);
      const before = world.upstream.requests.length;

      const error = await caught(chat(client(key, { maxRetries: 2 })));

      expect(error).toBeInstanceOf(AuthenticationError);
      const authError = error as AuthenticationError;
      expect(authError.status).toBe(401);
      expect(authError.code).toBe(code);
      expect(authError.type).toBe('authentication_error');
      expect(authError.message).toContain(text);
      expect(authError.message).not.toContain(key);
      expect(authError.headers.get('x-should-retry')).toBe('false');
      expect(world.upstream.requests.length).toBe(before);
    });
  });

  describe("restricted keys: 401 AuthenticationError as OpenAI's own restricted keys, naming the missing permission", () => {
    const cases = [
      { name: 'endpoint', code: 'endpoint_not_permitted', restrictions: { endpoints: ['/v1/embeddings'] } },
      { name: 'source address', code: 'address_not_permitted', restrictions: { sourceAddresses: ['192.0.2.0/24'] } },
      // The front sends no body to Check (as envoy.yaml): a model restriction cannot be checked, so it fails closed.
      { name: 'model, unreadable without the body', code: 'model_not_readable', restrictions: { models: ['gpt-4o-mini'] } },
    ];

    test.each(cases)('$name → 401 $code after exactly one attempt', async ({ code, restrictions }) => {
      const { key, keyId } = await world.newKey(`${accountPrefix}-restricted`);
      expect((await world.gateway.admin('PATCH', `/admin/keys/${keyId}`, { restrictions })).status).toBe(200);
      const before = world.upstream.requests.length;

      const error = await caught(chat(client(key, { maxRetries: 2 })));

      expect(error).toBeInstanceOf(AuthenticationError);
      const authError = error as AuthenticationError;
      expect(authError.status).toBe(401);
      expect(authError.code).toBe(code);
      expect(authError.type).toBe('invalid_request_error');
      expect(authError.message).toContain('insufficient permissions');
      expect(attemptsOf(key)).toBe(1);
      expect(world.upstream.requests.length).toBe(before);
    });
  });

  describe('billing denials are 402 and never retried', () => {
    const cases = [
      { name: 'suspended account', code: 'account_suspended', billing: { status: 'suspended' } },
      { name: 'prepaid account out of credit', code: 'credit_exhausted', billing: { creditBalance: 0 } },
    ];

    test.each(cases)('$name → APIError 402 $code after exactly one attempt with maxRetries 2', async ({ code, billing }) => {
      const { key, accountId } = await world.newKey(`${accountPrefix}-${code}`);
      expect((await world.gateway.admin('PATCH', `/admin/accounts/${accountId}`, { billing })).status).toBe(200);

      const error = await caught(chat(client(key, { maxRetries: 2 })));

      // The SDK has no class for 402: it is the generic APIError.
      expect(error).toBeInstanceOf(APIError);
      expect((error as APIError).constructor).toBe(APIError);
      const apiError = error as APIError;
      expect(apiError.status).toBe(402);
      expect(apiError.code).toBe(code);
      expect(apiError.type).toBe('billing_error');
      expect(apiError.headers?.get('x-should-retry')).toBe('false');
      expect(apiError.headers?.get('retry-after')).toBeNull();
      expect(attemptsOf(key)).toBe(1);
    });
  });

  describe('rate limits', () => {
    async function rateLimitedKey(name: string): Promise<string> {
      const { key, keyId } = await world.newKey(`${accountPrefix}-limited`, { name });
      expect((await world.gateway.admin('PATCH', `/admin/keys/${keyId}`, { limits: [{ limit: 1, window: '2s' }] })).status).toBe(200);
      await chat(client(key, { maxRetries: 0 })); // uses the one request of the window
      return key;
    }

    test('with retries off, a 429 raises RateLimitError carrying retry-after(-ms)', async () => {
      const key = await rateLimitedKey('retries off');

      const error = await caught(chat(client(key, { maxRetries: 0 })));

      expect(error).toBeInstanceOf(RateLimitError);
      const limitError = error as RateLimitError;
      expect(limitError.status).toBe(429);
      expect(limitError.code).toBe('rate_limit_exceeded');
      expect(limitError.headers.get('x-gateway-error-code')).toBe('rate_limited');
      expect(Number(limitError.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
      expect(Number(limitError.headers.get('retry-after-ms'))).toBeGreaterThan(0);
      expect(limitError.headers.get('x-should-retry')).toBeNull();
      expect(attemptsOf(key)).toBe(2); // the setup call and this one
    });

    test("a long window's 429 asks for at most 60 s (retry-after-ms 60000): openai 7 waits as told only up to that, else its own short backoff", async () => {
      const { key, keyId } = await world.newKey(`${accountPrefix}-limited`, { name: 'long window' });
      expect((await world.gateway.admin('PATCH', `/admin/keys/${keyId}`, { limits: [{ limit: 1, window: '10m' }] })).status).toBe(200);
      await chat(client(key, { maxRetries: 0 }));

      const error = await caught(chat(client(key, { maxRetries: 0 })));

      expect(error).toBeInstanceOf(RateLimitError);
      const headers = (error as RateLimitError).headers;
      expect(headers.get('x-gateway-ratelimit-window')).toBe('10m');
      expect(headers.get('retry-after-ms')).toBe('60000');
      expect(headers.get('retry-after')).toBe('60');
    });

    test(
      'with maxRetries 2, the SDK waits retry-after-ms and then succeeds',
      async () => {
        const key = await rateLimitedKey('retries on');
        const exchanges: Exchange[] = [];
        const started = Date.now();

        const completion = await chat(client(key, { maxRetries: 2, exchanges }));
        const elapsed = Date.now() - started;

        expect(completion.choices[0]?.message.content).toEqual(expect.any(String));
        expect(exchanges.map((e) => e.status)).toEqual([429, 200]);
        expect(exchanges.map((e) => e.requestHeaders.get('x-stainless-retry-count'))).toEqual(['0', '1']);
        expect(attemptsOf(key)).toBe(1 + 2);
        const waitMs = Number(exchanges[0]!.responseHeaders.get('retry-after-ms'));
        expect(waitMs).toBeGreaterThan(0);
        expect(elapsed).toBeGreaterThanOrEqual(waitMs - 50);
      },
      RETRY_TIMEOUT_MS,
    );
  });
});

describe('openai SDK: usage is billed through ext_proc, with gateway-authz as the processor (as envoy.yaml configures it)', () => {
  let metered: E2EWorld;
  beforeAll(async () => {
    metered = await startMeteredWorld();
  }, 60_000);
  afterAll(async () => {
    await metered?.close();
  });

  // The current major only: metering reads the answers, which do not depend on the SDK's major.
  const meteredClient = (apiKey: string) =>
    new OpenAI({ apiKey, baseURL: `${metered.url}/v1`, maxRetries: 0, organization: null, project: null });
  const upstreamOf = (accountId: string) => metered.upstream.requests.filter((r) => r.headers['x-gateway-account-id'] === accountId);

  test('a whole and a streamed answer move the balance, the month spend and the usage API by exactly the usage reported', async () => {
    const { key, accountId } = await metered.newKey('oa-billed', { accountPatch: { billing: { creditBalance: BALANCE_FOR_TWO_ANSWERS } } });
    const openai = meteredClient(key);

    await chat(openai);
    const stream = await openai.chat.completions.create({
      model: 'gpt-4o-mini',
      messages: [{ role: 'user', content: 'hi' }],
      stream: true,
      stream_options: { include_usage: true },
    });
    for await (const chunk of stream) void chunk;

    expect(upstreamOf(accountId).map((r) => r.reportedUsage)).toEqual([METERED_USAGE, METERED_USAGE]);
    const ledger = await meteredLedger(metered, accountId, 2);
    const charged = 2 * chargeOf(METERED_USAGE);
    expect(ledger).toEqual({
      creditBalance: BALANCE_FOR_TWO_ANSWERS - charged,
      spentThisMonth: charged,
      usage: totalsOf(sumOf(METERED_USAGE, METERED_USAGE), 2),
    });
  });

  test("a prepaid account whose credit cannot cover the request's hold (4,096 output tokens by default) is 402 credit_exhausted at once, before any upstream call", async () => {
    const { key, accountId } = await metered.newKey('oa-runs-out', { accountPatch: { billing: { creditBalance: 30 } } });
    const openai = meteredClient(key);

    const error = await caught(chat(openai));
    expect(error).toBeInstanceOf(APIError);
    expect((error as APIError).status).toBe(402);
    expect((error as APIError).code).toBe('credit_exhausted');
    expect(upstreamOf(accountId)).toHaveLength(0);
  });

  test('a token budget below one answer: the metered answer exhausts it, the next request is RateLimitError 429 token_budget_exhausted, and it recovers once refilled', async () => {
    const { key, keyId, accountId } = await metered.newKey('oa-budget');
    await giveSmallTokenBudget(metered, keyId);
    const openai = meteredClient(key);

    await chat(openai);
    expect((await meteredLedger(metered, accountId, 1)).usage).toEqual(totalsOf(METERED_USAGE));

    const error = await caught(chat(openai));
    expect(error).toBeInstanceOf(RateLimitError);
    const limitError = error as RateLimitError;
    expect(limitError.status).toBe(429);
    expect(limitError.code).toBe('rate_limit_exceeded');
    expect(limitError.type).toBe('tokens');
    expect(limitError.message).toContain(SMALL_TOKEN_BUDGET_MESSAGE);
    expect(limitError.headers.get('x-gateway-error-code')).toBe('token_budget_exhausted');
    expect(limitError.headers.get('x-ratelimit-limit-tokens')).toBe('20');
    expect(limitError.headers.get('x-ratelimit-remaining-tokens')).toBe('0');
    const retryAfterMs = Number(limitError.headers.get('retry-after-ms'));
    expect(retryAfterMs).toBeGreaterThan(0);
    expect(retryAfterMs).toBeLessThanOrEqual(2_200);
    expect(upstreamOf(accountId)).toHaveLength(1);

    await waitForRefill(retryAfterMs);
    const completion = await chat(openai);
    expect(completion.choices[0]?.message.content).toEqual(expect.any(String));
    expect(upstreamOf(accountId)).toHaveLength(2);
  });

  test("the key's token budget moves by exactly the tokens reported: x-ratelimit-*-tokens on the next allowed answers (whole and streamed)", async () => {
    const { key, keyId, accountId } = await metered.newKey('oa-budget-exact');
    await giveTokenBudget(metered, keyId, SLOW_TOKEN_BUDGET);
    const openai = meteredClient(key);
    const budget = SLOW_TOKEN_BUDGET.tokens;
    const perAnswer = totalTokens(METERED_USAGE);
    const tokenHeaders = (response: Response) => ({
      limit: response.headers.get('x-ratelimit-limit-tokens'),
      remaining: response.headers.get('x-ratelimit-remaining-tokens'),
    });

    const whole = await chat(openai).withResponse();
    await meteredLedger(metered, accountId, 1);
    const streamed = await openai.chat.completions
      .create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }], stream: true, stream_options: { include_usage: true } })
      .withResponse();
    for await (const chunk of streamed.data) void chunk;
    await meteredLedger(metered, accountId, 2);
    const last = await chat(openai).asResponse();
    await last.text();

    expect(upstreamOf(accountId).map((r) => r.reportedUsage)).toEqual([METERED_USAGE, METERED_USAGE, METERED_USAGE]);
    const seen = [whole.response, streamed.response, last].map(tokenHeaders);
    expect(seen).toEqual(
      [0, 1, 2].map((answers) => ({ limit: String(budget), remaining: String(tokensLeftAfter(budget, answers * perAnswer)) })),
    );
    // Between the two readings after usage, exactly one answer's tokens, every kind counted.
    expect(Number(seen[1]!.remaining) - Number(seen[2]!.remaining)).toBe(perAnswer);
    expect((await meteredLedger(metered, accountId, 3)).usage).toEqual(totalsOf(sumOf(METERED_USAGE, METERED_USAGE, METERED_USAGE), 3));
  });

  test('a stream the client leaves mid-way is charged what it delivered (no usage yet: the estimate of what passed)', async () => {
    const { key, accountId } = await metered.newKey('oa-leaves', { accountPatch: { billing: { creditBalance: 10_000 } } });
    const stream = await meteredClient(key).chat.completions.create({
      model: 'gpt-slow',
      messages: [{ role: 'user', content: 'tell me a long story' }],
      stream: true,
      stream_options: { include_usage: true },
    });
    let pieces = 0;
    for await (const chunk of stream) if (chunk.choices[0]?.delta?.content && ++pieces === 5) break;

    // Envoy closes the side stream deferred_close_timeout (5 s) after the client left: then the answer is metered.
    const ledger = await meteredLedger(metered, accountId, 1, 15_000);
    const [upstream] = upstreamOf(accountId);
    expect(upstream!.completed).toBe(false);
    const delivered = deliveredOutcome(upstream!, 'chat-completions');
    if (delivered.kind !== 'metered') throw new Error(`expected a metered outcome, got ${delivered.reason}`);
    expect(delivered.usage.estimated).toBe(true);
    expect(delivered.usage.tokens.outputTokens).toBeGreaterThan(0);
    expect(ledger).toEqual({
      creditBalance: 10_000 - chargeOf(delivered.usage.tokens),
      spentThisMonth: chargeOf(delivered.usage.tokens),
      usage: totalsOf(delivered.usage.tokens, 1, 1),
    });
  }, 30_000);
});
