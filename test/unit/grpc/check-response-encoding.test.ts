import type { AllowDecision, Decision, DenyDecision } from '../../../src/check/decision';
import { DENY_REASONS, type DenyReason } from '../../../src/check/deny-reasons';
import type { ClassifiedRoute, ClientStyle } from '../../../src/check/routes/route';
import { checkMethod } from '../../../src/check/authorization-server';
import { toAuthRequest, type CheckRequestMessage } from '../../../src/check/check-request';
import { encodeCheckResponse, encodeCheckResponseFrame } from '../../../src/check/check-response-encoding';
import type { UnaryCall } from '../../../src/transport/grpc-server';
import { createLogger } from '../../../src/platform/logger';
import { loadAuthorizationService } from '../../../src/check/proto-loading';
import { decide } from '../../../src/check/pipeline/decide';
import { overwrite, toCheckAnswer, type CheckResponse } from '../../../src/check/responses/check-response';
import { loadCheckRequestFixtures, materialize } from '../../support/check-request-fixtures';
import { officialCheckMethod } from '../../support/envoy-official-client';
import { fixtureWorld } from '../../support/pipeline-fixture-world';

/** protobufjs, as grpc-js would encode without the fast path. */
const generic = loadAuthorizationService().service.Check!;
/** Envoy's official protos, to read the bytes the way Envoy does. */
const official = officialCheckMethod();

const ROUTES: Record<ClientStyle, ClassifiedRoute> = {
  chat: { family: 'chat-completions', style: 'chat', pathWithoutQuery: '/v1/chat/completions' },
  messages: { family: 'messages', style: 'messages', pathWithoutQuery: '/v1/messages' },
  generative: { family: 'generative-content', style: 'generative', pathWithoutQuery: '/v1beta/models/m:generateContent' },
  generic: { family: 'other', style: 'generic', pathWithoutQuery: '/v1/files' },
};
const NOW = Date.UTC(2026, 10, 22, 12, 0, 0);

function responsesOf(decision: Decision, requestId = 'req-1'): CheckResponse[] {
  const answer = toCheckAnswer(decision, {
    requestId,
    storeFailureMode: 'deny',
    now: NOW,
    versionHeaders: ['vendora-version', 'anthropic-version'],
  });
  return answer.kind === 'response' ? [answer.response] : [];
}

function syntheticResponses(): CheckResponse[] {
  const out: CheckResponse[] = [];
  for (const style of Object.keys(ROUTES) as ClientStyle[]) {
    const route = ROUTES[style];
    for (const reason of Object.keys(DENY_REASONS) as DenyReason[]) {
      const decision: DenyDecision = {
        kind: 'deny',
        route,
        reason,
        // Non-ASCII text: the encoder must count bytes, not characters.
        message: `Invalid API key gk_live_AbC4…. Prüfen Sie den Schlüssel — ${reason} ✓`,
        keyPrefix: 'gk_live_AbC4',
        ...(reason === 'rate_limited'
          ? { rateLimit: { scope: 'account', limit: 1000, windowSeconds: 3600, remaining: 0, resetMs: 61_000, retryAfterMs: 3_600 } }
          : {}),
      };
      out.push(...responsesOf(decision), ...responsesOf(decision, ''));
    }
    const allow: AllowDecision = {
      kind: 'allow',
      route,
      identity: { accountId: 'acme-ünïcode', keyId: 'key_1', keyPrefix: 'gk_live_AbC4', environment: 'live' },
      strip: { headers: ['authorization', 'x-api-key', 'x-vendorg-api-key', 'x-goog-api-key'], queryParameters: ['key'] },
      rateLimit: { scope: 'key', limit: 600, windowSeconds: 60, remaining: 599, resetMs: 100 },
    };
    out.push(...responsesOf(allow));
    out.push(...responsesOf({ ...allow, strip: { headers: ['authorization'], queryParameters: [] } }));
    const { identity: _identity, rateLimit: _rateLimit, ...publicAllow } = allow;
    out.push(...responsesOf({ ...publicAllow, route: { ...route, family: 'public' } }));
  }
  // Either side of the length the encoder copies ASCII itself, and short text that is not ASCII.
  out.push({
    status: { code: 0, message: '' },
    ok_response: {
      headers: [overwrite('a'.repeat(64), 'b'.repeat(65)), overwrite('x-short', 'é'), overwrite('x-edge', `${'c'.repeat(63)}é`)],
      headers_to_remove: ['d'.repeat(64), 'e'.repeat(65), 'ü'],
      query_parameters_to_remove: [],
      response_headers_to_add: [overwrite('', ''), overwrite('x-emoji', '✓✓')],
    },
  });
  // Long values: multi-byte length varints.
  out.push({
    status: { code: 16, message: 'x'.repeat(300) },
    denied_response: { status: { code: 401 }, headers: [overwrite('x-long', 'v'.repeat(20_000))], body: 'b'.repeat(70_000) },
  });
  return out;
}

async function fixtureResponses(): Promise<CheckResponse[]> {
  const world = await fixtureWorld();
  const out: CheckResponse[] = [];
  for (const fixture of loadCheckRequestFixtures()) {
    const message = materialize(fixture.check_request, world.secrets) as CheckRequestMessage;
    out.push(...responsesOf(await decide(toAuthRequest(message), world.deps)));
  }
  return out;
}

describe('fast CheckResponse encoding', () => {
  it('gives the same bytes as protobufjs for every kind of answer, and Envoy reads the same message', async () => {
    const responses = [...syntheticResponses(), ...(await fixtureResponses())];
    expect(responses.length).toBeGreaterThan(100);
    for (const response of responses) {
      const fast = encodeCheckResponse(response);
      expect(fast).toBeDefined();
      const reference = generic.responseSerialize(response);
      expect(Buffer.compare(fast!, reference)).toBe(0);
      expect(official.responseDeserialize(fast!)).toEqual(official.responseDeserialize(reference));
    }
  });

  it('leaves anything outside the known shape to protobufjs', () => {
    const odd = [
      {},
      { status: { code: 0, message: '' } },
      {
        status: { code: -1, message: '' },
        ok_response: { headers: [], headers_to_remove: [], query_parameters_to_remove: [], response_headers_to_add: [] },
      },
      {
        status: { code: 0, message: '' },
        ok_response: {
          headers: [{ header: { key: 'a' } }],
          headers_to_remove: [],
          query_parameters_to_remove: [],
          response_headers_to_add: [],
        },
      },
      {
        status: { code: 0, message: '' },
        ok_response: { headers: [], headers_to_remove: [7], query_parameters_to_remove: [], response_headers_to_add: [] },
      },
    ];
    for (const response of odd) expect(encodeCheckResponse(response as unknown as CheckResponse)).toBeUndefined();
    const withUnknownAction = {
      status: { code: 0, message: '' },
      ok_response: {
        headers: [{ header: { key: 'a', value: 'b' }, append_action: 'ADD_IF_ABSENT' }],
        headers_to_remove: [],
        query_parameters_to_remove: [],
        response_headers_to_add: [],
      },
    };
    // Without `append` and with another action: the same bytes either way, as a gRPC frame.
    expect(Buffer.compare(answerFrame(withUnknownAction), frameOf(generic.responseSerialize(withUnknownAction)))).toBe(0);
    // Outside the shape: protobufjs's bytes.
    const odd3 = odd[3]!;
    expect(() => generic.responseSerialize(odd3)).not.toThrow();
    expect(Buffer.compare(answerFrame(odd3), frameOf(generic.responseSerialize(odd3)))).toBe(0);
  });

  it('is what the server writes: the fast bytes in one length-prefixed frame', () => {
    for (const response of syntheticResponses()) {
      const frame = answerFrame(response);
      expect(Buffer.compare(frame, frameOf(encodeCheckResponse(response)!))).toBe(0);
      expect(Buffer.compare(frame, encodeCheckResponseFrame(response)!)).toBe(0);
    }
  });
});

function frameOf(message: Buffer): Buffer {
  const prefix = Buffer.alloc(5);
  prefix.writeUInt32BE(message.length, 1);
  return Buffer.concat([prefix, message]);
}

/** The frame the server's Check method writes for a handler that answers `response`. */
function answerFrame(response: object): Buffer {
  const method = checkMethod((_request, _deadline, reply) => reply(null, response as CheckResponse), createLogger('silent'));
  let written: Buffer | undefined;
  const call = {
    deadlineMs: Infinity,
    finished: false,
    metadata: undefined,
    respond: (frame) => (written = frame),
    fail: () => undefined,
  } as UnaryCall;
  if (method.kind !== 'unary') throw new Error('Check is unary');
  method.handle(Buffer.alloc(0), call);
  if (!written) throw new Error('no answer written');
  return written;
}
