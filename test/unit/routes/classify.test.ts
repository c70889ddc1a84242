import { classifyFamily, isCanonicalPath, splitPathAndQuery } from '../../../src/check/routes/classify';
import { FAMILY_HEADER_RULES, rulesForModelsRoute } from '../../../src/check/routes/family-header-rules';
import { headerNamesFor } from '../../../src/check/routes/header-names';
import { DEFAULT_ROUTE_SPECS, KEYED_FAMILIES, buildRouteTable, compilePathMatcher } from '../../../src/check/routes/route-table';

const DEFAULTS = buildRouteTable({}, []);

/** Classifies a request target (path plus query) the way the pipeline does. */
function classify(method: string, target: string, table = DEFAULTS) {
  return classifyFamily(table, method, splitPathAndQuery(target).path);
}

const GENERATIVE_METHODS = ['generateContent', 'streamGenerateContent', 'countTokens', 'embedContent', 'batchEmbedContents'];

describe('default routes', () => {
  it.each([
    '/v1/chat/completions',
    '/v1/completions',
    '/v1/embeddings',
    '/v1/responses',
    '/v1/responses/compact',
    '/v1/responses/input_tokens',
    '/v1/responses/resp_123/cancel',
    '/v1beta/openai/chat/completions',
    '/v1beta/openai/embeddings',
  ])('POST %s is chat-completions', (path) => {
    expect(classify('POST', path)).toBe('chat-completions');
  });

  it('stored responses and the compatible model list are chat-completions to read, and no route to POST to', () => {
    for (const path of ['/v1/responses/resp_123', '/v1/responses/resp_123/input_items', '/v1beta/openai/models']) {
      expect(classify('GET', path)).toBe('chat-completions');
    }
    expect(classify('DELETE', '/v1/responses/resp_123')).toBe('chat-completions');
    expect(classify('POST', '/v1/responses/resp_123')).toBe('other');
    expect(classify('POST', '/v1beta/openai/images/generations')).toBe('other');
  });

  it.each([
    '/v1/messages',
    '/v1/messages/count_tokens',
    '/v1/messages/batches',
    '/v1/messages/batches/msgbatch_01',
    '/v1/messages/batches/msgbatch_01/results',
  ])('POST %s is messages', (path) => {
    expect(classify('POST', path)).toBe('messages');
  });

  const generativePaths = ['v1beta', 'v1'].flatMap((version) =>
    GENERATIVE_METHODS.map((verb) => `/${version}/models/gemini-2.0-flash:${verb}`),
  );
  it.each(generativePaths)('POST %s is generative-content', (path) => {
    expect(classify('POST', path)).toBe('generative-content');
  });

  it.each(['/v1/models', '/v1/models/gpt-4o', '/v1beta/models', '/v1beta/models/gemini-1.5-pro'])('GET %s is models', (path) => {
    expect(classify('GET', path)).toBe('models');
    expect(classify('get', path)).toBe('models');
  });

  it('the default table has exactly these families, in this order', () => {
    expect(KEYED_FAMILIES).toEqual(['messages', 'chat-completions', 'generative-content', 'models']);
    expect(Object.keys(DEFAULT_ROUTE_SPECS).sort()).toEqual([...KEYED_FAMILIES].sort());
    expect(DEFAULTS.families.map((entry) => entry.family)).toEqual(KEYED_FAMILIES);
  });

  it('there are no public routes by default', () => {
    expect(DEFAULTS.publicRoutes).toEqual([]);
    expect(classify('GET', '/health')).toBe('other');
    expect(classify('GET', '/')).toBe('other');
  });
});

// Trailing slashes, `//`, dot segments and encoded letters reach the same upstream path: test/unit/routes/path-variants.test.ts.
describe('paths that are not a known route are "other" (a key is still required)', () => {
  it.each([
    ['POST', '/v1/chat'],
    ['POST', '/v2/chat/completions'],
    ['POST', '/V1/CHAT/COMPLETIONS'],
    ['POST', '/v1/messages/count_tokens/extra'],
    ['POST', '/v1/messagesx'],
    ['POST', '/v1/models/gemini:unknownMethod'],
    ['POST', '/v2/models/gemini:generateContent'],
    ['POST', '/v1beta/models/a/b:generateContent'],
    ['POST', '/v1beta/tunedModels/x:generateContent'],
    ['POST', '/v1/models/gemini:generateContent/extra'],
    ['POST', '/v1/models'],
    ['DELETE', '/v1/models/gpt-4o'],
    ['GET', '/v1/models/a/b'],
    ['GET', '/admin/accounts'],
    ['GET', ''],
  ])('%s %s', (method, path) => {
    expect(classify(method, path)).toBe('other');
  });
});

describe('query strings and fragments are ignored when matching', () => {
  it.each([
    ['POST', '/v1/chat/completions?stream=true', 'chat-completions'],
    ['POST', '/v1/messages?beta=true', 'messages'],
    ['POST', '/v1/messages/count_tokens?x=/v1/chat', 'messages'],
    ['POST', '/v1beta/models/gemini-pro:streamGenerateContent?alt=sse&key=abc', 'generative-content'],
    ['GET', '/v1/models?limit=20', 'models'],
    ['POST', '/v1/chat/completions#frag', 'chat-completions'],
    ['POST', '/v1/chat/completions?a=1#frag', 'chat-completions'],
    ['POST', '/v1/unknown?path=/v1/chat/completions', 'other'],
  ])('%s %s → %s', (method, target, family) => {
    expect(classify(method, target)).toBe(family);
  });

  it('splitPathAndQuery separates the path, the query and drops the fragment', () => {
    expect(splitPathAndQuery('/a/b?x=1&y=2')).toEqual({ path: '/a/b', query: 'x=1&y=2' });
    expect(splitPathAndQuery('/a/b')).toEqual({ path: '/a/b', query: '' });
    expect(splitPathAndQuery('/a/b?')).toEqual({ path: '/a/b', query: '' });
    expect(splitPathAndQuery('/a?x=1?y=2')).toEqual({ path: '/a', query: 'x=1?y=2' });
    expect(splitPathAndQuery('/a#f?x=1')).toEqual({ path: '/a', query: '' });
    expect(splitPathAndQuery('/a?x=1#f')).toEqual({ path: '/a', query: 'x=1' });
  });
});

describe('models route: method and style rules', () => {
  const names = headerNamesFor(true);
  const specOnly = headerNamesFor(false);

  it('only GET is the models route', () => {
    for (const method of ['POST', 'PUT', 'DELETE', 'PATCH', 'HEAD']) {
      expect(classify(method, '/v1/models')).toBe('other');
    }
  });

  it.each(['vendora-version', 'anthropic-version'])('a %s header makes it messages style', (header) => {
    expect(rulesForModelsRoute({ [header]: '2023-06-01' }, '/v1/models', names)).toBe(FAMILY_HEADER_RULES.messages);
  });

  it.each(['x-vendorg-api-key', 'x-goog-api-key'])('a %s header makes it generative style', (header) => {
    expect(rulesForModelsRoute({ [header]: 'k' }, '/v1/models', names)).toBe(FAMILY_HEADER_RULES['generative-content']);
  });

  it('a /v1beta/ path makes it generative style even without headers', () => {
    expect(rulesForModelsRoute({}, '/v1beta/models', names).style).toBe('generative');
    expect(rulesForModelsRoute({}, '/v1beta/models/gemini-pro', names).style).toBe('generative');
  });

  it('the version header wins over a generative key header', () => {
    const rules = rulesForModelsRoute({ 'anthropic-version': '2023-06-01', 'x-goog-api-key': 'k' }, '/v1beta/models', names);
    expect(rules.style).toBe('messages');
  });

  it('anything else is chat style, accepting every credential header and no version header', () => {
    const rules = rulesForModelsRoute({ authorization: 'Bearer k', 'x-api-key': 'k' }, '/v1/models', names);
    expect(rules.style).toBe('chat');
    expect([...rules.credentialSources].sort()).toEqual(['authorization-bearer', 'vendorg-api-key', 'x-api-key']);
    expect(rules.requiresVersionHeader).toBe(false);
    expect(rules.queryKeyAllowed).toBe(false);
  });

  it('does not change the shared chat-completions rules when widening the credential sources', () => {
    rulesForModelsRoute({}, '/v1/models', names);
    expect(FAMILY_HEADER_RULES['chat-completions'].credentialSources).toEqual(['authorization-bearer']);
  });

  it('with spec-only spellings, the vendor spellings do not set the style', () => {
    expect(rulesForModelsRoute({ 'anthropic-version': '2023-06-01' }, '/v1/models', specOnly).style).toBe('chat');
    expect(rulesForModelsRoute({ 'x-goog-api-key': 'k' }, '/v1/models', specOnly).style).toBe('chat');
    expect(rulesForModelsRoute({ 'vendora-version': '2023-06-01' }, '/v1/models', specOnly).style).toBe('messages');
    expect(rulesForModelsRoute({ 'x-vendorg-api-key': 'k' }, '/v1/models', specOnly).style).toBe('generative');
  });
});

describe('public routes', () => {
  const table = buildRouteTable({}, [{ exact: '/health' }, { prefix: '/public/' }, { regex: '^/status/[a-z]+$', methods: ['GET'] }]);

  it.each([
    ['GET', '/health'],
    ['HEAD', '/health'],
    ['GET', '/health?verbose=1'],
    ['GET', '/public/docs/index.html'],
    ['GET', '/status/ok'],
    ['get', '/status/ok'],
  ])('%s %s is public when the operator lists it', (method, target) => {
    expect(classify(method, target, table)).toBe('public');
  });

  it('a public regex route limited to GET is not public for POST', () => {
    expect(classify('POST', '/status/ok', table)).toBe('other');
  });

  it('listing public routes does not make anything else public', () => {
    expect(classify('GET', '/healthz', table)).toBe('other');
    expect(classify('POST', '/v1/chat/completions', table)).toBe('chat-completions');
  });

  it.each([
    ['doubled slash', '/public//v1/chat/completions'],
    ['leading doubled slash', '//health'],
    ['dot-dot segment', '/public/../v1/chat/completions'],
    ['dot segment', '/public/./x'],
    ['trailing dot-dot', '/public/x/..'],
    ['encoded slash', '/public/a%2Fb'],
    ['encoded slash, lower case', '/public/a%2fb'],
    ['encoded backslash', '/public/a%5Cb'],
    ['encoded dot-dot', '/public/%2e%2e/v1/chat/completions'],
    ['encoded dot, upper case', '/public/%2E/x'],
    ['backslash', '/public/..\\v1\\chat\\completions'],
    ['backslash in segment', '/public/a\\b'],
  ])('a non-canonical path (%s) is never public: %s', (_label, path) => {
    expect(isCanonicalPath(path)).toBe(false);
    expect(classify('GET', path, table)).not.toBe('public');
  });

  it('a non-canonical path that would match a keyed route is not made public by the public list, and gets the family the upstream will see', () => {
    expect(classify('POST', '/public/../v1/messages', table)).toBe('messages');
  });

  it('a regex public route that would accept tricks still refuses them', () => {
    const loose = buildRouteTable({}, [{ regex: '^/open' }]);
    expect(classify('GET', '/open/x', loose)).toBe('public');
    expect(classify('GET', '/open/../v1/chat/completions', loose)).toBe('chat-completions');
    expect(classify('POST', '/open/%2e%2e/v1/messages', loose)).toBe('messages');
    expect(classify('GET', '/open/../v1/unlisted', loose)).toBe('other');
  });

  it.each(['/health', '/public/a/b', '/v1/models/gemini-1.5-pro', '/a.b/c..d/...'])('canonical: %s', (path) => {
    expect(isCanonicalPath(path)).toBe(true);
  });

  it('a path not starting with / is not canonical', () => {
    expect(isCanonicalPath('health')).toBe(false);
    expect(isCanonicalPath('')).toBe(false);
  });
});

describe('config overrides', () => {
  it('replace the defaults of the overridden family', () => {
    const table = buildRouteTable({ 'chat-completions': [{ exact: '/openai/v1/chat/completions' }] }, []);
    expect(classify('POST', '/openai/v1/chat/completions', table)).toBe('chat-completions');
    expect(classify('POST', '/v1/chat/completions', table)).toBe('other');
    expect(classify('POST', '/v1/embeddings', table)).toBe('other');
  });

  it('leave the other families at their defaults', () => {
    const table = buildRouteTable({ messages: [{ prefix: '/anthropic/' }] }, []);
    expect(classify('POST', '/anthropic/v1/messages', table)).toBe('messages');
    expect(classify('POST', '/v1/messages', table)).toBe('other');
    expect(classify('POST', '/v1/chat/completions', table)).toBe('chat-completions');
    expect(classify('POST', '/v1/models/g:generateContent', table)).toBe('generative-content');
    expect(classify('GET', '/v1/models', table)).toBe('models');
  });

  it('can restrict methods', () => {
    const table = buildRouteTable({ models: [{ exact: '/v1/models', methods: ['get', 'HEAD'] }] }, []);
    expect(classify('GET', '/v1/models', table)).toBe('models');
    expect(classify('HEAD', '/v1/models', table)).toBe('models');
    expect(classify('POST', '/v1/models', table)).toBe('other');
    expect(classify('GET', '/v1/models/gpt-4o', table)).toBe('other');
  });

  it('the first family in table order wins when two families match', () => {
    const table = buildRouteTable({ 'chat-completions': [{ prefix: '/v1/' }] }, []);
    expect(classify('POST', '/v1/messages', table)).toBe('messages'); // messages is checked first
    expect(classify('POST', '/v1/anything', table)).toBe('chat-completions');
  });

  it('a public route is checked before keyed families', () => {
    const table = buildRouteTable({}, [{ exact: '/v1/models', methods: ['GET'] }]);
    expect(classify('GET', '/v1/models', table)).toBe('public');
    expect(classify('GET', '/v1/models/x', table)).toBe('models');
  });
});

describe('compilePathMatcher', () => {
  it('matches exact, prefix and regex specs as stated', () => {
    expect(compilePathMatcher({ exact: '/a' }).matches('GET', '/a')).toBe(true);
    expect(compilePathMatcher({ exact: '/a' }).matches('GET', '/a/')).toBe(false);
    expect(compilePathMatcher({ prefix: '/a/' }).matches('GET', '/a/b')).toBe(true);
    expect(compilePathMatcher({ prefix: '/a/' }).matches('GET', '/ab')).toBe(false);
    expect(compilePathMatcher({ regex: '^/a/\\d+$' }).matches('GET', '/a/12')).toBe(true);
    expect(compilePathMatcher({ regex: '^/a/\\d+$' }).matches('GET', '/a/x')).toBe(false);
  });

  it('describes itself', () => {
    expect(compilePathMatcher({ prefix: '/p/' }).describe).toBe('prefix /p/');
  });

  it('refuses a spec with none of exact, prefix or regex', () => {
    expect(() => compilePathMatcher({ methods: ['GET'] })).toThrow(/exact, prefix or regex/);
  });
});

describe('further path tricks are never canonical', () => {
  it.each(['/public/..;/v1/chat/completions', '/public/%252e%252e/v1/chat/completions', '/public;x=1'])('%s', (path) => {
    expect(isCanonicalPath(path)).toBe(false);
  });
});
