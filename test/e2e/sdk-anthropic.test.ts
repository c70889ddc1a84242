/**
 * The official Anthropic SDK against the gateway, in both of its auth styles:
 * 1.x sends `Authorization: Bearer` + `anthropic-version: 2026-10-21`,
 * 0.137.0 (the last 0.x, installed as `anthropic-sdk-legacy`) sends
 * `x-api-key` + `anthropic-version: 2023-06-01`. Every case runs for both.
 */
import Anthropic, { APIError, AuthenticationError, PaymentRequiredError, PermissionDeniedError, RateLimitError } from '@anthropic-ai/sdk';
import AnthropicLegacy, {
  APIError as LegacyAPIError,
  AuthenticationError as LegacyAuthenticationError,
  PermissionDeniedError as LegacyPermissionDeniedError,
  RateLimitError as LegacyRateLimitError,
} from 'anthropic-sdk-legacy';
import { totalTokens } from '../../src/metering/usage';
import { displayPrefixOf } from '../../src/keys/customer-key';
import { registerSecrets } from '../support/secret-scan';
import type { DenyBodyView } from '../support/deny-body';
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
  // The gateway's own default accepted versions, as an operator who configures nothing gets them:
  // both SDK lines must work out of the box (JSON drops the undefined, so no messagesVersions is set).
  world = await startSdkWorld({ messagesVersions: undefined });
}, 60_000);

afterAll(async () => {
  await world?.close();
});

/** One HTTP exchange as the SDK saw it (our fetch wraps the real one). */
interface Exchange {
  requestHeaders: Headers;
  status: number;
  responseHeaders: Headers;
}

interface ClientOptions {
  maxRetries: number;
  exchanges?: Exchange[];
}

/** The few calls the tests make, the same for both SDK versions. */
interface MessagesApi {
  create(): Promise<string>;
  stream(): Promise<string>;
  listModels(): Promise<unknown[]>;
}

/** The fields both versions' APIError has (`error` is the whole response body). */
interface SdkError extends Error {
  status: number;
  headers: Headers;
  error: unknown;
  requestID: string | null | undefined;
}

type ErrorClass = abstract new (...args: never[]) => Error;

interface Flavour {
  sdk: string;
  credentialHeader: 'authorization' | 'x-api-key';
  credentialValue: (key: string) => string;
  version: string;
  client(apiKey: string, options: ClientOptions): MessagesApi;
  AuthenticationError: ErrorClass;
  RateLimitError: ErrorClass;
  APIError: ErrorClass;
  /** The exact class a 402 raises. */
  PaymentClass: ErrorClass;
  /** What a 403 raises (a key lacking a permission). */
  PermissionDeniedError: ErrorClass;
}

// A model name in neither SDK's deprecation list (both console.warn on deprecated names, e.g. claude-sonnet-4-5).
const PARAMS = { model: 'claude-e2e-test', max_tokens: 16, messages: [{ role: 'user' as const, content: 'hi' }] };

function textOf(content: readonly { type: string; text?: unknown }[]): string {
  return content.map((block) => (block.type === 'text' ? String(block.text) : '')).join('');
}

function spyingFetch(exchanges: Exchange[] | undefined) {
  if (!exchanges) return {};
  return {
    fetch: async (input: string | URL | Request, init?: RequestInit) => {
      const response = await fetch(input, init);
      exchanges.push({ requestHeaders: new Headers(init?.headers), status: response.status, responseHeaders: response.headers });
      return response;
    },
  };
}

const FLAVOURS: Flavour[] = [
  {
    sdk: '@anthropic-ai/sdk 1.12.0',
    credentialHeader: 'authorization',
    credentialValue: (key) => `Bearer ${key}`,
    version: '2026-10-21',
    client(apiKey, { maxRetries, exchanges }) {
      const client = new Anthropic({ apiKey, authToken: null, baseURL: world.url, maxRetries, ...spyingFetch(exchanges) });
      return {
        create: async () => textOf((await client.messages.create(PARAMS)).content),
        stream: async () => textOf((await client.messages.stream(PARAMS).finalMessage()).content),
        listModels: async () => (await client.models.list()).data,
      };
    },
    AuthenticationError,
    RateLimitError,
    APIError,
    PaymentClass: PaymentRequiredError,
    PermissionDeniedError,
  },
  {
    sdk: '@anthropic-ai/sdk 0.137.0',
    credentialHeader: 'x-api-key',
    credentialValue: (key) => key,
    version: '2023-06-01',
    client(apiKey, { maxRetries, exchanges }) {
      const client = new AnthropicLegacy({ apiKey, authToken: null, baseURL: world.url, maxRetries, ...spyingFetch(exchanges) });
      return {
        create: async () => textOf((await client.messages.create(PARAMS)).content),
        stream: async () => textOf((await client.messages.stream(PARAMS).finalMessage()).content),
        listModels: async () => (await client.models.list()).data,
      };
    },
    AuthenticationError: LegacyAuthenticationError,
    RateLimitError: LegacyRateLimitError,
    APIError: LegacyAPIError,
    // 0.x has no PaymentRequiredError: a 402 is the generic APIError.
    PaymentClass: LegacyAPIError,
    PermissionDeniedError: LegacyPermissionDeniedError,
  },
];

/** How many Checks the gateway decided for this key: the SDK's attempts, denials included. */
function attemptsOf(key: string): number {
  const prefix = displayPrefixOf(key);
  return world.gateway.logs.events('decision').filter((line) => line.keyPrefix === prefix).length;
}

async function caught(promise: Promise<unknown>): Promise<SdkError> {
  try {
    await promise;
  } catch (error) {
    return error as SdkError;
  }
  throw new Error('expected the SDK call to fail');
}

/** The gateway's reason code, where the messages style puts it. */
const errorCodeOf = (error: SdkError): unknown => (error.error as Partial<DenyBodyView> | undefined)?.error?.details?.error_code;

/** Account ids must be unique per SDK version: billing changes apply to a whole account. */
const accountFor = (flavour: Flavour, what: string) => `an-${flavour.version}-${what}`;

describe.each(FLAVOURS)('$sdk', (flavour) => {
  describe('allowed calls', () => {
    const calls: { name: string; family: string; streamed: boolean; call: (api: MessagesApi) => Promise<void> }[] = [
      {
        name: 'messages.create',
        family: 'messages',
        streamed: false,
        call: async (api) => expect((await api.create()).length).toBeGreaterThan(0),
      },
      {
        name: 'messages.stream',
        family: 'messages',
        streamed: true,
        call: async (api) => expect((await api.stream()).length).toBeGreaterThan(0),
      },
      {
        name: 'models.list',
        family: 'models',
        streamed: false,
        call: async (api) => expect(Array.isArray(await api.listModels())).toBe(true),
      },
    ];

    test.each(calls)('$name succeeds; the upstream gets the identity headers and no credential', async ({ family, streamed, call }) => {
      const { key, keyId, accountId } = await world.newKey(accountFor(flavour, 'allowed'));
      const exchanges: Exchange[] = [];
      const before = world.upstream.requests.length;

      await call(flavour.client(key, { maxRetries: 0, exchanges }));

      // What this SDK version sends.
      expect(exchanges).toHaveLength(1);
      const sent = exchanges[0]!.requestHeaders;
      expect(sent.get(flavour.credentialHeader)).toBe(flavour.credentialValue(key));
      expect(sent.get(flavour.credentialHeader === 'authorization' ? 'x-api-key' : 'authorization')).toBeNull();
      expect(sent.get('anthropic-version')).toBe(flavour.version);

      const forwarded = world.upstream.requests.slice(before);
      expect(forwarded).toHaveLength(1);
      const upstream = forwarded[0]!;
      for (const header of CREDENTIAL_HEADERS) expect(upstream.headers[header]).toBeUndefined();
      expect(JSON.stringify(upstream)).not.toContain(key);
      expect(upstream.headers).toMatchObject({
        'x-gateway-account-id': accountId,
        'x-gateway-key-id': keyId,
        'x-gateway-key-prefix': displayPrefixOf(key),
        'x-gateway-route-family': family,
      });
      if (streamed) expect(JSON.parse(upstream.body)).toMatchObject({ stream: true });
      await expectMeteredAsUpstreamReported(world, upstream);
    });
  });

  describe('authentication failures raise AuthenticationError', () => {
    const cases = authenticationFailureCases(
      async () => {
        const { key, keyId } = await world.newKey(accountFor(flavour, 'revoked'));
        await world.revoke(keyId);
        return key;
      },
      { name: 'Anthropic provider key', text: 'looks like an Anthropic API key', key: `sk-ant-api03-${'x'.repeat(93)}AA` },
    );

    test.each(cases)('$name → 401 $code', async ({ code, text, key: makeKey }) => {
      const key = await makeKey();
      registerSecrets(key);
      const before = world.upstream.requests.length;

      const error = await caught(flavour.client(key, { maxRetries: 2 }).create());

      expect(error).toBeInstanceOf(flavour.AuthenticationError);
      expect(error.status).toBe(401);
      expect(error.error).toMatchObject({ type: 'error', error: { type: 'authentication_error' } });
      expect(errorCodeOf(error)).toBe(code);
      expect(error.message).toContain(text);
      expect(error.message).not.toContain(key);
      expect(error.requestID).toEqual(expect.any(String));
      expect(error.headers.get('x-should-retry')).toBe('false');
      expect(world.upstream.requests.length).toBe(before);
    });
  });

  describe('restricted keys: 403 PermissionDeniedError (permission_error), naming the missing permission', () => {
    const cases = [
      { name: 'endpoint', code: 'endpoint_not_permitted', restrictions: { endpoints: ['chat-completions'] } },
      { name: 'source address', code: 'address_not_permitted', restrictions: { sourceAddresses: ['2001:db8::/32'] } },
      // The front sends no body to Check (as envoy.yaml): a model restriction cannot be checked, so it fails closed.
      { name: 'model, unreadable without the body', code: 'model_not_readable', restrictions: { models: ['claude-e2e-test'] } },
    ];

    test.each(cases)('$name → 403 $code after exactly one attempt', async ({ code, restrictions }) => {
      const { key, keyId } = await world.newKey(accountFor(flavour, 'restricted'));
      expect((await world.gateway.admin('PATCH', `/admin/keys/${keyId}`, { restrictions })).status).toBe(200);
      const before = world.upstream.requests.length;

      const error = await caught(flavour.client(key, { maxRetries: 2 }).create());

      expect(error).toBeInstanceOf(flavour.PermissionDeniedError);
      expect(error.status).toBe(403);
      expect(error.error).toMatchObject({ error: { type: 'permission_error' } });
      expect(errorCodeOf(error)).toBe(code);
      expect(attemptsOf(key)).toBe(1);
      expect(world.upstream.requests.length).toBe(before);
    });
  });

  describe('billing denials are 402 and never retried', () => {
    const cases = [
      { name: 'suspended account', code: 'account_suspended', billing: { status: 'suspended' } },
      { name: 'prepaid account out of credit', code: 'credit_exhausted', billing: { creditBalance: 0 } },
    ];

    test.each(cases)('$name → 402 $code after exactly one attempt with maxRetries 2', async ({ code, billing }) => {
      const { key, accountId } = await world.newKey(accountFor(flavour, code));
      expect((await world.gateway.admin('PATCH', `/admin/accounts/${accountId}`, { billing })).status).toBe(200);

      const error = await caught(flavour.client(key, { maxRetries: 2 }).create());

      expect(error).toBeInstanceOf(flavour.APIError);
      expect(error.constructor).toBe(flavour.PaymentClass);
      expect(error.status).toBe(402);
      expect(error.error).toMatchObject({ error: { type: 'billing_error' } });
      expect(errorCodeOf(error)).toBe(code);
      expect(error.headers.get('x-should-retry')).toBe('false');
      expect(error.headers.get('retry-after')).toBeNull();
      expect(attemptsOf(key)).toBe(1);
    });
  });

  describe('rate limits', () => {
    async function rateLimitedKey(name: string): Promise<string> {
      const { key, keyId } = await world.newKey(accountFor(flavour, 'limited'), { name });
      expect((await world.gateway.admin('PATCH', `/admin/keys/${keyId}`, { limits: [{ limit: 1, window: '2s' }] })).status).toBe(200);
      await flavour.client(key, { maxRetries: 0 }).create(); // uses the one request of the window
      return key;
    }

    test('with retries off, a 429 raises RateLimitError carrying retry-after(-ms)', async () => {
      const key = await rateLimitedKey('retries off');

      const error = await caught(flavour.client(key, { maxRetries: 0 }).create());

      expect(error).toBeInstanceOf(flavour.RateLimitError);
      expect(error.status).toBe(429);
      expect(error.error).toMatchObject({ error: { type: 'rate_limit_error' } });
      expect(errorCodeOf(error)).toBe('rate_limited');
      expect(Number(error.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
      expect(Number(error.headers.get('retry-after-ms'))).toBeGreaterThan(0);
      expect(error.headers.get('x-should-retry')).toBeNull();
      expect(attemptsOf(key)).toBe(2); // the setup call and this one
    });

    test(
      'with maxRetries 2, the SDK waits retry-after-ms and then succeeds',
      async () => {
        const key = await rateLimitedKey('retries on');
        const exchanges: Exchange[] = [];
        const started = Date.now();

        const text = await flavour.client(key, { maxRetries: 2, exchanges }).create();
        const elapsed = Date.now() - started;

        expect(text.length).toBeGreaterThan(0);
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

describe('messages requests without a version header (raw HTTP: the SDKs always send one)', () => {
  const cases = [
    { name: 'x-api-key', headers: (key: string): Record<string, string> => ({ 'x-api-key': key }) },
    { name: 'Authorization: Bearer', headers: (key: string): Record<string, string> => ({ authorization: `Bearer ${key}` }) },
  ];

  test.each(cases)('with $name → 400 invalid_request_error missing_version_header', async ({ headers }) => {
    const { key } = await world.newKey('an-raw');
    const before = world.upstream.requests.length;

    const response = await fetch(`${world.url}/v1/messages`, {
      method: 'POST',
      headers: { ...headers(key), 'content-type': 'application/json' },
      body: JSON.stringify(PARAMS),
    });

    expect(response.status).toBe(400);
    expect(response.headers.get('content-type')).toContain('application/json');
    expect(await response.json()).toMatchObject({
      type: 'error',
      error: { type: 'invalid_request_error', details: { error_code: 'missing_version_header' } },
    });
    expect(world.upstream.requests.length).toBe(before);
  });
});

describe('usage is billed through ext_proc, with gateway-authz as the processor (as envoy.yaml configures it)', () => {
  let metered: E2EWorld;
  beforeAll(async () => {
    metered = await startMeteredWorld();
  }, 60_000);
  afterAll(async () => {
    await metered?.close();
  });

  /** The calls these tests make, through each SDK line, pointed at the metered world. */
  interface MeteredApi {
    create(): Promise<unknown>;
    stream(): Promise<unknown>;
    /** The raw answers, through the SDK's withResponse(): for their headers. */
    createWithResponse(): Promise<Response>;
    streamWithResponse(): Promise<Response>;
    /** A slow streamed answer, left (the SDK aborts its request) after this many text deltas. */
    leaveAfter(deltas: number): Promise<void>;
  }
  async function leave(events: AsyncIterable<{ type: string }>, deltas: number): Promise<void> {
    let seen = 0;
    for await (const event of events) if (event.type === 'content_block_delta' && ++seen === deltas) break;
  }
  function meteredClient(flavour: Flavour, apiKey: string): MeteredApi {
    const options = { apiKey, authToken: null, baseURL: metered.url, maxRetries: 0 };
    const slow = { ...PARAMS, model: 'claude-slow', stream: true as const };
    if (flavour.version === '2026-10-21') {
      const client = new Anthropic(options);
      return {
        create: () => client.messages.create(PARAMS),
        stream: () => client.messages.stream(PARAMS).finalMessage(),
        createWithResponse: async () => (await client.messages.create(PARAMS).withResponse()).response,
        streamWithResponse: async () => {
          const stream = client.messages.stream(PARAMS);
          const { response } = await stream.withResponse();
          await stream.finalMessage();
          return response;
        },
        leaveAfter: async (deltas) => leave(await client.messages.create(slow), deltas),
      };
    }
    const client = new AnthropicLegacy(options);
    return {
      create: () => client.messages.create(PARAMS),
      stream: () => client.messages.stream(PARAMS).finalMessage(),
      createWithResponse: async () => (await client.messages.create(PARAMS).withResponse()).response,
      streamWithResponse: async () => {
        const stream = client.messages.stream(PARAMS);
        const { response } = await stream.withResponse();
        await stream.finalMessage();
        return response;
      },
      leaveAfter: async (deltas) => leave(await client.messages.create(slow), deltas),
    };
  }
  const upstreamOf = (accountId: string) => metered.upstream.requests.filter((r) => r.headers['x-gateway-account-id'] === accountId);

  describe.each(FLAVOURS)('$sdk', (flavour) => {
    const account = (what: string) => `an-billed-${flavour.version}-${what}`;

    test('a whole and a streamed answer move the balance, the month spend and the usage API by exactly the usage reported', async () => {
      const { key, accountId } = await metered.newKey(account('both'), {
        accountPatch: { billing: { creditBalance: BALANCE_FOR_TWO_ANSWERS } },
      });
      const client = meteredClient(flavour, key);

      await client.create();
      await client.stream();

      expect(upstreamOf(accountId).map((r) => r.reportedUsage)).toEqual([METERED_USAGE, METERED_USAGE]);
      const charged = 2 * chargeOf(METERED_USAGE);
      expect(await meteredLedger(metered, accountId, 2)).toEqual({
        creditBalance: BALANCE_FOR_TWO_ANSWERS - charged,
        spentThisMonth: charged,
        usage: totalsOf(sumOf(METERED_USAGE, METERED_USAGE), 2),
      });
    });

    test("a prepaid account whose credit cannot cover the request's hold (4,096 output tokens by default) is 402 credit_exhausted at once, before any upstream call", async () => {
      const { key, accountId } = await metered.newKey(account('runs-out'), { accountPatch: { billing: { creditBalance: 30 } } });
      const client = meteredClient(flavour, key);

      const error = await caught(client.create());
      expect(error).toBeInstanceOf(flavour.PaymentClass);
      expect(error.status).toBe(402);
      expect(errorCodeOf(error)).toBe('credit_exhausted');
      expect(upstreamOf(accountId)).toHaveLength(0);
    });

    test('a token budget below one answer: the metered answer exhausts it, the next request is RateLimitError 429 token_budget_exhausted, and it recovers once refilled', async () => {
      const { key, keyId, accountId } = await metered.newKey(account('budget'));
      await giveSmallTokenBudget(metered, keyId);
      const client = meteredClient(flavour, key);

      await client.create();
      expect((await meteredLedger(metered, accountId, 1)).usage).toEqual(totalsOf(METERED_USAGE));

      const error = await caught(client.create());
      expect(error).toBeInstanceOf(flavour.RateLimitError);
      expect(error.status).toBe(429);
      expect(error.error).toMatchObject({
        type: 'error',
        error: { type: 'rate_limit_error', details: { error_code: 'token_budget_exhausted', scope: 'key', window: '2s', limit: 20 } },
      });
      expect(error.message).toContain(SMALL_TOKEN_BUDGET_MESSAGE);
      expect(error.headers.get('anthropic-ratelimit-tokens-limit')).toBe('20');
      expect(error.headers.get('anthropic-ratelimit-tokens-remaining')).toBe('0');
      const retryAfterMs = Number(error.headers.get('retry-after-ms'));
      expect(retryAfterMs).toBeGreaterThan(0);
      expect(retryAfterMs).toBeLessThanOrEqual(2_200);
      expect(upstreamOf(accountId)).toHaveLength(1);

      await waitForRefill(retryAfterMs);
      await client.create();
      expect(upstreamOf(accountId)).toHaveLength(2);
    });

    test("the key's token budget moves by exactly the tokens reported: anthropic-ratelimit-tokens-* on the next allowed answers (whole and streamed)", async () => {
      const { key, keyId, accountId } = await metered.newKey(account('budget-exact'));
      await giveTokenBudget(metered, keyId, SLOW_TOKEN_BUDGET);
      const client = meteredClient(flavour, key);
      const budget = SLOW_TOKEN_BUDGET.tokens;
      const perAnswer = totalTokens(METERED_USAGE);
      const tokenHeaders = (response: Response) => ({
        limit: response.headers.get('anthropic-ratelimit-tokens-limit'),
        remaining: response.headers.get('anthropic-ratelimit-tokens-remaining'),
      });

      const whole = await client.createWithResponse();
      await meteredLedger(metered, accountId, 1);
      const streamed = await client.streamWithResponse();
      await meteredLedger(metered, accountId, 2);
      const last = await client.createWithResponse();

      expect(upstreamOf(accountId).map((r) => r.reportedUsage)).toEqual([METERED_USAGE, METERED_USAGE, METERED_USAGE]);
      const seen = [whole, streamed, last].map(tokenHeaders);
      expect(seen).toEqual(
        [0, 1, 2].map((answers) => ({ limit: String(budget), remaining: String(tokensLeftAfter(budget, answers * perAnswer)) })),
      );
      // Between the two readings after usage, exactly one answer's tokens, every kind counted.
      expect(Number(seen[1]!.remaining) - Number(seen[2]!.remaining)).toBe(perAnswer);
      expect((await meteredLedger(metered, accountId, 3)).usage).toEqual(totalsOf(sumOf(METERED_USAGE, METERED_USAGE, METERED_USAGE), 3));
    });

    test('a stream the client leaves mid-way is charged what it delivered (message_start counts, output at least its text)', async () => {
      const { key, accountId } = await metered.newKey(account('leaves'), { accountPatch: { billing: { creditBalance: 10_000 } } });
      await meteredClient(flavour, key).leaveAfter(5);

      // Envoy closes the side stream deferred_close_timeout (5 s) after the client left: then the answer is metered.
      const ledger = await meteredLedger(metered, accountId, 1, 15_000);
      const [upstream] = upstreamOf(accountId);
      expect(upstream!.completed).toBe(false);
      const delivered = deliveredOutcome(upstream!, 'messages');
      if (delivered.kind !== 'metered') throw new Error(`expected a metered outcome, got ${delivered.reason}`);
      // message_start's early output count (1) is below the text of five deltas: the output is that text's estimate.
      expect(delivered.usage).toMatchObject({ estimated: true, final: false });
      expect(delivered.usage.tokens.outputTokens).toBeGreaterThan(1);
      expect(ledger).toEqual({
        creditBalance: 10_000 - chargeOf(delivered.usage.tokens),
        spentThisMonth: chargeOf(delivered.usage.tokens),
        usage: totalsOf(delivered.usage.tokens, 1, 1),
      });
    }, 30_000);
  });
});
