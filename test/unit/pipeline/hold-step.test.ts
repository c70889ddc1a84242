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

describe('holdFor: the output limit a body names', () => {
  function withBody(path: string, body: unknown): AuthRequest {
    const bytes = Buffer.from(JSON.stringify(body));
    return { method: 'POST', path, headers: { 'content-length': '400' }, requestId: 'req-1', body: bytes };
  }
  const chat = route('chat-completions', 'chat', '/v1/chat/completions');
  const messages = route('messages', 'messages', '/v1/messages');
  const gemini = route('generative-content', 'generative', '/v1beta/models/gemini-2.5-flash:generateContent');

  // vLLM and SGLang take max_completion_tokens over max_tokens: a hold from the first field named would be 1 token.
  it.each([
    [{ max_tokens: 1, max_completion_tokens: 100_000 }, 100_000],
    [{ max_completion_tokens: 100_000, max_tokens: 1 }, 100_000],
    [{ max_tokens: 700, max_output_tokens: 900 }, 900],
    [{ max_tokens: 'lots', max_completion_tokens: 50 }, 50],
  ])('chat completions hold at the largest limit %j names', (body, limit) => {
    expect(holdFor(withBody('/v1/chat/completions', body), chat, undefined)).toMatchObject({ tokens: 100 + limit });
  });

  it('a field the family never reads is no limit: the default holds', () => {
    const geminiBody = { max_tokens: 1, generationConfig: {} };
    expect(holdFor(withBody(gemini.pathWithoutQuery, geminiBody), gemini, undefined)).toMatchObject({ tokens: 100 + 4096 });
    const messagesBody = { max_tokens: 300, max_completion_tokens: 1, generationConfig: { maxOutputTokens: 9 } };
    expect(holdFor(withBody('/v1/messages', messagesBody), messages, undefined)).toMatchObject({ tokens: 100 + 300 });
    expect(holdFor(withBody(gemini.pathWithoutQuery, { generationConfig: { maxOutputTokens: 64 } }), gemini, undefined)).toMatchObject({
      tokens: 100 + 64,
    });
  });
});
