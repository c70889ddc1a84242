/**
 * Google's Gemini SDKs against the gateway: `@google/genai` 3.x (default API
 * version v1, the stable one), 2.x (installed as `google-genai-v2`; default
 * v1beta) and the deprecated `@google/generative-ai` 0.24.1. All send the key
 * in `x-goog-api-key`, each with its own default API version.
 *
 * Neither SDK retries by default, and neither reads `retry-after`, `retry-after-ms`
 * or the body's RetryInfo: genai retries only with `httpOptions.retryOptions`, on its
 * own exponential backoff; generative-ai never retries.
 */
import { ApiError, GoogleGenAI, type HttpRetryOptions } from '@google/genai';
import { ApiError as ApiErrorV2, GoogleGenAI as GoogleGenAIV2 } from 'google-genai-v2';
import { GoogleGenerativeAI, GoogleGenerativeAIFetchError } from '@google/generative-ai';
import { totalTokens } from '../../src/metering/usage';
import { displayPrefixOf } from '../../src/keys/customer-key';
import { registerSecrets } from '../support/secret-scan';
import { type E2EWorld } from './e2e-world';
import { authenticationFailureCases, CREDENTIAL_HEADERS, RETRY_TIMEOUT_MS, startSdkWorld } from './sdk-world';
import { expectMeteredAsUpstreamReported } from './side-stream-expectations';
import {
  budgetsAround,
  chargeOf,
  deliveredOutcome,
  giveSmallTokenBudget,
  giveTokenBudget,
  meteredLedger,
  METERED_USAGE,
  SMALL_TOKEN_BUDGET_MESSAGE,
  startMeteredWorld,
  sumOf,
  totalsOf,
  waitForRefill,
  BALANCE_FOR_TWO_ANSWERS,
} from './ledger-expectations';

const MODEL = 'gemini-2.5-flash';

let world: E2EWorld;

beforeAll(async () => {
  world = await startSdkWorld();
}, 60_000);

afterAll(async () => {
  await world?.close();
});

/** What the SDK sent, as seen by a wrapper around fetch. */
interface Exchange {
  requestHeaders: Headers;
  status: number;
}

function spying(realFetch: typeof fetch, exchanges: Exchange[]): typeof fetch {
  return async (input, init) => {
    const response = await realFetch(input, init);
    const url = input instanceof Request ? input.url : String(input);
    // Only the SDK's calls to the front, not whatever else this process fetches meanwhile.
    if (url.startsWith(world.url)) exchanges.push({ requestHeaders: new Headers(init?.headers), status: response.status });
    return response;
  };
}

// ---- @google/genai -------------------------------------------------------------

type GenAIClass = typeof GoogleGenAI;

/** A client of one genai major, on that major's default API version (none set here). */
function genai(
  apiKey: string,
  options: { retryOptions?: HttpRetryOptions; exchanges?: Exchange[]; Client?: GenAIClass } = {},
): GoogleGenAI {
  const Client = options.Client ?? GoogleGenAI;
  return new Client({
    apiKey,
    vertexai: false,
    httpOptions: {
      baseUrl: world.url,
      ...(options.retryOptions ? { retryOptions: options.retryOptions } : {}),
      ...(options.exchanges ? { fetch: spying(fetch, options.exchanges) } : {}),
    },
  });
}

const genaiGenerate = async (ai: GoogleGenAI) => (await ai.models.generateContent({ model: MODEL, contents: 'hi' })).text ?? '';

// ---- @google/generative-ai -----------------------------------------------------

function generativeAi(apiKey: string) {
  return new GoogleGenerativeAI(apiKey).getGenerativeModel({ model: MODEL }, { baseUrl: world.url, apiVersion: 'v1beta' });
}

/** generative-ai has no fetch option: it calls the global fetch, so wrap that for the duration of the call. */
async function withGlobalFetchSpy<T>(exchanges: Exchange[] | undefined, run: () => Promise<T>): Promise<T> {
  if (!exchanges) return run();
  const realFetch = globalThis.fetch;
  globalThis.fetch = spying(realFetch, exchanges);
  try {
    return await run();
  } finally {
    globalThis.fetch = realFetch;
  }
}

// ---- what both SDKs share ------------------------------------------------------

interface Call {
  name: string;
  family: string;
  path: RegExp;
  run: (apiKey: string, exchanges?: Exchange[]) => Promise<void>;
}

interface Failure {
  status: number | undefined;
  /** `ErrorInfo.reason`: the gateway's reason code. */
  reason: unknown;
  message: string;
}

interface Flavour {
  sdk: string;
  calls: Call[];
  /** One generateContent call, retries as this SDK does them by default (none for either). */
  generate(apiKey: string): Promise<string>;
  /** The SDK's error class for an HTTP error, and what a caller can read from it. */
  ErrorClass: abstract new (...args: never[]) => Error;
  failure(error: Error): Failure;
}

/** One genai major: its calls land on its default API version's paths. */
function genaiFlavour(sdk: string, Client: GenAIClass, ErrorClass: typeof ApiError, apiVersion: 'v1' | 'v1beta'): Flavour {
  const client = (key: string, exchanges?: Exchange[]) => genai(key, { exchanges: exchanges ?? [], Client });
  const model = (method: string) => new RegExp(`^/${apiVersion}/models/gemini-2\\.5-flash:${method}$`);
  return {
    sdk,
    calls: [
      {
        name: 'models.generateContent',
        family: 'generative-content',
        path: model('generateContent'),
        run: async (key, exchanges) => expect((await genaiGenerate(client(key, exchanges))).length).toBeGreaterThan(0),
      },
      {
        name: 'models.generateContentStream',
        family: 'generative-content',
        path: model('streamGenerateContent\\?alt=sse'),
        run: async (key, exchanges) => {
          let text = '';
          for await (const chunk of await client(key, exchanges).models.generateContentStream({ model: MODEL, contents: 'hi' })) {
            text += chunk.text ?? '';
          }
          expect(text.length).toBeGreaterThan(0);
        },
      },
      {
        name: 'models.list',
        family: 'models',
        path: new RegExp(`^/${apiVersion}/models(\\?.*)?$`),
        run: async (key, exchanges) => {
          const pager = await client(key, exchanges).models.list();
          expect(pager.page.map((m) => m.name)).toEqual(['models/gemini-x']);
        },
      },
    ],
    generate: (key) => genaiGenerate(genai(key, { Client })),
    ErrorClass,
    failure: (error) => {
      // genai puts the whole JSON body in the message.
      const body = JSON.parse(error.message) as { error?: { details?: { reason?: string }[] } };
      return { status: (error as ApiError).status, reason: body.error?.details?.[0]?.reason, message: error.message };
    },
  };
}

const FLAVOURS: Flavour[] = [
  genaiFlavour('@google/genai 3.3.0', GoogleGenAI, ApiError, 'v1'),
  genaiFlavour('@google/genai 2.32.0', GoogleGenAIV2 as unknown as GenAIClass, ApiErrorV2, 'v1beta'),
  {
    sdk: '@google/generative-ai 0.24.1',
    calls: [
      {
        name: 'generateContent',
        family: 'generative-content',
        path: /^\/v1beta\/models\/gemini-2\.5-flash:generateContent$/,
        run: async (key, exchanges) =>
          withGlobalFetchSpy(exchanges, async () =>
            expect((await generativeAi(key).generateContent('hi')).response.text().length).toBeGreaterThan(0),
          ),
      },
      {
        name: 'generateContentStream',
        family: 'generative-content',
        path: /^\/v1beta\/models\/gemini-2\.5-flash:streamGenerateContent\?alt=sse$/,
        run: async (key, exchanges) =>
          withGlobalFetchSpy(exchanges, async () => {
            const result = await generativeAi(key).generateContentStream('hi');
            let text = '';
            for await (const chunk of result.stream) text += chunk.text();
            expect(text.length).toBeGreaterThan(0);
            expect((await result.response).text()).toBe(text);
          }),
      },
      {
        name: 'embedContent',
        family: 'generative-content',
        path: /^\/v1beta\/models\/text-embedding-004:embedContent$/,
        run: async (key, exchanges) =>
          withGlobalFetchSpy(exchanges, async () => {
            const model = new GoogleGenerativeAI(key).getGenerativeModel(
              { model: 'text-embedding-004' },
              { baseUrl: world.url, apiVersion: 'v1beta' },
            );
            expect(Array.isArray((await model.embedContent('hi')).embedding.values)).toBe(true);
          }),
      },
    ],
    generate: async (key) => (await generativeAi(key).generateContent('hi')).response.text(),
    ErrorClass: GoogleGenerativeAIFetchError,
    failure: (error) => {
      const fetchError = error as GoogleGenerativeAIFetchError;
      const details = fetchError.errorDetails;
      return { status: fetchError.status, reason: details?.[0]?.reason, message: fetchError.message };
    },
  },
];

/** How many Checks the gateway decided for this key: the SDK's attempts, denials included. */
function attemptsOf(key: string): number {
  const prefix = displayPrefixOf(key);
  return world.gateway.logs.events('decision').filter((line) => line.keyPrefix === prefix).length;
}

async function caught(promise: Promise<unknown>): Promise<Error> {
  try {
    await promise;
  } catch (error) {
    return error as Error;
  }
  throw new Error('expected the SDK call to fail');
}

async function limitToOnePerTwoSeconds(keyId: string): Promise<void> {
  expect((await world.gateway.admin('PATCH', `/admin/keys/${keyId}`, { limits: [{ limit: 1, window: '2s' }] })).status).toBe(200);
}

/** An account per SDK and major (gg3-, gg2-, gl-), so no flavour meets another's limits or billing. */
const accountFor = (flavour: Flavour, what: string) =>
  `${flavour.sdk.startsWith('@google/genai') ? `gg${flavour.sdk.split(' ')[1]!.split('.')[0]}` : 'gl'}-${what}`;

describe.each(FLAVOURS)('$sdk', (flavour) => {
  describe('allowed calls', () => {
    test.each(flavour.calls)('$name succeeds; the upstream gets the identity headers and no credential', async ({ family, path, run }) => {
      const { key, keyId, accountId } = await world.newKey(accountFor(flavour, 'allowed'));
      const exchanges: Exchange[] = [];
      const before = world.upstream.requests.length;

      await run(key, exchanges);

      // The SDK sends the key in x-goog-api-key, never in the URL.
      expect(exchanges).toHaveLength(1);
      expect(exchanges[0]!.requestHeaders.get('x-goog-api-key')).toBe(key);
      expect(exchanges[0]!.requestHeaders.get('authorization')).toBeNull();

      const forwarded = world.upstream.requests.slice(before);
      expect(forwarded).toHaveLength(1);
      const upstream = forwarded[0]!;
      expect(upstream.path).toMatch(path);
      for (const header of CREDENTIAL_HEADERS) expect(upstream.headers[header]).toBeUndefined();
      expect(JSON.stringify(upstream)).not.toContain(key);
      expect(upstream.headers).toMatchObject({
        'x-gateway-account-id': accountId,
        'x-gateway-key-id': keyId,
        'x-gateway-key-prefix': displayPrefixOf(key),
        'x-gateway-route-family': family,
      });
      await expectMeteredAsUpstreamReported(world, upstream);
    });
  });

  describe('restricted keys: 403 PERMISSION_DENIED, naming the missing permission', () => {
    const cases = [
      { name: 'endpoint', code: 'endpoint_not_permitted', restrictions: { endpoints: ['messages'] } },
      { name: 'source address', code: 'address_not_permitted', restrictions: { sourceAddresses: ['192.0.2.0/24'] } },
      // The path names the model: no body needed.
      { name: 'model', code: 'model_not_permitted', restrictions: { models: ['gemini-2.5-pro*'] } },
    ];

    test.each(cases)('$name → 403 $code', async ({ code, restrictions }) => {
      const { key, keyId } = await world.newKey(accountFor(flavour, 'restricted'));
      expect((await world.gateway.admin('PATCH', `/admin/keys/${keyId}`, { restrictions })).status).toBe(200);
      const before = world.upstream.requests.length;

      const error = await caught(flavour.generate(key));

      expect(error).toBeInstanceOf(flavour.ErrorClass);
      const failure = flavour.failure(error);
      expect(failure.status).toBe(403);
      expect(failure.reason).toBe(code);
      expect(failure.message).toContain('insufficient permissions for this request. Missing permission');
      expect(world.upstream.requests.length).toBe(before);
    });
  });

  describe('authentication failures are 401 UNAUTHENTICATED', () => {
    const cases = authenticationFailureCases(
      async () => {
        const { key, keyId } = await world.newKey(accountFor(flavour, 'revoked'));
        await world.revoke(keyId);
        return key;
      },
      { name: 'Google provider key', text: 'looks like a Google API key', key: `AIza${'c'.repeat(35)}` },
    );

    test.each(cases)('$name → 401 $code', async ({ code, text, key: makeKey }) => {
      const key = await makeKey();
      registerSecrets(key);
      const before = world.upstream.requests.length;

      const error = await caught(flavour.generate(key));

      expect(error).toBeInstanceOf(flavour.ErrorClass);
      const failure = flavour.failure(error);
      expect(failure.status).toBe(401);
      expect(failure.reason).toBe(code);
      expect(failure.message).toContain(text);
      expect(failure.message).not.toContain(key);
      expect(world.upstream.requests.length).toBe(before);
    });
  });

  describe('billing denials are 402', () => {
    const cases = [
      { name: 'suspended account', code: 'account_suspended', billing: { status: 'suspended' } },
      { name: 'prepaid account out of credit', code: 'credit_exhausted', billing: { creditBalance: 0 } },
    ];

    test.each(cases)('$name → 402 $code after exactly one attempt', async ({ code, billing }) => {
      const { key, accountId } = await world.newKey(accountFor(flavour, code));
      expect((await world.gateway.admin('PATCH', `/admin/accounts/${accountId}`, { billing })).status).toBe(200);

      const error = await caught(flavour.generate(key));

      expect(error).toBeInstanceOf(flavour.ErrorClass);
      expect(flavour.failure(error)).toMatchObject({ status: 402, reason: code });
      expect(attemptsOf(key)).toBe(1);
    });
  });

  describe('rate limits', () => {
    test('a rate-limited key → 429 rate_limited, surfaced at once (no retries by default)', async () => {
      const { key, keyId } = await world.newKey(accountFor(flavour, 'limited'));
      await limitToOnePerTwoSeconds(keyId);
      await flavour.generate(key); // uses the one request of the window

      const error = await caught(flavour.generate(key));

      expect(error).toBeInstanceOf(flavour.ErrorClass);
      expect(flavour.failure(error)).toMatchObject({ status: 429, reason: 'rate_limited' });
      expect(flavour.failure(error).message).toContain('google.rpc.RetryInfo');
      expect(attemptsOf(key)).toBe(2); // the setup call and this one
    });
  });
});

describe('@google/genai with httpOptions.retryOptions', () => {
  test.each([
    { name: 'suspended account', code: 'account_suspended', billing: { status: 'suspended' } },
    { name: 'prepaid account out of credit', code: 'credit_exhausted', billing: { creditBalance: 0 } },
  ])('$name: a 402 is not retried even with retries on', async ({ code, billing }) => {
    const { key, accountId } = await world.newKey(`gg-retry-${code}`);
    expect((await world.gateway.admin('PATCH', `/admin/accounts/${accountId}`, { billing })).status).toBe(200);

    const error = await caught(genaiGenerate(genai(key, { retryOptions: { attempts: 3, initialDelay: 0.05 } })));

    expect(error).toBeInstanceOf(ApiError);
    expect((error as ApiError).status).toBe(402);
    expect(JSON.parse(error.message)).toMatchObject({ error: { code: 402, status: 'FAILED_PRECONDITION' } });
    expect(attemptsOf(key)).toBe(1);
  });

  test("a 429 is retried on genai's own backoff, not after retry-after: a quick retry is refused again", async () => {
    const { key, keyId } = await world.newKey('gg-retry-limited', { name: 'quick retry' });
    await limitToOnePerTwoSeconds(keyId);
    await genaiGenerate(genai(key));

    const error = await caught(genaiGenerate(genai(key, { retryOptions: { attempts: 2, initialDelay: 0.05, jitter: 0 } })));

    expect(error).toBeInstanceOf(ApiError);
    expect((error as ApiError).status).toBe(429);
    expect(JSON.parse(error.message)).toMatchObject({ error: { code: 429, status: 'RESOURCE_EXHAUSTED' } });
    expect(attemptsOf(key)).toBe(1 + 2);
  });

  test(
    'a 429 with enough backoff attempts ends in success once the window allows',
    async () => {
      const { key, keyId } = await world.newKey('gg-retry-limited', { name: 'patient retry' });
      await limitToOnePerTwoSeconds(keyId);
      await genaiGenerate(genai(key));
      const exchanges: Exchange[] = [];

      const text = await genaiGenerate(genai(key, { exchanges, retryOptions: { attempts: 5, initialDelay: 1, maxDelay: 2, jitter: 0 } }));

      expect(text.length).toBeGreaterThan(0);
      expect(exchanges.at(-1)?.status).toBe(200);
      expect(exchanges.slice(0, -1).every((e) => e.status === 429)).toBe(true);
      expect(exchanges.length).toBeGreaterThanOrEqual(2);
      expect(attemptsOf(key)).toBe(1 + exchanges.length);
    },
    RETRY_TIMEOUT_MS,
  );
});

describe('usage is billed through ext_proc, with gateway-authz as the processor (as envoy.yaml configures it)', () => {
  let metered: E2EWorld;
  beforeAll(async () => {
    metered = await startMeteredWorld();
  }, 60_000);
  afterAll(async () => {
    await metered?.close();
  });

  /** The calls these tests make, through each SDK, pointed at the metered world. */
  interface MeteredApi {
    generate(): Promise<unknown>;
    stream(): Promise<unknown>;
    /** A slow streamed answer, left (its request aborted) after this many chunks. */
    leaveAfter(chunks: number): Promise<void>;
  }
  /** What a refusal says, as each SDK surfaces the body: the status and the google.rpc details. */
  interface Refusal {
    status: number;
    message: string;
    details: { '@type'?: string; reason?: string; metadata?: Record<string, string>; retryDelay?: string }[];
  }
  const SDKS: {
    sdk: string;
    client: (apiKey: string) => MeteredApi;
    ErrorClass: abstract new (...args: never[]) => Error;
    refusal: (error: Error) => Refusal;
  }[] = [
    {
      sdk: '@google/genai',
      ErrorClass: ApiError,
      refusal: (error) => {
        // genai puts the whole JSON body in the message.
        const body = JSON.parse(error.message) as { error: { message: string; details: Refusal['details'] } };
        return { status: (error as ApiError).status, message: body.error.message, details: body.error.details };
      },
      client(apiKey) {
        const ai = new GoogleGenAI({ apiKey, vertexai: false, httpOptions: { baseUrl: metered.url } });
        return {
          generate: () => ai.models.generateContent({ model: MODEL, contents: 'hi' }),
          stream: async () => {
            for await (const chunk of await ai.models.generateContentStream({ model: MODEL, contents: 'hi' })) void chunk;
          },
          leaveAfter: async (chunks) => {
            const abort = new AbortController();
            let seen = 0;
            const stream = await ai.models.generateContentStream({
              model: 'gemini-slow',
              contents: 'tell me a long story',
              config: { abortSignal: abort.signal },
            });
            try {
              for await (const chunk of stream) {
                void chunk;
                if (++seen === chunks) abort.abort();
              }
            } catch (error) {
              if (!abort.signal.aborted) throw error;
            }
          },
        };
      },
    },
    {
      sdk: '@google/generative-ai',
      ErrorClass: GoogleGenerativeAIFetchError,
      refusal: (error) => {
        const fetchError = error as GoogleGenerativeAIFetchError;
        return {
          status: fetchError.status ?? 0,
          message: fetchError.message,
          details: (fetchError.errorDetails ?? []) as Refusal['details'],
        };
      },
      client(apiKey) {
        const model = (name: string) =>
          new GoogleGenerativeAI(apiKey).getGenerativeModel({ model: name }, { baseUrl: metered.url, apiVersion: 'v1beta' });
        return {
          generate: () => model(MODEL).generateContent('hi'),
          stream: async () => (await model(MODEL).generateContentStream('hi')).response,
          leaveAfter: async (chunks) => {
            const abort = new AbortController();
            let seen = 0;
            const result = await model('gemini-slow').generateContentStream('tell me a long story', { signal: abort.signal });
            result.response.catch(() => undefined);
            try {
              for await (const chunk of result.stream) {
                void chunk;
                if (++seen === chunks) abort.abort();
              }
            } catch (error) {
              if (!abort.signal.aborted) throw error;
            }
          },
        };
      },
    },
  ];
  const upstreamOf = (accountId: string) => metered.upstream.requests.filter((r) => r.headers['x-gateway-account-id'] === accountId);
  // Gemini reports no cache writes.
  const REPORTED = { ...METERED_USAGE, cacheCreationTokens: 0 };

  describe.each(SDKS)('$sdk', ({ sdk, client, ErrorClass, refusal }) => {
    const account = (what: string) => `gm-billed-${sdk.replace(/[^a-z]/g, '')}-${what}`;

    test('a whole and a streamed answer move the balance, the month spend and the usage API by exactly the usage reported', async () => {
      const { key, accountId } = await metered.newKey(account('both'), {
        accountPatch: { billing: { creditBalance: BALANCE_FOR_TWO_ANSWERS } },
      });
      const api = client(key);

      await api.generate();
      await api.stream();

      expect(upstreamOf(accountId).map((r) => r.reportedUsage)).toEqual([REPORTED, REPORTED]);
      const charged = 2 * chargeOf(REPORTED);
      expect(await meteredLedger(metered, accountId, 2)).toEqual({
        creditBalance: BALANCE_FOR_TWO_ANSWERS - charged,
        spentThisMonth: charged,
        usage: totalsOf(sumOf(REPORTED, REPORTED), 2),
      });
    });

    test("a prepaid account whose credit cannot cover the request's hold (4,096 output tokens by default) is 402 credit_exhausted at once, before any upstream call", async () => {
      const { key, accountId } = await metered.newKey(account('runs-out'), { accountPatch: { billing: { creditBalance: 30 } } });
      const api = client(key);

      const error = await caught(api.generate());
      expect(error.message).toContain('402');
      expect(error.message).toContain('credit_exhausted');
      expect(upstreamOf(accountId)).toHaveLength(0);
    });

    test('a token budget below one answer: the metered answer exhausts it, the next request is 429 token_budget_exhausted, and it recovers once refilled', async () => {
      const { key, keyId, accountId } = await metered.newKey(account('budget'));
      await giveSmallTokenBudget(metered, keyId);
      const api = client(key);

      await api.generate();
      expect((await meteredLedger(metered, accountId, 1)).usage).toEqual(totalsOf(REPORTED));

      const error = await caught(api.generate());
      expect(error).toBeInstanceOf(ErrorClass);
      const refused = refusal(error);
      expect(refused.status).toBe(429);
      expect(refused.message).toContain(SMALL_TOKEN_BUDGET_MESSAGE);
      expect(refused.details[0]).toMatchObject({
        reason: 'token_budget_exhausted',
        metadata: { scope: 'key', window: '2s', limit: '20' },
      });
      // Neither SDK reads RetryInfo (nor retry-after): the caller waits as the body says.
      const retryInfo = refused.details.find((detail) => detail['@type'] === 'type.googleapis.com/google.rpc.RetryInfo');
      const retryAfterMs = Math.round(1000 * Number(/^([\d.]+)s$/.exec(retryInfo?.retryDelay ?? '')?.[1]));
      expect(retryAfterMs).toBeGreaterThan(0);
      expect(retryAfterMs).toBeLessThanOrEqual(2_200);
      expect(upstreamOf(accountId)).toHaveLength(1);

      await waitForRefill(retryAfterMs);
      await api.generate();
      expect(upstreamOf(accountId)).toHaveLength(2);
    });

    test("the key's token budget moves by exactly the tokens reported (no token headers in this style): after a whole and a streamed answer, a budget of exactly their tokens refuses the next request (all of it used), one token more allows it", async () => {
      const used = 2 * totalTokens(REPORTED);
      const { exhausted, open } = budgetsAround(used);
      const [usedUp, oneMore] = await Promise.all(
        [exhausted, open].map(async (budget) => {
          const { key, keyId, accountId } = await metered.newKey(account(`budget-${budget.tokens}`));
          await giveTokenBudget(metered, keyId, budget);
          const api = client(key);
          await api.generate();
          await meteredLedger(metered, accountId, 1);
          await api.stream();
          expect((await meteredLedger(metered, accountId, 2)).usage).toEqual(totalsOf(sumOf(REPORTED, REPORTED), 2));
          const third = await api.generate().then(
            () => undefined,
            (error: Error) => error,
          );
          return { third, upstream: upstreamOf(accountId).length };
        }),
      );

      expect(usedUp!.third).toBeInstanceOf(ErrorClass);
      const refused = refusal(usedUp!.third!);
      expect(refused.status).toBe(429);
      expect(refused.details[0]).toMatchObject({
        reason: 'token_budget_exhausted',
        metadata: { scope: 'key', window: exhausted.window, limit: String(exhausted.tokens) },
      });
      expect(usedUp!.upstream).toBe(2);
      expect(oneMore!.third).toBeUndefined();
      expect(oneMore!.upstream).toBe(3);
    });

    test('a stream the client leaves mid-way is charged what it delivered (the last running counts, raised to the text they trail)', async () => {
      const { key, accountId } = await metered.newKey(account('leaves'), { accountPatch: { billing: { creditBalance: 10_000 } } });
      await client(key).leaveAfter(5);

      // Envoy closes the side stream deferred_close_timeout (5 s) after the client left: then the answer is metered.
      const ledger = await meteredLedger(metered, accountId, 1, 15_000);
      const [upstream] = upstreamOf(accountId);
      expect(upstream!.completed).toBe(false);
      const delivered = deliveredOutcome(upstream!, 'generative-content');
      if (delivered.kind !== 'metered') throw new Error(`expected a metered outcome, got ${delivered.reason}`);
      // A running count can trail the text that passed: the text's estimate (4 bytes a token) is its floor, marked
      // estimated when it is above the count (src/metering/usage-estimate.ts; the rule is unit-tested there).
      expect(delivered.usage).toMatchObject({ final: false });
      expect(delivered.usage.tokens.outputTokens).toBeGreaterThan(0);
      expect(ledger).toEqual({
        creditBalance: 10_000 - chargeOf(delivered.usage.tokens),
        spentThisMonth: chargeOf(delivered.usage.tokens),
        usage: totalsOf(delivered.usage.tokens, 1, delivered.usage.estimated ? 1 : 0),
      });
    }, 30_000);
  });
});
