import { classifyFamily, routingPath } from '../../../src/check/routes/classify';
import { buildRouteTable } from '../../../src/check/routes/route-table';

/**
 * envoy.yaml sends every path to the same upstream: `path_separated_prefix`
 * routes match `/v1/messages/` as well as `/v1/messages`, and the exact chat
 * routes fall through to the catch-all, which forwards too. An upstream treats
 * a trailing slash, `//`, dot segments and percent-encoded letters as the same
 * path, so such variants must get the family's own rules, never the weaker
 * "other" ones (any header, no version header).
 */
const DEFAULTS = buildRouteTable({}, []);

describe('path variants get their family', () => {
  it.each([
    ['POST', '/v1/messages/', 'messages'],
    ['POST', '/v1/messages//', 'messages'],
    ['POST', '/v1/messages/count_tokens/', 'messages'],
    ['POST', '/v1/messages/batches/', 'messages'],
    ['POST', '/v1//messages', 'messages'],
    ['POST', '//v1/messages', 'messages'],
    ['POST', '/v1/./messages', 'messages'],
    ['POST', '/v1/x/../messages', 'messages'],
    ['POST', '/v1/%2e/messages', 'messages'],
    ['POST', '/v1/m%65ssages', 'messages'],
    ['POST', '/v1/chat/completions/', 'chat-completions'],
    ['POST', '/v1/chat//completions', 'chat-completions'],
    ['POST', '/v1/completions/', 'chat-completions'],
    ['POST', '/v1/embeddings/', 'chat-completions'],
    ['POST', '/v1/responses/', 'chat-completions'],
    ['POST', '/v1beta/openai/', 'other'], // the compatible endpoint's routes are named one by one
    ['POST', '/v1beta/openai//chat/completions', 'chat-completions'],
    ['POST', '/v1beta/models/gemini-2.0-flash:generateContent/', 'generative-content'],
    ['POST', '/v1//models/gemini-2.0-flash:streamGenerateContent', 'generative-content'],
    ['POST', '/v1beta/models/gemini-2.0-flash%3AgenerateContent', 'other'], // ':' is reserved: %3A is not decoded (Envoy does not either)
    ['GET', '/v1/models/', 'models'],
    ['GET', '/v1beta/models/gemini-1.5-pro/', 'models'],
    ['GET', '/v1//models', 'models'],
  ])('%s %s → %s', (method, path, family) => {
    expect(classifyFamily(DEFAULTS, method, path)).toBe(family);
  });

  it.each([
    ['POST', '/V1/MESSAGES/'], // paths are case-sensitive, in Envoy's routes too
    ['POST', '/v1/messagesx/'],
    ['POST', '/v1/messages/count_tokens/extra/'],
    ['POST', '/v1/models/'], // models is GET only
    ['GET', '/v1/models/a/b/'],
    ['POST', '/v1/chat/completions/../../unlisted'],
  ])('%s %s stays "other" (still needs a key)', (method, path) => {
    expect(classifyFamily(DEFAULTS, method, path)).toBe('other');
  });

  it('an operator route gets its variants too', () => {
    const table = buildRouteTable({ 'chat-completions': [{ exact: '/openai/v1/chat/completions' }] }, []);
    expect(classifyFamily(table, 'POST', '/openai/v1/chat/completions/')).toBe('chat-completions');
    expect(classifyFamily(table, 'POST', '/openai//v1/chat/completions')).toBe('chat-completions');
  });

  it('never turns a variant into a public route', () => {
    const table = buildRouteTable({}, [{ exact: '/healthz' }]);
    expect(classifyFamily(table, 'GET', '/healthz')).toBe('public');
    for (const path of ['/healthz/', '//healthz', '/x/../healthz', '/h%65althz']) expect(classifyFamily(table, 'GET', path)).toBe('other');
  });
});

describe('routingPath', () => {
  it('returns a normal path unchanged (the same string)', () => {
    for (const path of ['/v1/messages', '/v1/chat/completions', '/', '/v1beta/models/gemini-pro:generateContent']) {
      expect(routingPath(path)).toBe(path);
    }
  });

  it('merges slashes, resolves dot segments, decodes unreserved escapes and drops a trailing slash', () => {
    expect(routingPath('/v1//messages/')).toBe('/v1/messages');
    expect(routingPath('/a/b/../c/./d')).toBe('/a/c/d');
    expect(routingPath('/../a')).toBe('/a');
    expect(routingPath('/%61%2D%5F%7E%2e')).toBe('/a-_~.');
    expect(routingPath('/a%2Fb%3A%25')).toBe('/a%2Fb%3A%25');
    expect(routingPath('//')).toBe('/');
  });
});
