import type { DenyDecision } from '../../../src/check/decision';
import type { LimitHit } from '../../../src/accounts/limits/rate-limits';
import { DENY_REASONS, httpStatusOf, type DenyReason } from '../../../src/check/deny-reasons';
import type { ClientStyle } from '../../../src/check/routes/route';
import { chatErrorBody } from '../../../src/check/responses/error-bodies/chat-error-body';
import { ERROR_INFO_DOMAIN, generativeErrorBody, protoDuration } from '../../../src/check/responses/error-bodies/generative-error-body';
import { genericErrorBody } from '../../../src/check/responses/error-bodies/generic-error-body';
import { errorBodyFor, type ErrorBodyInput } from '../../../src/check/responses/error-bodies';
import { messagesErrorBody } from '../../../src/check/responses/error-bodies/messages-error-body';
import type { DenyBodyView } from '../../support/deny-body';

const ALL_REASONS = Object.keys(DENY_REASONS) as DenyReason[];
const STYLES: ClientStyle[] = ['chat', 'messages', 'generative', 'generic'];

const SECRET_DETAIL = 'ECONNREFUSED 10.0.0.5:6379 password=hunter2';
const ACCOUNT = 'acct_secret_42';
const KEY_PREFIX = 'gk_live_AbC4';

function decision(reason: DenyReason, extra: Partial<DenyDecision> = {}): DenyDecision {
  return {
    kind: 'deny',
    route: { family: 'chat-completions', style: 'chat', pathWithoutQuery: '/v1/chat/completions' },
    reason,
    message: `message for ${reason}`,
    ...extra,
  };
}

const HIT: LimitHit = {
  scope: 'account',
  limit: 600,
  windowSeconds: 60,
  remaining: 0,
  resetMs: 59_000,
  retryAfterMs: 26_000,
};
const RATE_LIMITED = { rateLimit: HIT, message: 'Rate limit reached: 600 requests per 1m for this account.' };

function input(reason: DenyReason, extra: Partial<DenyDecision> = {}, requestId = 'req-123'): ErrorBodyInput {
  return { decision: decision(reason, extra), httpStatus: httpStatusOf(reason), requestId };
}

function parsed(style: ClientStyle, body: ErrorBodyInput): unknown {
  return JSON.parse(errorBodyFor(style, body));
}

describe('chat style: {"error":{message,type,param,code}}', () => {
  it('has exactly the OpenAI shape, with the reason as code and the header as param', () => {
    expect(parsed('chat', input('invalid_authorization_scheme', { param: 'authorization' }))).toEqual({
      error: {
        message: 'message for invalid_authorization_scheme',
        type: 'authentication_error',
        param: 'authorization',
        code: 'invalid_authorization_scheme',
      },
    });
  });

  it('param is null (present, not missing) when there is none', () => {
    const body = parsed('chat', input('missing_credential')) as { error: Record<string, unknown> };
    expect(Object.keys(body.error).sort()).toEqual(['code', 'message', 'param', 'type']);
    expect(body.error.param).toBeNull();
  });

  it.each([
    ['unknown_key', 'authentication_error'],
    ['missing_version_header', 'invalid_request_error'],
    ['unsupported_version', 'invalid_request_error'],
    ['store_unavailable', 'server_error'],
  ] as const)('%s has type %s', (reason, type) => {
    expect(chatErrorBody(input(reason))).toMatchObject({ error: { type, code: reason } });
  });

  it('402: type billing_error with the reason as code', () => {
    expect(parsed('chat', input('credit_exhausted'))).toEqual({
      error: { message: 'message for credit_exhausted', type: 'billing_error', param: null, code: 'credit_exhausted' },
    });
  });

  it("429: OpenAI's own shape, type requests and code rate_limit_exceeded, nothing else inside error", () => {
    expect(parsed('chat', input('rate_limited', RATE_LIMITED))).toEqual({
      error: { message: RATE_LIMITED.message, type: 'requests', param: null, code: 'rate_limit_exceeded' },
    });
  });

  it('carries no request id in the body (it travels in the x-request-id header)', () => {
    expect(JSON.stringify(chatErrorBody(input('unknown_key', {}, 'req-unique-987')))).not.toContain('req-unique-987');
  });
});

describe('messages style: {"type":"error","error":{type,message,details:{error_code}},"request_id"}', () => {
  it('has exactly the Anthropic shape, with the reason as details.error_code', () => {
    expect(parsed('messages', input('missing_version_header', { param: 'vendora-version' }))).toEqual({
      type: 'error',
      error: {
        type: 'invalid_request_error',
        message: 'message for missing_version_header',
        details: { error_code: 'missing_version_header' },
      },
      request_id: 'req-123',
    });
  });

  it('request_id is at the top level and null when there is no request id', () => {
    const body = messagesErrorBody(input('unknown_key', {}, '')) as Record<string, unknown>;
    expect(Object.keys(body).sort()).toEqual(['error', 'request_id', 'type']);
    expect(body.request_id).toBeNull();
  });

  it.each([
    ['key_revoked', 'authentication_error'],
    ['unsupported_version', 'invalid_request_error'],
    ['store_unavailable', 'api_error'],
  ] as const)('%s has error.type %s', (reason, type) => {
    expect(messagesErrorBody(input(reason))).toMatchObject({ error: { type, details: { error_code: reason } } });
  });

  it('402: error.type billing_error with the reason as details.error_code', () => {
    expect(parsed('messages', input('account_suspended'))).toEqual({
      type: 'error',
      error: {
        type: 'billing_error',
        message: 'message for account_suspended',
        details: { error_code: 'account_suspended' },
      },
      request_id: 'req-123',
    });
  });

  it('429: error.type rate_limit_error; details name the scope, window and limit', () => {
    expect(parsed('messages', input('rate_limited', RATE_LIMITED))).toEqual({
      type: 'error',
      error: {
        type: 'rate_limit_error',
        message: RATE_LIMITED.message,
        details: { error_code: 'rate_limited', scope: 'account', window: '1m', limit: 600 },
      },
      request_id: 'req-123',
    });
  });

  it('does not expose param (the body has no such field)', () => {
    expect(JSON.stringify(messagesErrorBody(input('unsupported_version', { param: 'anthropic-version' })))).not.toContain(
      'anthropic-version',
    );
  });
});

describe('generative style: {"error":{code,message,status,details:[ErrorInfo]}}', () => {
  it('has exactly the Google shape, with the reason in ErrorInfo.reason', () => {
    expect(parsed('generative', input('query_key_not_accepted', { param: 'key' }))).toEqual({
      error: {
        code: 401,
        message: 'message for query_key_not_accepted',
        status: 'UNAUTHENTICATED',
        details: [
          {
            '@type': 'type.googleapis.com/google.rpc.ErrorInfo',
            reason: 'query_key_not_accepted',
            domain: ERROR_INFO_DOMAIN,
            metadata: { param: 'key', request_id: 'req-123' },
          },
        ],
      },
    });
    expect(ERROR_INFO_DOMAIN).toBe('gateway-authz');
  });

  it('error.code is the HTTP status it is given', () => {
    expect(generativeErrorBody({ ...input('store_unavailable'), httpStatus: 503 })).toMatchObject({
      error: { code: 503, status: 'UNAVAILABLE' },
    });
    expect(generativeErrorBody(input('unsupported_version'))).toMatchObject({
      error: { code: 400, status: 'INVALID_ARGUMENT' },
    });
  });

  it('metadata holds only what is present: no param, no request id → empty', () => {
    const body = generativeErrorBody(input('unknown_key', {}, '')) as {
      error: { details: { metadata: Record<string, string> }[] };
    };
    expect(body.error.details).toHaveLength(1);
    expect(body.error.details[0]!.metadata).toEqual({});
  });

  it('402: code 402, status FAILED_PRECONDITION, ErrorInfo with the reason', () => {
    expect(parsed('generative', input('credit_exhausted'))).toEqual({
      error: {
        code: 402,
        message: 'message for credit_exhausted',
        status: 'FAILED_PRECONDITION',
        details: [
          {
            '@type': 'type.googleapis.com/google.rpc.ErrorInfo',
            reason: 'credit_exhausted',
            domain: ERROR_INFO_DOMAIN,
            metadata: { request_id: 'req-123' },
          },
        ],
      },
    });
  });

  it('429: RESOURCE_EXHAUSTED; ErrorInfo.metadata names scope, window and limit (strings); RetryInfo gives the delay', () => {
    expect(parsed('generative', input('rate_limited', RATE_LIMITED))).toEqual({
      error: {
        code: 429,
        message: RATE_LIMITED.message,
        status: 'RESOURCE_EXHAUSTED',
        details: [
          {
            '@type': 'type.googleapis.com/google.rpc.ErrorInfo',
            reason: 'rate_limited',
            domain: ERROR_INFO_DOMAIN,
            metadata: { scope: 'account', window: '1m', limit: '600', request_id: 'req-123' },
          },
          { '@type': 'type.googleapis.com/google.rpc.RetryInfo', retryDelay: '26s' },
        ],
      },
    });
  });

  it.each([
    [250, '0.250s'],
    [1500, '1.500s'],
    [26_000, '26s'],
    [1, '0.001s'],
    [0.2, '0.001s'],
    [600_000, '600s'],
  ])('RetryInfo.retryDelay for %d ms is the protobuf Duration JSON %s (not capped at 60 s)', (retryAfterMs, expected) => {
    const body = generativeErrorBody(input('rate_limited', { rateLimit: { ...HIT, retryAfterMs } })) as {
      error: { details: { retryDelay?: string }[] };
    };
    expect(body.error.details[1]!.retryDelay).toBe(expected);
    expect(protoDuration(retryAfterMs)).toBe(expected);
  });

  it('RetryInfo.retryDelay is never 0s: a zero wait becomes the smallest delay', () => {
    expect(generativeErrorBody(input('rate_limited', { rateLimit: { ...HIT, retryAfterMs: 0 } }))).toMatchObject({
      error: { details: [{}, { retryDelay: '0.001s' }] },
    });
  });

  it('metadata carries the request id when there is one', () => {
    expect(generativeErrorBody(input('unknown_key', {}, 'abc'))).toMatchObject({
      error: { details: [{ metadata: { request_id: 'abc' } }] },
    });
  });
});

describe('generic style (paths outside the three client styles)', () => {
  it('has a flat object under error, with the reason as code', () => {
    expect(parsed('generic', input('malformed_key', { param: 'x-api-key' }))).toEqual({
      error: {
        status: 401,
        type: 'authentication_error',
        code: 'malformed_key',
        message: 'message for malformed_key',
        request_id: 'req-123',
      },
    });
  });

  it('402: type billing_error', () => {
    expect(parsed('generic', input('account_suspended'))).toEqual({
      error: {
        status: 402,
        type: 'billing_error',
        code: 'account_suspended',
        message: 'message for account_suspended',
        request_id: 'req-123',
      },
    });
  });

  it('429: type rate_limit_error, with rate_limit naming scope, window and limit', () => {
    expect(parsed('generic', input('rate_limited', RATE_LIMITED))).toEqual({
      error: {
        status: 429,
        type: 'rate_limit_error',
        code: 'rate_limited',
        message: RATE_LIMITED.message,
        request_id: 'req-123',
        rate_limit: { scope: 'account', window: '1m', limit: 600 },
      },
    });
  });

  it('request_id is null without a request id', () => {
    expect(genericErrorBody(input('unknown_key', {}, ''))).toMatchObject({ error: { request_id: null } });
  });
});

describe('in every style', () => {
  const reasonAt: Record<ClientStyle, (body: DenyBodyView) => unknown> = {
    chat: (body) => body.error.code,
    messages: (body) => body.error.details.error_code,
    generative: (body) => body.error.details[0]?.reason,
    generic: (body) => body.error.code,
  };

  // The exceptions: chat 429s and 404s use OpenAI's own codes (tested apart); x-gateway-error-code still carries the reason.
  const cases = STYLES.flatMap((style) => ALL_REASONS.map((reason) => [style, reason] as const)).filter(
    ([style, reason]) => !(style === 'chat' && (httpStatusOf(reason) === 429 || httpStatusOf(reason) === 404)),
  );

  it.each(cases)('%s: the reason code %s travels unchanged', (style, reason) => {
    const body = parsed(style, input(reason, reason === 'rate_limited' ? RATE_LIMITED : {}));
    expect(reasonAt[style](body as DenyBodyView)).toBe(reason);
  });

  it.each(['messages', 'generative', 'generic'] as const)(
    '%s: the 429 body names the limit that was hit (scope and window) in its structured part',
    (style) => {
      const hourly = {
        message: 'Too many requests.',
        rateLimit: { ...HIT, scope: 'key' as const, windowSeconds: 3600 },
      };
      const body = errorBodyFor(style, input('rate_limited', hourly));
      expect(body).toContain('"scope":"key"');
      expect(body).toContain('"window":"1h"');
    },
  );

  it.each(STYLES)('%s: a 429 without a known limit still has a valid body and no limit fields', (style) => {
    const body = errorBodyFor(style, input('rate_limited'));
    expect(body).not.toContain('scope');
    expect(body).not.toContain('RetryInfo');
  });

  it.each(STYLES)('%s: the customer message is passed through', (style) => {
    expect(errorBodyFor(style, input('unknown_key', { message: 'Invalid API key gk_live_AbC4….' }))).toContain(
      'Invalid API key gk_live_AbC4…',
    );
  });

  it.each(STYLES)('%s: internal detail, account id and key prefix never leak into the body', (style) => {
    const body = errorBodyFor(
      style,
      input('store_unavailable', {
        internalDetail: SECRET_DETAIL,
        accountId: ACCOUNT,
        keyPrefix: KEY_PREFIX,
        message: 'The gateway cannot verify API keys right now.',
      }),
    );
    expect(body).not.toContain('hunter2');
    expect(body).not.toContain('ECONNREFUSED');
    expect(body).not.toContain(ACCOUNT);
    expect(body).not.toContain(KEY_PREFIX);
  });

  it.each(STYLES)('%s: param carries the header name only, nothing else from the decision', (style) => {
    const body: unknown = JSON.parse(
      errorBodyFor(style, input('malformed_key', { param: 'x-api-key', keyPrefix: KEY_PREFIX, accountId: ACCOUNT })),
    );
    const params: unknown[] = [];
    JSON.stringify(body, (key, value: unknown) => {
      if (key === 'param') params.push(value);
      return value;
    });
    for (const value of params) expect(value).toBe('x-api-key');
    expect(JSON.stringify(body)).not.toContain(KEY_PREFIX);
  });
});

describe('404 model_not_priced: each style answers as its upstream answers a model it does not serve', () => {
  const MESSAGE = "The model 'mistral-large' is not offered by this gateway.";
  const notPriced = (style: ClientStyle) => parsed(style, input('model_not_priced', { message: MESSAGE }));

  it("chat: OpenAI's type invalid_request_error and code model_not_found", () => {
    expect(notPriced('chat')).toEqual({ error: { message: MESSAGE, type: 'invalid_request_error', param: null, code: 'model_not_found' } });
  });

  it("messages: Anthropic's not_found_error, the reason in details.error_code", () => {
    expect(notPriced('messages')).toEqual({
      type: 'error',
      error: { type: 'not_found_error', message: MESSAGE, details: { error_code: 'model_not_priced' } },
      request_id: 'req-123',
    });
  });

  it("generative: Google's code 404, status NOT_FOUND, the reason in ErrorInfo", () => {
    expect(notPriced('generative')).toEqual({
      error: {
        code: 404,
        message: MESSAGE,
        status: 'NOT_FOUND',
        details: [
          {
            '@type': 'type.googleapis.com/google.rpc.ErrorInfo',
            reason: 'model_not_priced',
            domain: ERROR_INFO_DOMAIN,
            metadata: { request_id: 'req-123' },
          },
        ],
      },
    });
  });

  it('generic: type not_found_error with the reason as code', () => {
    expect(notPriced('generic')).toEqual({
      error: { status: 404, type: 'not_found_error', code: 'model_not_priced', message: MESSAGE, request_id: 'req-123' },
    });
  });
});

describe('deny reasons', () => {
  it('credential problems are 401, billing 402, restrictions 403, an unpriced model or a route not enabled 404, rate limits 429, request-shape problems 400, store trouble 503', () => {
    const by = (status: number) => ALL_REASONS.filter((reason) => httpStatusOf(reason) === status).sort();
    expect(by(400)).toEqual(['malformed_model_name', 'missing_version_header', 'query_key_not_removable', 'unsupported_version']);
    expect(by(402)).toEqual(['account_suspended', 'budget_exceeded', 'credit_exhausted']);
    expect(by(403)).toEqual(['address_not_permitted', 'endpoint_not_permitted', 'model_not_permitted', 'model_not_readable']);
    expect(by(404)).toEqual(['model_not_priced', 'route_not_enabled']);
    expect(by(429)).toEqual(['rate_limited', 'token_budget_exhausted']);
    expect(by(503)).toEqual(['store_unavailable']);
    expect(by(401)).toHaveLength(ALL_REASONS.length - 16);
    expect(by(401)).toEqual(
      expect.arrayContaining([
        'missing_credential',
        'conflicting_credentials',
        'query_key_not_accepted',
        'malformed_key',
        'upstream_key_not_accepted',
      ]),
    );
  });
});

describe('restriction refusals: each style answers as its upstream answers a key lacking a permission', () => {
  const MESSAGE = 'This API key has insufficient permissions for this request. Missing permission: model.';
  const refused = (style: ClientStyle) =>
    parsed(style, {
      decision: decision('model_not_permitted', { message: MESSAGE }),
      httpStatus: httpStatusOf('model_not_permitted', style),
      requestId: 'req-123',
    });

  it("chat: 401 with OpenAI's type invalid_request_error, our reason as code", () => {
    expect(httpStatusOf('model_not_permitted', 'chat')).toBe(401);
    expect(refused('chat')).toEqual({
      error: { message: MESSAGE, type: 'invalid_request_error', param: null, code: 'model_not_permitted' },
    });
  });

  it('messages: 403 permission_error, the reason in details.error_code', () => {
    expect(httpStatusOf('model_not_permitted', 'messages')).toBe(403);
    expect(refused('messages')).toEqual({
      type: 'error',
      error: { type: 'permission_error', message: MESSAGE, details: { error_code: 'model_not_permitted' } },
      request_id: 'req-123',
    });
  });

  it('generative: 403 PERMISSION_DENIED, the reason in ErrorInfo; generic: 403 permission_error', () => {
    expect(refused('generative')).toMatchObject({
      error: { code: 403, status: 'PERMISSION_DENIED', details: [{ reason: 'model_not_permitted', domain: ERROR_INFO_DOMAIN }] },
    });
    expect(refused('generic')).toMatchObject({ error: { status: 403, type: 'permission_error', code: 'model_not_permitted' } });
  });
});
