/**
 * docs/concepts/routes-and-credentials.md: "Route families and their header rules" and "Credentials",
 * driven end to end with plain HTTP (curl-like raw header lines) through the
 * Envoy front: gateway-authz over real gRPC with a real Redis, and the fake
 * upstream recording exactly what got through.
 */
import { randomInt } from 'node:crypto';

import { sendHttp, type HttpCall, type HttpReply } from './envoy-front';
import { startE2EWorld, type E2EWorld } from './e2e-world';
import { registerSecrets } from '../support/secret-scan';
import type { DenyBodyView } from '../support/deny-body';

const ACCOUNT = 'acct_routes';
const CREDENTIAL_HEADERS = ['authorization', 'x-api-key', 'x-vendorg-api-key', 'x-goog-api-key'];

let world: E2EWorld;
let key: string;
let keyId: string;
let otherKey: string;

beforeAll(async () => {
  // Paths no route names are refused by default (test/integration/gated-routes-at-check.test.ts); enabled here, so their
  // header rules (family `other`) are driven end to end too.
  world = await startE2EWorld({ config: { enabledRoutes: ['unlisted'] } });
  ({ key, keyId } = await world.newKey(ACCOUNT, { name: 'route tables' }));
  ({ key: otherKey } = await world.newKey(ACCOUNT, { name: 'route tables, second key' }));
});

afterAll(async () => {
  await world?.close();
});

beforeEach(() => {
  world.upstream.requests.length = 0;
});

function send(call: HttpCall): Promise<HttpReply> {
  return sendHttp(world.url, call);
}

// ---------------------------------------------------------------------------
// Credential headers, by name

interface Credential {
  name: string;
  headers(key: string): Record<string, string>;
}

const BEARER: Credential = { name: 'Authorization: Bearer', headers: (k) => ({ authorization: `Bearer ${k}` }) };
const X_API_KEY: Credential = { name: 'x-api-key', headers: (k) => ({ 'x-api-key': k }) };
const X_VENDORG_API_KEY: Credential = { name: 'x-vendorg-api-key', headers: (k) => ({ 'x-vendorg-api-key': k }) };
const X_GOOG_API_KEY: Credential = { name: 'x-goog-api-key', headers: (k) => ({ 'x-goog-api-key': k }) };

type Style = 'chat' | 'messages' | 'generative' | 'generic';

/** Every denial: the status, JSON content type, the reason in x-gateway-error-code and in the style's own field. */
function expectDenial(reply: HttpReply, status: number, reason: string, style: Style): void {
  expect({ status: reply.status, contentType: reply.headers['content-type'], code: reply.headers['x-gateway-error-code'] }).toEqual({
    status,
    contentType: 'application/json',
    code: reason,
  });
  const body = reply.json as DenyBodyView;
  switch (style) {
    case 'chat':
      expect(Object.keys(body.error).sort()).toEqual(['code', 'message', 'param', 'type']);
      expect(body.error.code).toBe(reason);
      break;
    case 'messages':
      expect(body.type).toBe('error');
      expect(body.error.details.error_code).toBe(reason);
      expect(body.request_id).toBe(reply.headers['x-request-id']);
      break;
    case 'generative':
      expect(body.error.code).toBe(status);
      expect(body.error.details[0]).toMatchObject({ '@type': 'type.googleapis.com/google.rpc.ErrorInfo', reason });
      break;
    case 'generic':
      expect(body.error).toMatchObject({ status, code: reason });
      break;
  }
  expect(typeof body.error.message).toBe('string');
  expect(world.upstream.requests).toHaveLength(0);
}

/** What the upstream must see of an allowed request. */
function expectForwarded(family: string): void {
  expect(world.upstream.requests).toHaveLength(1);
  const headers = world.upstream.requests[0]!.headers;
  for (const name of CREDENTIAL_HEADERS) expect(headers[name]).toBeUndefined();
  expect(headers).toMatchObject({
    'x-gateway-account-id': ACCOUNT,
    'x-gateway-key-id': keyId,
    'x-gateway-key-prefix': key.slice(0, 12),
    'x-gateway-route-family': family,
  });
  expect(world.upstream.requests[0]!.body).not.toContain(key);
}

// ---------------------------------------------------------------------------
// The route table

interface Call {
  method: 'GET' | 'POST';
  path: string;
  body?: object;
}

interface FamilyRow {
  /** Row label: the family and, for models, which rules the headers select. */
  label: string;
  family: string;
  style: Style;
  calls: Call[];
  /** Headers the family needs besides the credential. */
  extra: Record<string, string>;
  accepted: Credential[];
  notAccepted: Credential[];
  /** What the fake upstream answers (other paths reach it, and it knows none of them). */
  upstreamStatus: number;
}

const CHAT_BODY = { model: 'gpt-x', messages: [{ role: 'user', content: 'hi' }] };
const MESSAGES_BODY = { model: 'claude-x', max_tokens: 1, messages: [{ role: 'user', content: 'hi' }] };
const GEMINI_BODY = { contents: [{ role: 'user', parts: [{ text: 'hi' }] }] };

const ROUTE_TABLE: FamilyRow[] = [
  {
    label: 'chat-completions',
    family: 'chat-completions',
    style: 'chat',
    calls: [
      { method: 'POST', path: '/v1/chat/completions', body: CHAT_BODY },
      { method: 'POST', path: '/v1/completions', body: { model: 'gpt-x', prompt: 'hi' } },
      { method: 'POST', path: '/v1/embeddings', body: { model: 'emb-x', input: 'hi' } },
      { method: 'POST', path: '/v1/responses', body: { model: 'gpt-x', input: 'hi' } },
      { method: 'GET', path: '/v1/responses/resp_1' },
      { method: 'POST', path: '/v1beta/openai/chat/completions', body: CHAT_BODY },
    ],
    extra: {},
    accepted: [BEARER],
    notAccepted: [X_API_KEY, X_VENDORG_API_KEY, X_GOOG_API_KEY],
    upstreamStatus: 200,
  },
  {
    label: 'messages',
    family: 'messages',
    style: 'messages',
    calls: [
      { method: 'POST', path: '/v1/messages', body: MESSAGES_BODY },
      { method: 'POST', path: '/v1/messages/count_tokens', body: MESSAGES_BODY },
    ],
    extra: { 'anthropic-version': '2023-06-01' },
    accepted: [X_API_KEY, BEARER],
    notAccepted: [X_VENDORG_API_KEY, X_GOOG_API_KEY],
    upstreamStatus: 200,
  },
  {
    label: 'generative-content',
    family: 'generative-content',
    style: 'generative',
    calls: [
      { method: 'POST', path: '/v1beta/models/gemini-x:generateContent', body: GEMINI_BODY },
      { method: 'POST', path: '/v1beta/models/gemini-x:streamGenerateContent?alt=sse', body: GEMINI_BODY },
      { method: 'POST', path: '/v1beta/models/gemini-x:countTokens', body: GEMINI_BODY },
      { method: 'POST', path: '/v1beta/models/emb-x:embedContent', body: { content: { parts: [{ text: 'hi' }] } } },
      { method: 'POST', path: '/v1beta/models/emb-x:batchEmbedContents', body: { requests: [] } },
      { method: 'POST', path: '/v1/models/gemini-x:generateContent', body: GEMINI_BODY },
    ],
    extra: {},
    accepted: [X_VENDORG_API_KEY, X_GOOG_API_KEY, BEARER, X_API_KEY],
    notAccepted: [],
    upstreamStatus: 200,
  },
  {
    label: 'models, no style header (chat rules: any header)',
    family: 'models',
    style: 'chat',
    calls: [
      { method: 'GET', path: '/v1/models' },
      { method: 'GET', path: '/v1/models/gpt-x' },
    ],
    extra: {},
    accepted: [BEARER, X_API_KEY],
    notAccepted: [],
    upstreamStatus: 200,
  },
  {
    label: 'models with a version header (messages rules)',
    family: 'models',
    style: 'messages',
    calls: [
      { method: 'GET', path: '/v1/models' },
      { method: 'GET', path: '/v1/models/claude-x' },
    ],
    extra: { 'anthropic-version': '2023-06-01' },
    accepted: [X_API_KEY, BEARER],
    notAccepted: [X_VENDORG_API_KEY, X_GOOG_API_KEY],
    upstreamStatus: 200,
  },
  {
    label: 'models with a generative key header or a /v1beta path (generative rules)',
    family: 'models',
    style: 'generative',
    calls: [
      { method: 'GET', path: '/v1beta/models' },
      { method: 'GET', path: '/v1beta/models/gemini-x' },
      { method: 'GET', path: '/v1/models' },
    ],
    extra: {},
    accepted: [X_VENDORG_API_KEY, X_GOOG_API_KEY],
    notAccepted: [],
    upstreamStatus: 200,
  },
  {
    label: 'other (any other path)',
    family: 'other',
    style: 'generic',
    calls: [
      { method: 'GET', path: '/v1/unlisted' },
      { method: 'POST', path: '/v2/anything', body: {} },
      { method: 'POST', path: '/v1/models', body: {} }, // models is GET only
    ],
    extra: {},
    accepted: [BEARER, X_API_KEY, X_VENDORG_API_KEY, X_GOOG_API_KEY],
    notAccepted: [],
    upstreamStatus: 404,
  },
];

function callOf(call: Call, headers: Record<string, string | string[]>): HttpCall {
  return {
    method: call.method,
    path: call.path,
    headers: call.body === undefined ? headers : { 'content-type': 'application/json', ...headers },
    ...(call.body === undefined ? {} : { body: JSON.stringify(call.body) }),
  };
}

const ALLOWED_CASES = ROUTE_TABLE.flatMap((row) =>
  row.calls.flatMap((call) =>
    row.accepted.map((credential) => [row.label, `${call.method} ${call.path}`, credential.name, row, call, credential] as const),
  ),
);

describe('each route family accepts its credential headers, and the upstream never sees the key', () => {
  it.each(ALLOWED_CASES)('%s: %s with %s', async (_label, _call, _credential, row, call, credential) => {
    const reply = await send(
      callOf(call, { ...row.extra, ...credential.headers(key), 'x-gateway-account-id': 'spoofed', 'x-gateway-key-id': 'key_spoofed' }),
    );
    expect(reply.status).toBe(row.upstreamStatus);
    expectForwarded(row.family);
  });
});

const REFUSED_HEADER_CASES = ROUTE_TABLE.flatMap((row) =>
  row.notAccepted.map((credential) => [row.label, credential.name, row, credential] as const),
);

describe('a credential header the family does not read is 401 missing_credential, naming it', () => {
  it.each(REFUSED_HEADER_CASES)('%s: %s', async (_label, _credential, row, credential) => {
    const reply = await send(callOf(row.calls[0]!, { ...row.extra, ...credential.headers(key) }));
    expectDenial(reply, 401, 'missing_credential', row.style);
    expect((reply.json as DenyBodyView).error.message).toContain(`'${credential.name}'`);
    expect(reply.body).not.toContain(key);
  });
});

describe('no key at all is 401 missing_credential in the style of the route', () => {
  it.each(ROUTE_TABLE.map((row) => [row.label, row] as const))('%s', async (_label, row) => {
    const reply = await send(callOf(row.calls[0]!, row.extra));
    expectDenial(reply, 401, 'missing_credential', row.style);
    expect(reply.headers['www-authenticate']).toBe('Bearer realm="gateway-authz"');
  });
});

describe('batches and file uploads are refused by default (their usage is not metered): 404 route_not_enabled', () => {
  it.each([
    [
      'messages',
      { method: 'POST', path: '/v1/messages/batches', body: { requests: [] } },
      X_API_KEY,
      { 'anthropic-version': '2023-06-01' },
    ],
    ['chat', { method: 'POST', path: '/v1/files', body: {} }, BEARER, {}],
    ['generative', { method: 'POST', path: '/v1beta/models/gemini-x:batchGenerateContent', body: {} }, X_GOOG_API_KEY, {}],
  ] as const)('%s style', async (style, call, credential, extra) => {
    const reply = await send(callOf(call, { ...extra, ...credential.headers(key) }));
    expectDenial(reply, 404, 'route_not_enabled', style);
  });
});

describe('messages: the version header', () => {
  it("is required: 400 invalid_request_error naming 'vendora-version'", async () => {
    const reply = await send(callOf({ method: 'POST', path: '/v1/messages', body: MESSAGES_BODY }, X_API_KEY.headers(key)));
    expectDenial(reply, 400, 'missing_version_header', 'messages');
    expect((reply.json as DenyBodyView).error.type).toBe('invalid_request_error');
    expect((reply.json as DenyBodyView).error.message).toContain("'vendora-version'");
  });

  it.each([
    ['vendora-version', '2023-06-01'],
    ['anthropic-version', '2023-06-01'],
    ['vendora-version', '2026-10-21'],
    ['anthropic-version', '2026-10-21'],
  ])('%s: %s is accepted', async (header, version) => {
    const reply = await send(
      callOf({ method: 'POST', path: '/v1/messages', body: MESSAGES_BODY }, { [header]: version, ...X_API_KEY.headers(key) }),
    );
    expect(reply.status).toBe(200);
    expect((reply.json as { type: string }).type).toBe('message');
    expectForwarded('messages');
  });

  it('a version outside the accepted list is 400 unsupported_version', async () => {
    const reply = await send(
      callOf(
        { method: 'POST', path: '/v1/messages', body: MESSAGES_BODY },
        { 'anthropic-version': '2020-01-01', ...X_API_KEY.headers(key) },
      ),
    );
    expectDenial(reply, 400, 'unsupported_version', 'messages');
  });
});

describe('generative-content: both key spellings, and no key in the URL', () => {
  const GENERATE: Call = { method: 'POST', path: '/v1beta/models/gemini-x:generateContent', body: GEMINI_BODY };

  it.each([X_VENDORG_API_KEY, X_GOOG_API_KEY].map((c) => [c.name, c] as const))('%s is accepted', async (_name, credential) => {
    const reply = await send(callOf(GENERATE, credential.headers(key)));
    expect(reply.status).toBe(200);
    expect((reply.json as { candidates: { content: { parts: { text: string }[] } }[] }).candidates[0]!.content.parts[0]!.text).toBe('hi');
    expectForwarded('generative-content');
  });

  it('?key= alone is 401 query_key_not_accepted', async () => {
    const reply = await send(callOf({ ...GENERATE, path: `${GENERATE.path}?key=${key}` }, {}));
    expectDenial(reply, 401, 'query_key_not_accepted', 'generative');
    expect(reply.body).not.toContain(key);
  });

  it('?key= beside a header key is dropped before the upstream', async () => {
    const reply = await send(
      callOf({ ...GENERATE, path: `/v1beta/models/gemini-x:streamGenerateContent?alt=sse&key=${key}` }, X_GOOG_API_KEY.headers(key)),
    );
    expect(reply.status).toBe(200);
    expect(reply.headers['content-type']).toBe('text/event-stream');
    expectForwarded('generative-content');
    expect(world.upstream.requests[0]!.path).toBe('/v1beta/models/gemini-x:streamGenerateContent?alt=sse');
  });
});

describe('models: the headers pick the rules and the error body', () => {
  it.each([
    ['no style header → chat body', '/v1/models', { 'x-api-key': 'not-a-key' }, 'chat'],
    ['a version header → messages body', '/v1/models', { 'anthropic-version': '2023-06-01', 'x-api-key': 'not-a-key' }, 'messages'],
    ['vendora-version → messages body', '/v1/models', { 'vendora-version': '2023-06-01', authorization: 'Bearer not-a-key' }, 'messages'],
    ['x-goog-api-key → generative body', '/v1/models', { 'x-goog-api-key': 'not-a-key' }, 'generative'],
    ['x-vendorg-api-key → generative body', '/v1/models/gemini-x', { 'x-vendorg-api-key': 'not-a-key' }, 'generative'],
    ['a /v1beta path → generative body', '/v1beta/models', { authorization: 'Bearer not-a-key' }, 'generative'],
  ] as const)('%s', async (_name, path, headers, style) => {
    const reply = await send({ path, headers });
    expectDenial(reply, 401, 'malformed_key', style);
  });

  it.each([
    ['OpenAI', {}, (body: unknown) => expect(body).toMatchObject({ object: 'list', data: [{ id: 'gpt-x' }] })],
    [
      'Anthropic',
      { 'anthropic-version': '2023-06-01' },
      (body: unknown) => expect(body).toMatchObject({ has_more: false, data: [{ type: 'model' }] }),
    ],
  ] as const)('a valid key lists the models in the %s shape', async (_shape, extra, check) => {
    const reply = await send({ path: '/v1/models', headers: { ...extra, ...X_API_KEY.headers(key) } });
    expect(reply.status).toBe(200);
    check(reply.json);
    expectForwarded('models');
  });
});

describe("a family path with a trailing slash (Envoy forwards it to the same upstream path) gets that family's rules", () => {
  it('POST /v1/messages/ without a version header is 400 missing_version_header', async () => {
    const reply = await send(callOf({ method: 'POST', path: '/v1/messages/', body: MESSAGES_BODY }, X_API_KEY.headers(key)));
    expectDenial(reply, 400, 'missing_version_header', 'messages');
  });

  it('POST /v1/chat/completions/ does not read x-api-key', async () => {
    const reply = await send(callOf({ method: 'POST', path: '/v1/chat/completions/', body: CHAT_BODY }, X_API_KEY.headers(key)));
    expectDenial(reply, 401, 'missing_credential', 'chat');
  });

  it('POST /v1beta/models/gemini-x:generateContent/ without a key answers in the generative style', async () => {
    const reply = await send(callOf({ method: 'POST', path: '/v1beta/models/gemini-x:generateContent/', body: GEMINI_BODY }, {}));
    expectDenial(reply, 401, 'missing_credential', 'generative');
  });

  it('GET /v1/models/ with a version header answers in the messages style', async () => {
    const reply = await send({ path: '/v1/models/', headers: { 'anthropic-version': '2023-06-01', 'x-api-key': 'not-a-key' } });
    expectDenial(reply, 401, 'malformed_key', 'messages');
  });
});

describe('other paths need a key too', () => {
  it.each([
    ['GET', '/v1/unlisted'],
    ['POST', '/v2/anything'],
    ['GET', '/'],
    ['DELETE', '/v1/models/gpt-x'], // the models family is GET only
  ])('%s %s without a key is 401 with the generic body', async (method, path) => {
    const reply = await send({ method, path });
    expectDenial(reply, 401, 'missing_credential', 'generic');
  });
});

describe('Authorization: the Bearer scheme', () => {
  const CHAT: Call = { method: 'POST', path: '/v1/chat/completions', body: CHAT_BODY };

  it.each(['bearer', 'BEARER', 'Bearer'])('scheme %s is accepted', async (scheme) => {
    const reply = await send(callOf(CHAT, { authorization: `${scheme} ${key}` }));
    expect(reply.status).toBe(200);
    expectForwarded('chat-completions');
  });

  it('Basic is 401 invalid_authorization_scheme, naming Bearer', async () => {
    const reply = await send(callOf(CHAT, { authorization: `Basic ${Buffer.from(`user:${key}`).toString('base64')}` }));
    expectDenial(reply, 401, 'invalid_authorization_scheme', 'chat');
    expect((reply.json as DenyBodyView).error.message).toContain('Bearer');
  });

  it('Bearer with two tokens is 401 malformed_authorization_header', async () => {
    const reply = await send(callOf(CHAT, { authorization: `Bearer ${key} extra` }));
    expectDenial(reply, 401, 'malformed_authorization_header', 'chat');
  });
});

describe('several keys in one request', () => {
  const MESSAGE: Call = { method: 'POST', path: '/v1/messages', body: MESSAGES_BODY };
  const VERSION = { 'anthropic-version': '2023-06-01' };

  it('different keys in two accepted headers are 401 conflicting_credentials', async () => {
    const reply = await send(callOf(MESSAGE, { ...VERSION, ...X_API_KEY.headers(key), ...BEARER.headers(otherKey) }));
    expectDenial(reply, 401, 'conflicting_credentials', 'messages');
    expect(reply.body).not.toContain(key);
    expect(reply.body).not.toContain(otherKey);
  });

  it('two Authorization lines with different keys (Envoy joins them with ",") are 401 conflicting_credentials', async () => {
    const reply = await send(
      callOf({ method: 'POST', path: '/v1/chat/completions', body: CHAT_BODY }, { authorization: [`Bearer ${key}`, `Bearer ${otherKey}`] }),
    );
    expectDenial(reply, 401, 'conflicting_credentials', 'chat');
  });

  it('the same key in two accepted headers is fine', async () => {
    const reply = await send(callOf(MESSAGE, { ...VERSION, ...X_API_KEY.headers(key), ...BEARER.headers(key) }));
    expect(reply.status).toBe(200);
    expectForwarded('messages');
  });
});

// ---------------------------------------------------------------------------
// Upstream provider keys: fake, assembled at run time, registered as secrets.

const ALNUM = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';
function randomText(length: number): string {
  let out = '';
  for (let i = 0; i < length; i++) out += ALNUM[randomInt(ALNUM.length)];
  return out;
}
const OPENAI_MARKER = Buffer.from('OpenAI').toString('base64');

describe('an upstream provider key is 401 upstream_key_not_accepted, in every family', () => {
  it.each([
    ['OpenAI', BEARER.name, 'chat-completions', () => `sk-proj-${randomText(74)}${OPENAI_MARKER}${randomText(74)}`, BEARER],
    ['Anthropic', X_API_KEY.name, 'messages', () => `sk-ant-api03-${randomText(93)}AA`, X_API_KEY],
    ['Google', X_GOOG_API_KEY.name, 'generative-content', () => `AIza${randomText(35)}`, X_GOOG_API_KEY],
    ['Google', X_VENDORG_API_KEY.name, 'other (any other path)', () => `AIza${randomText(35)}`, X_VENDORG_API_KEY],
  ] as const)('%s key in %s on %s', async (provider, _header, label, make, credential) => {
    const row = ROUTE_TABLE.find((r) => r.label === label)!;
    const providerKey = make();
    registerSecrets(providerKey);
    const reply = await send(callOf(row.calls[0]!, { ...row.extra, ...credential.headers(providerKey) }));
    expectDenial(reply, 401, 'upstream_key_not_accepted', row.style);
    expect((reply.json as DenyBodyView).error.message).toContain(provider);
    expect(reply.body).not.toContain(providerKey);
  });
});
