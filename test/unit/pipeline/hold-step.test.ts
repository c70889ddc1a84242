import type { AuthRequest } from '../../../src/check/auth-request';
import type { ClassifiedRoute } from '../../../src/check/routes/route';
import { holdFor } from '../../../src/check/pipeline/hold-step';

/**
 * A Check holds only for a request metering will charge: a hold that no usage record releases would stand until it
 * lapses (11 minutes), refusing a prepaid account's next requests meanwhile.
 */
function request(method: string, path: string): AuthRequest {
  return { method, path, headers: { 'content-length': '400' }, requestId: 'req-1' };
}

const route = (family: ClassifiedRoute['family'], style: ClassifiedRoute['style'], path: string): ClassifiedRoute => ({
  family,
  style,
  pathWithoutQuery: path,
});

describe('holdFor', () => {
  it.each([
    ['POST', '/v1/chat/completions', 'chat-completions', 'chat'],
    ['POST', '/v1/messages', 'messages', 'messages'],
    ['POST', '/v1beta/models/gemini-2.5-flash:generateContent', 'generative-content', 'generative'],
  ] as const)('holds for %s %s, which metering charges', (method, path, family, style) => {
    const hold = holdFor(request(method, path), route(family, style, path), undefined);
    expect(hold).toMatchObject({ requestId: 'req-1', tokens: 100 + 4096 });
  });

  it.each([
    ['POST', '/v1/messages/count_tokens', 'messages', 'messages'],
    ['GET', '/v1/responses/resp_123', 'chat-completions', 'chat'],
    ['POST', '/v1/chat/completions/chatcmpl_1', 'chat-completions', 'chat'],
    ['POST', '/v1beta/models/gemini-2.5-flash:countTokens', 'generative-content', 'generative'],
  ] as const)('holds nothing for %s %s, which no usage record will release', (method, path, family, style) => {
    expect(holdFor(request(method, path), route(family, style, path), undefined)).toBeUndefined();
  });
});
