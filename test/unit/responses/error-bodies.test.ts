import type { DenyDecision } from '../../../src/domain/decision';
import { DENY_REASONS, httpStatusOf, type DenyReason } from '../../../src/domain/deny-reasons';
import type { ClientStyle } from '../../../src/domain/route';
import { chatErrorBody } from '../../../src/responses/error-bodies/chat-error-body';
import { ERROR_INFO_DOMAIN, generativeErrorBody } from '../../../src/responses/error-bodies/generative-error-body';
import { genericErrorBody } from '../../../src/responses/error-bodies/generic-error-body';
import { errorBodyFor, type ErrorBodyInput } from '../../../src/responses/error-bodies';
import { messagesErrorBody } from '../../../src/responses/error-bodies/messages-error-body';

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

  it('request_id is null without a request id', () => {
    expect(genericErrorBody(input('unknown_key', {}, ''))).toMatchObject({ error: { request_id: null } });
  });
});

describe('in every style', () => {
  const reasonAt: Record<ClientStyle, (body: any) => unknown> = {
    chat: (body) => body.error.code,
    messages: (body) => body.error.details.error_code,
    generative: (body) => body.error.details[0].reason,
    generic: (body) => body.error.code,
  };

  const cases = STYLES.flatMap((style) => ALL_REASONS.map((reason) => [style, reason] as const));

  it.each(cases)('%s: the reason code %s travels unchanged', (style, reason) => {
    const body = parsed(style, input(reason));
    expect(reasonAt[style](body)).toBe(reason);
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
    const body = JSON.parse(
      errorBodyFor(style, input('malformed_key', { param: 'x-api-key', keyPrefix: KEY_PREFIX, accountId: ACCOUNT })),
    );
    const params: unknown[] = [];
    JSON.stringify(body, (key, value) => {
      if (key === 'param') params.push(value);
      return value;
    });
    for (const value of params) expect(value).toBe('x-api-key');
    expect(JSON.stringify(body)).not.toContain(KEY_PREFIX);
  });
});

describe('deny reasons', () => {
  it('credential problems are 401, request-shape problems 400, store trouble 503', () => {
    const by = (status: number) => ALL_REASONS.filter((reason) => httpStatusOf(reason) === status).sort();
    expect(by(400)).toEqual(['missing_version_header', 'unsupported_version']);
    expect(by(503)).toEqual(['store_unavailable']);
    expect(by(401)).toHaveLength(ALL_REASONS.length - 3);
    expect(by(401)).toEqual(
      expect.arrayContaining(['missing_credential', 'conflicting_credentials', 'query_key_not_accepted', 'malformed_key', 'upstream_key_not_accepted']),
    );
  });
});
