import type { AllowDecision, DenyDecision } from '../../../src/check/decision';
import type { DenyReason } from '../../../src/check/deny-reasons';
import type { ClassifiedRoute, ClientStyle } from '../../../src/check/routes/route';
import type { LimitHit, LimitState } from '../../../src/accounts/limits/rate-limits';
import type { TokenBudgetState } from '../../../src/accounts/limits/token-budgets';
import {
  toCheckAnswer,
  type CheckAnswerContext,
  type CheckResponse,
  type HeaderValueOption,
} from '../../../src/check/responses/check-response';
import { openAiDuration, rfc3339Seconds } from '../../../src/check/responses/rate-limit-headers';
import { parseDenyBody } from '../../support/deny-body';

const NOW = Date.UTC(2026, 10, 22, 12, 0, 0); // 2026-11-22T12:00:00Z
const BOTH_SPELLINGS = ['vendora-version', 'anthropic-version'] as const;
const CONTEXT: CheckAnswerContext = {
  requestId: 'req-1',
  storeFailureMode: 'deny',
  now: NOW,
  versionHeaders: BOTH_SPELLINGS,
};

const STATE: LimitState = { scope: 'key', limit: 60, windowSeconds: 60, remaining: 41, resetMs: 60_000 };
/** Account limit of 1000/h, exhausted: one more request in 3.6 s, full allowance back in 61 s. */
const HIT: LimitHit = {
  scope: 'account',
  limit: 1000,
  windowSeconds: 3600,
  remaining: 0,
  resetMs: 61_000,
  retryAfterMs: 3_600,
};

const ROUTES: Record<ClientStyle, ClassifiedRoute> = {
  chat: { family: 'chat-completions', style: 'chat', pathWithoutQuery: '/v1/chat/completions' },
  messages: { family: 'messages', style: 'messages', pathWithoutQuery: '/v1/messages' },
  generative: { family: 'generative-content', style: 'generative', pathWithoutQuery: '/v1beta/models/m:generateContent' },
  generic: { family: 'other', style: 'generic', pathWithoutQuery: '/v1/files' },
};
const STYLES = Object.keys(ROUTES) as ClientStyle[];

function deny(style: ClientStyle, reason: DenyReason, extra: Partial<DenyDecision> = {}): DenyDecision {
  return { kind: 'deny', route: ROUTES[style], reason, message: `message for ${reason}`, ...extra };
}

function rateLimited(style: ClientStyle, hit: Partial<LimitHit> = {}): DenyDecision {
  return deny(style, 'rate_limited', { rateLimit: { ...HIT, ...hit } });
}

function allow(route: ClassifiedRoute, rateLimit?: LimitState): AllowDecision {
  return {
    kind: 'allow',
    route,
    identity: { accountId: 'acme', keyId: 'key_1', keyPrefix: 'gk_live_AbC4', environment: 'live' },
    strip: { headers: ['authorization'], queryParameters: [] },
    ...(rateLimit && { rateLimit }),
  };
}

function responseOf(decision: AllowDecision | DenyDecision, context: Partial<CheckAnswerContext> = {}): CheckResponse {
  const answer = toCheckAnswer(decision, { ...CONTEXT, ...context });
  if (answer.kind !== 'response') throw new Error('expected a response');
  return answer.response;
}

function deniedHeaders(decision: DenyDecision, context: Partial<CheckAnswerContext> = {}): HeaderValueOption[] {
  return responseOf(decision, context).denied_response!.headers;
}

function addedResponseHeaders(decision: AllowDecision, context: Partial<CheckAnswerContext> = {}) {
  return responseOf(decision, context).ok_response!.response_headers_to_add;
}

function asMap(options: HeaderValueOption[]): Record<string, string> {
  return Object.fromEntries(options.map((option) => [option.header.key, option.header.value]));
}

const rateLimitNames = (options: HeaderValueOption[]) =>
  options.map((option) => option.header.key).filter((key) => key.includes('ratelimit-requests'));

describe('402 (billing)', () => {
  const billing = STYLES.flatMap((style) => (['account_suspended', 'credit_exhausted'] as const).map((reason) => [style, reason] as const));

  it.each(billing)('%s %s: HTTP 402, gRPC 7, x-should-retry false and no retry-after', (style, reason) => {
    const response = responseOf(deny(style, reason));
    expect(response.status.code).toBe(7);
    expect(response.denied_response!.status.code).toBe(402);
    const headers = asMap(response.denied_response!.headers);
    expect(headers['x-should-retry']).toBe('false');
    expect(headers['x-gateway-error-code']).toBe(reason);
    expect(headers['content-type']).toBe('application/json');
    expect(headers).not.toHaveProperty('retry-after');
    expect(headers).not.toHaveProperty('retry-after-ms');
    expect(headers).not.toHaveProperty('www-authenticate');
  });
});

describe('429 (rate limit)', () => {
  it.each(STYLES)('%s: HTTP 429, gRPC 8 (RESOURCE_EXHAUSTED), x-gateway-error-code rate_limited', (style) => {
    const response = responseOf(rateLimited(style));
    expect(response.status.code).toBe(8);
    expect(response.denied_response!.status.code).toBe(429);
    expect(asMap(response.denied_response!.headers)['x-gateway-error-code']).toBe('rate_limited');
  });

  it("chat: the header says rate_limited while the body code is OpenAI's rate_limit_exceeded", () => {
    const response = responseOf(rateLimited('chat'));
    expect(asMap(response.denied_response!.headers)['x-gateway-error-code']).toBe('rate_limited');
    expect(JSON.parse(response.denied_response!.body)).toMatchObject({ error: { code: 'rate_limit_exceeded', type: 'requests' } });
  });

  it.each(STYLES)('%s: carries no x-should-retry (SDKs retry after retry-after)', (style) => {
    expect(asMap(deniedHeaders(rateLimited(style)))).not.toHaveProperty('x-should-retry');
  });

  it('other 4xx still carry x-should-retry: false', () => {
    expect(asMap(deniedHeaders(deny('chat', 'unknown_key')))['x-should-retry']).toBe('false');
    expect(asMap(deniedHeaders(deny('messages', 'missing_version_header')))['x-should-retry']).toBe('false');
  });

  it.each([
    [0, '1', '1'],
    [0.4, '1', '1'],
    [250, '1', '250'],
    [1000, '1', '1000'],
    [1500, '2', '1500'],
    [59_999.2, '60', '60000'],
    [600_000, '60', '60000'],
  ])('retryAfterMs %d → retry-after %s, retry-after-ms %s (clamped to 1 s..60 s)', (retryAfterMs, seconds, ms) => {
    const headers = asMap(deniedHeaders(rateLimited('chat', { retryAfterMs })));
    expect(headers['retry-after']).toBe(seconds);
    expect(headers['retry-after-ms']).toBe(ms);
  });

  it.each(STYLES)('%s: x-gateway-ratelimit-scope and x-gateway-ratelimit-window name the limit hit', (style) => {
    const headers = asMap(deniedHeaders(rateLimited(style)));
    expect(headers['x-gateway-ratelimit-scope']).toBe('account');
    expect(headers['x-gateway-ratelimit-window']).toBe('1h');
    const keyMinute = asMap(deniedHeaders(rateLimited(style, { scope: 'key', windowSeconds: 60 })));
    expect(keyMinute['x-gateway-ratelimit-scope']).toBe('key');
    expect(keyMinute['x-gateway-ratelimit-window']).toBe('1m');
  });

  it.each(STYLES)('%s: retry-after and retry-after-ms are present', (style) => {
    const headers = asMap(deniedHeaders(rateLimited(style)));
    expect(headers['retry-after']).toBe('4');
    expect(headers['retry-after-ms']).toBe('3600');
  });

  it('chat: exact headers of a 429', () => {
    expect(deniedHeaders(rateLimited('chat')).map((option) => [option.header.key, option.header.value])).toEqual([
      ['content-type', 'application/json'],
      ['x-gateway-error-code', 'rate_limited'],
      ['retry-after', '4'],
      ['retry-after-ms', '3600'],
      ['x-gateway-ratelimit-scope', 'account'],
      ['x-gateway-ratelimit-window', '1h'],
      ['x-ratelimit-limit-requests', '1000'],
      ['x-ratelimit-remaining-requests', '0'],
      ['x-ratelimit-reset-requests', '1m1s'],
      ['x-request-id', 'req-1'],
    ]);
  });

  it('messages: anthropic- and vendora- rate-limit headers with an RFC 3339 reset', () => {
    const headers = asMap(deniedHeaders(rateLimited('messages')));
    for (const vendor of ['vendora', 'anthropic']) {
      expect(headers[`${vendor}-ratelimit-requests-limit`]).toBe('1000');
      expect(headers[`${vendor}-ratelimit-requests-remaining`]).toBe('0');
      expect(headers[`${vendor}-ratelimit-requests-reset`]).toBe('2026-11-22T12:01:01Z');
    }
    expect(headers['request-id']).toBe('req-1');
  });

  it('generative: no rate-limit headers; RetryInfo in the body gives the delay in Duration JSON form', () => {
    const response = responseOf(rateLimited('generative', { retryAfterMs: 250 }));
    const names = response.denied_response!.headers.map((option) => option.header.key);
    expect(names.filter((key) => key.includes('ratelimit-') && !key.startsWith('x-gateway-'))).toEqual([]);
    expect(parseDenyBody(response.denied_response!.body).error.details[1]).toEqual({
      '@type': 'type.googleapis.com/google.rpc.RetryInfo',
      retryDelay: '0.250s',
    });
    const slower = responseOf(rateLimited('generative', { retryAfterMs: 26_000 }));
    expect(parseDenyBody(slower.denied_response!.body).error.details[1]!.retryDelay).toBe('26s');
  });

  it('a rate_limited decision without a known limit still answers 429, just without limit headers', () => {
    const response = responseOf(deny('chat', 'rate_limited'));
    expect(response.denied_response!.status.code).toBe(429);
    const headers = asMap(response.denied_response!.headers);
    expect(headers).not.toHaveProperty('retry-after');
    expect(headers).not.toHaveProperty('x-should-retry');
  });
});

describe('rate-limit headers on an allowed request (ok_response.response_headers_to_add)', () => {
  it('chat: x-ratelimit-limit/remaining/reset-requests with exact values', () => {
    expect(asMap(addedResponseHeaders(allow(ROUTES.chat, STATE)))).toEqual({
      'x-ratelimit-limit-requests': '60',
      'x-ratelimit-remaining-requests': '41',
      'x-ratelimit-reset-requests': '1m0s',
    });
  });

  it('generic and models routes in chat style use the chat names', () => {
    const models: ClassifiedRoute = { family: 'models', style: 'chat', pathWithoutQuery: '/v1/models' };
    for (const route of [ROUTES.generic, models]) {
      expect(asMap(addedResponseHeaders(allow(route, STATE)))).toEqual({
        'x-ratelimit-limit-requests': '60',
        'x-ratelimit-remaining-requests': '41',
        'x-ratelimit-reset-requests': '1m0s',
      });
    }
  });

  it('messages: both spellings by default, reset as an RFC 3339 timestamp with second precision', () => {
    expect(asMap(addedResponseHeaders(allow(ROUTES.messages, STATE)))).toEqual({
      'vendora-ratelimit-requests-limit': '60',
      'vendora-ratelimit-requests-remaining': '41',
      'vendora-ratelimit-requests-reset': '2026-11-22T12:01:00Z',
      'anthropic-ratelimit-requests-limit': '60',
      'anthropic-ratelimit-requests-remaining': '41',
      'anthropic-ratelimit-requests-reset': '2026-11-22T12:01:00Z',
    });
  });

  it('messages: the spec-only spelling setting emits only vendora-* names', () => {
    const specOnly = { versionHeaders: ['vendora-version'] };
    expect(rateLimitNames(addedResponseHeaders(allow(ROUTES.messages, STATE), specOnly))).toEqual([
      'vendora-ratelimit-requests-limit',
      'vendora-ratelimit-requests-remaining',
      'vendora-ratelimit-requests-reset',
    ]);
    expect(rateLimitNames(deniedHeaders(rateLimited('messages'), specOnly))).toEqual([
      'vendora-ratelimit-requests-limit',
      'vendora-ratelimit-requests-remaining',
      'vendora-ratelimit-requests-reset',
    ]);
  });

  it('messages: the reset timestamp is rounded up to the next whole second', () => {
    const headers = asMap(addedResponseHeaders(allow(ROUTES.messages, { ...STATE, resetMs: 59_001 })));
    expect(headers['anthropic-ratelimit-requests-reset']).toBe('2026-11-22T12:01:00Z');
    expect(rfc3339Seconds(NOW + 1)).toBe('2026-11-22T12:00:01Z');
    expect(rfc3339Seconds(NOW)).toBe('2026-11-22T12:00:00Z');
  });

  it('generative: no rate-limit headers at all', () => {
    expect(addedResponseHeaders(allow(ROUTES.generative, STATE))).toEqual([]);
  });

  it('no rateLimit on the decision: nothing is added', () => {
    expect(addedResponseHeaders(allow(ROUTES.chat))).toEqual([]);
  });

  it('the identity headers stay in ok_response.headers (to the upstream), not in the response headers', () => {
    const ok = responseOf(allow(ROUTES.chat, STATE)).ok_response!;
    expect(ok.headers.map((option) => option.header.key)).toContain('x-gateway-account-id');
    expect(ok.response_headers_to_add.map((option) => option.header.key)).not.toContain('x-gateway-account-id');
  });
});

describe('header options', () => {
  it.each(STYLES)('%s: every header on a 429 and on an allow uses append:false and OVERWRITE_IF_EXISTS_OR_ADD', (style) => {
    const ok = responseOf(allow(ROUTES[style], STATE)).ok_response!;
    const all = [...deniedHeaders(rateLimited(style)), ...ok.response_headers_to_add, ...ok.headers];
    expect(all.length).toBeGreaterThan(0);
    for (const option of all) {
      expect(option.append).toEqual({ value: false });
      expect(option.append_action).toBe('OVERWRITE_IF_EXISTS_OR_ADD');
    }
  });
});

describe('OpenAI duration strings (x-ratelimit-reset-requests)', () => {
  it.each([
    [0, '0ms'],
    [12, '12ms'],
    [999, '999ms'],
    [998.2, '999ms'],
    [999.4, '1s'],
    [1000, '1s'],
    [1500, '2s'],
    [59_000, '59s'],
    [60_000, '1m0s'],
    [61_000, '1m1s'],
    [360_000, '6m0s'],
    [3_600_000, '1h0m0s'],
    [3_723_000, '1h2m3s'],
    [86_400_000, '24h0m0s'],
    [-5, '0ms'],
  ])('%d ms → %s', (ms, expected) => {
    expect(openAiDuration(ms)).toBe(expected);
  });
});

describe('token budgets: token rate-limit headers and the 429 token_budget_exhausted', () => {
  /** 100,000 tokens a minute with 62,500 left, full again in 22.5 s. */
  const BUDGET: TokenBudgetState = {
    scope: 'key',
    tokens: 100_000,
    windowSeconds: 60,
    remaining: 62_500,
    resetMs: 22_500,
    retryAfterMs: 0,
  };
  /** The account's daily budget in debt: one token back in 2.5 s, full again in 25 h. */
  const EXHAUSTED: TokenBudgetState = {
    scope: 'account',
    tokens: 5_000_000,
    windowSeconds: 86_400,
    remaining: 0,
    resetMs: 90_000_000,
    retryAfterMs: 2_500,
  };
  const withBudget = (route: ClassifiedRoute, rateLimit?: LimitState): AllowDecision => ({
    ...allow(route, rateLimit),
    tokenBudget: BUDGET,
  });
  const exhausted = (style: ClientStyle) => deny(style, 'token_budget_exhausted', { tokenBudget: EXHAUSTED });

  it('chat: x-ratelimit-*-tokens next to the request headers on an allowed request', () => {
    expect(asMap(addedResponseHeaders(withBudget(ROUTES.chat, STATE)))).toEqual({
      'x-ratelimit-limit-requests': '60',
      'x-ratelimit-remaining-requests': '41',
      'x-ratelimit-reset-requests': '1m0s',
      'x-ratelimit-limit-tokens': '100000',
      'x-ratelimit-remaining-tokens': '62500',
      'x-ratelimit-reset-tokens': '23s',
    });
  });

  it('messages: anthropic- and vendora-ratelimit-tokens-* with an RFC 3339 reset', () => {
    const headers = asMap(addedResponseHeaders(withBudget(ROUTES.messages)));
    for (const vendor of ['vendora', 'anthropic']) {
      expect(headers[`${vendor}-ratelimit-tokens-limit`]).toBe('100000');
      expect(headers[`${vendor}-ratelimit-tokens-remaining`]).toBe('62500');
      expect(headers[`${vendor}-ratelimit-tokens-reset`]).toBe('2026-11-22T12:00:23Z');
    }
  });

  it('generative: no token headers', () => {
    expect(addedResponseHeaders(withBudget(ROUTES.generative))).toEqual([]);
  });

  it('429: retry-after when one token is back, the budget named, the token headers at 0', () => {
    const headers = asMap(deniedHeaders(exhausted('chat')));
    expect(headers).toMatchObject({
      'x-gateway-error-code': 'token_budget_exhausted',
      'retry-after': '3',
      'retry-after-ms': '2500',
      'x-gateway-ratelimit-scope': 'account',
      'x-gateway-ratelimit-window': '1d',
      'x-ratelimit-limit-tokens': '5000000',
      'x-ratelimit-remaining-tokens': '0',
      'x-ratelimit-reset-tokens': '25h0m0s',
    });
    expect(headers).not.toHaveProperty('x-should-retry');
    expect(asMap(deniedHeaders(exhausted('messages')))['anthropic-ratelimit-tokens-remaining']).toBe('0');
  });

  it('429 bodies: chat type "tokens"; messages and generic name the budget; generative adds RetryInfo', () => {
    const body = (style: ClientStyle) => parseDenyBody(responseOf(exhausted(style)).denied_response!.body);
    expect(body('chat').error).toMatchObject({ type: 'tokens', code: 'rate_limit_exceeded' });
    expect(body('messages').error).toMatchObject({
      type: 'rate_limit_error',
      details: { error_code: 'token_budget_exhausted', scope: 'account', window: '1d', limit: 5_000_000 },
    });
    expect(body('generic').error).toMatchObject({
      code: 'token_budget_exhausted',
      rate_limit: { scope: 'account', window: '1d', limit: 5_000_000 },
    });
    const generative = body('generative').error;
    expect(generative).toMatchObject({ code: 429, status: 'RESOURCE_EXHAUSTED' });
    expect(generative.details[1]).toEqual({ '@type': 'type.googleapis.com/google.rpc.RetryInfo', retryDelay: '2.500s' });
  });

  it('402 budget_exceeded: billing words in every style, no retry-after', () => {
    for (const style of STYLES) {
      const response = responseOf(deny(style, 'budget_exceeded'));
      expect(response.denied_response!.status.code).toBe(402);
      expect(asMap(response.denied_response!.headers)).toMatchObject({ 'x-should-retry': 'false' });
      expect(asMap(response.denied_response!.headers)).not.toHaveProperty('retry-after');
    }
    expect(parseDenyBody(responseOf(deny('chat', 'budget_exceeded')).denied_response!.body).error).toMatchObject({
      type: 'billing_error',
      code: 'budget_exceeded',
    });
  });
});
