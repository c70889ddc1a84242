import Redis from 'ioredis';
import { createOfficialCheckClient, envoyCheckRequest, type OfficialCheckClient } from '../support/envoy-official-client';
import { parseDenyBody } from '../support/deny-body';
import { startTestRedis, type TestRedis } from '../support/redis-server';
import { startAppUnderTest, type AppUnderTest } from '../support/running-app';
import { isBackgroundCommand, untilWebhookWorkDone } from '../support/background-commands';
import { redisKeys } from '../../src/store/redis/redis-keys';
import { restrictionsFields } from '../../src/store/redis/redis-records';
import { restrictionsStamp } from '../../src/keys/key-restrictions';

/**
 * Key restrictions (docs/concepts/key-restrictions.md) end to end: a server on real Redis, restrictions set through
 * the admin API, Checks over a real gRPC socket encoded with Envoy's official protos. Each kind is allowed and
 * refused, in each client style's status and body; a forged x-forwarded-for does not change the address; a refusal
 * consumes no rate limit; a change reaches the replica on its next request; and a restricted key costs the same
 * Redis commands as an unrestricted one.
 */
let redis: TestRedis;
let server: AppUnderTest;
let client: OfficialCheckClient;
let stats: Redis;

beforeAll(async () => {
  redis = await startTestRedis();
  server = await startAppUnderTest({ redisUrl: redis.url, env: { LAST_USED_FLUSH_MS: '3600000' } });
  client = createOfficialCheckClient(server.grpcAddress);
  stats = new Redis(redis.url);
  expect((await server.admin('POST', '/admin/accounts', { id: 'restricted-co', name: 'Restricted Co' })).status).toBe(201);
});
afterAll(async () => {
  client?.close();
  stats?.disconnect();
  await server?.close();
  await redis?.stop();
});

async function newKey(body: Record<string, unknown> = {}, account = 'restricted-co'): Promise<{ id: string; key: string }> {
  const created = await server.admin('POST', `/admin/accounts/${account}/keys`, { name: 'it', ...body });
  expect(created.status).toBe(201);
  return { id: created.body.id, key: created.body.key };
}

const headersOf = (options: { header: { key: string; value: string } }[]) =>
  Object.fromEntries(options.map((o) => [o.header.key, o.header.value]));

const chatBody = (model: string) => Buffer.from(JSON.stringify({ model, messages: [{ role: 'user', content: 'hi' }] }));
const chat = (key: string, opts: { path?: string; body?: Buffer; sourceAddress?: string; headers?: Record<string, string> } = {}) =>
  envoyCheckRequest({
    method: 'POST',
    path: opts.path ?? '/v1/chat/completions',
    headers: { authorization: `Bearer ${key}`, ...opts.headers },
    ...(opts.body ? { body: opts.body } : {}),
    ...(opts.sourceAddress ? { sourceAddress: opts.sourceAddress } : {}),
  });
const messages = (key: string, model: string) =>
  envoyCheckRequest({
    method: 'POST',
    path: '/v1/messages',
    headers: { 'x-api-key': key, 'anthropic-version': '2023-06-01' },
    body: Buffer.from(JSON.stringify({ model, max_tokens: 16, messages: [] })),
  });
const gemini = (key: string, model: string) =>
  envoyCheckRequest({ method: 'POST', path: `/v1beta/models/${model}:generateContent`, headers: { 'x-goog-api-key': key } });

/** Redis commands the server ran during `run` (INFO commandstats, without the background ones). */
async function redisCommandsDuring(run: () => Promise<unknown>): Promise<number> {
  await untilWebhookWorkDone(stats);
  await stats.config('RESETSTAT');
  await run();
  const info = await stats.info('commandstats');
  return [...info.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)]
    .filter((m) => !isBackgroundCommand(m[1]!))
    .reduce((sum, m) => sum + Number(m[2]), 0);
}

type CheckAnswer = Awaited<ReturnType<OfficialCheckClient['check']>>;
const reasonOf = (answer: CheckAnswer) => headersOf(answer.denied_response.headers)['x-gateway-error-code'];

describe('key restrictions over gRPC on real Redis', () => {
  it('endpoints: the allowed endpoint passes; another is refused 401 in the OpenAI style, naming the missing kind only', async () => {
    const { key } = await newKey({ restrictions: { endpoints: ['/v1/embeddings'] } });
    expect((await client.check(chat(key, { path: '/v1/embeddings' }))).status.code).toBe(0);
    const refused = await client.check(chat(key));
    expect(refused.status.code).toBe(7); // google.rpc.Code PERMISSION_DENIED
    expect(refused.denied_response.status.code).toBe('Unauthorized');
    expect(reasonOf(refused)).toBe('endpoint_not_permitted');
    const body = parseDenyBody(refused.denied_response.body);
    expect(body.error).toMatchObject({ type: 'invalid_request_error', code: 'endpoint_not_permitted', param: null });
    expect(body.error.message).toContain('insufficient permissions');
    expect(body.error.message).toContain('Missing permission: endpoint');
    expect(body.error.message).not.toContain('embeddings');
  });

  it('endpoints by family, and read-only: a GET of the model list passes, a generation is refused', async () => {
    const { key } = await newKey({ restrictions: { endpoints: ['messages'] } });
    expect((await client.check(messages(key, 'claude-sonnet-4-5'))).status.code).toBe(0);
    const refused = await client.check(chat(key));
    expect(reasonOf(refused)).toBe('endpoint_not_permitted');

    const reader = await newKey({ restrictions: { readOnly: true } });
    const list = envoyCheckRequest({ method: 'GET', path: '/v1/models', headers: { authorization: `Bearer ${reader.key}` } });
    expect((await client.check(list)).status.code).toBe(0);
    const write = await client.check(chat(reader.key, { body: chatBody('gpt-4o') }));
    expect(reasonOf(write)).toBe('endpoint_not_permitted');
    expect(parseDenyBody(write.denied_response.body).error.message).toContain('read-only');
  });

  it('models: a Gemini path and a messages body are checked with the price-table syntax, 403 in their styles', async () => {
    const { key } = await newKey({ restrictions: { models: ['gemini-2.5-flash*', 'claude-haiku-4-5'] } });
    expect((await client.check(gemini(key, 'gemini-2.5-flash-lite'))).status.code).toBe(0);
    expect((await client.check(messages(key, 'claude-haiku-4-5'))).status.code).toBe(0);

    const pro = await client.check(gemini(key, 'gemini-2.5-pro'));
    expect(pro.denied_response.status.code).toBe('Forbidden');
    const google = parseDenyBody(pro.denied_response.body);
    expect(google.error).toMatchObject({ code: 403, status: 'PERMISSION_DENIED' });
    expect(google.error.details[0]).toMatchObject({ reason: 'model_not_permitted', domain: 'gateway-authz' });
    expect(google.error.message).toContain("the model 'gemini-2.5-pro'");
    expect(google.error.message).not.toContain('flash');

    const opus = await client.check(messages(key, 'claude-opus-4-1'));
    expect(opus.denied_response.status.code).toBe('Forbidden');
    const anthropic = parseDenyBody(opus.denied_response.body);
    expect(anthropic.type).toBe('error');
    expect(anthropic.error.type).toBe('permission_error');
    expect(anthropic.error.details.error_code).toBe('model_not_permitted');
  });

  it('models fail closed: a generation whose model Check cannot read is refused; an unrestricted key passes as before', async () => {
    const { key } = await newKey({ restrictions: { models: ['gpt-4o-mini*'] } });
    expect((await client.check(chat(key, { body: chatBody('gpt-4o-mini-2024-07-18') }))).status.code).toBe(0);
    // No body: Envoy was not configured to send it to this route.
    const unread = await client.check(chat(key));
    expect(reasonOf(unread)).toBe('model_not_readable');
    expect(parseDenyBody(unread.denied_response.body).error.message).toContain("top-level 'model'");
    const plain = await newKey();
    expect((await client.check(chat(plain.key))).status.code).toBe(0);
  });

  it('source addresses: IPv4 and IPv6 ranges by the address Envoy reports; a forged x-forwarded-for changes nothing', async () => {
    const { key } = await newKey({ restrictions: { sourceAddresses: ['10.1.0.0/16', '2001:db8::/32'] } });
    expect((await client.check(chat(key, { sourceAddress: '10.1.2.3' }))).status.code).toBe(0);
    expect((await client.check(chat(key, { sourceAddress: '2001:db8:5::1' }))).status.code).toBe(0);
    const outside = await client.check(chat(key, { sourceAddress: '192.0.2.1' }));
    expect(reasonOf(outside)).toBe('address_not_permitted');
    expect(parseDenyBody(outside.denied_response.body).error.message).not.toContain('10.1');
    const forged = await client.check(chat(key, { sourceAddress: '192.0.2.1', headers: { 'x-forwarded-for': '10.1.2.3' } }));
    expect(reasonOf(forged)).toBe('address_not_permitted');
    expect(reasonOf(await client.check(chat(key, { sourceAddress: '2001:db9::1' })))).toBe('address_not_permitted');
  });

  it("the account's defaults apply to every key, which can only narrow them", async () => {
    expect(
      (await server.admin('POST', '/admin/accounts', { id: 'narrow-co', name: 'N', keyRestrictions: { models: ['gpt-4o*'] } })).status,
    ).toBe(201);
    const plain = await newKey({}, 'narrow-co');
    expect((await client.check(chat(plain.key, { body: chatBody('gpt-4o') }))).status.code).toBe(0);
    expect(reasonOf(await client.check(chat(plain.key, { body: chatBody('o3') })))).toBe('model_not_permitted');
    // The key's own restrictions cannot widen the account's: both apply.
    const wider = await newKey({ restrictions: { models: ['o3'] } }, 'narrow-co');
    expect(reasonOf(await client.check(chat(wider.key, { body: chatBody('o3') })))).toBe('model_not_permitted');
  });

  it('a refused request consumes no rate limit', async () => {
    const { key } = await newKey({ restrictions: { endpoints: ['/v1/embeddings'] }, limits: [{ limit: 1, window: '1h' }] });
    expect(reasonOf(await client.check(chat(key)))).toBe('endpoint_not_permitted'); // the restrictions are cached from here on
    for (let i = 0; i < 3; i += 1) expect(reasonOf(await client.check(chat(key)))).toBe('endpoint_not_permitted');
    expect((await client.check(chat(key, { path: '/v1/embeddings' }))).status.code).toBe(0);
    expect(reasonOf(await client.check(chat(key, { path: '/v1/embeddings' })))).toBe('rate_limited');
  });

  it('a change reaches the replica on its next request, in both directions, as a revocation does', async () => {
    const { id, key } = await newKey();
    expect((await client.check(chat(key))).status.code).toBe(0);
    expect((await server.admin('PATCH', `/admin/keys/${id}`, { restrictions: { endpoints: ['/v1/embeddings'] } })).status).toBe(200);
    expect(reasonOf(await client.check(chat(key)))).toBe('endpoint_not_permitted');
    expect((await server.admin('PATCH', `/admin/keys/${id}`, { restrictions: null })).status).toBe(200);
    expect((await client.check(chat(key))).status.code).toBe(0);
    // The account's defaults too.
    expect((await server.admin('PATCH', '/admin/accounts/restricted-co', { keyRestrictions: { readOnly: true } })).status).toBe(200);
    expect(reasonOf(await client.check(chat(key)))).toBe('endpoint_not_permitted');
    expect((await server.admin('PATCH', '/admin/accounts/restricted-co', { keyRestrictions: null })).status).toBe(200);
    expect((await client.check(chat(key))).status.code).toBe(0);
    // Each change is in the audit trail with what it set.
    const audit = await server.admin('GET', '/admin/accounts/restricted-co/audit');
    const details = (audit.body.entries as { action: string; detail?: string }[]).map((entry) => `${entry.action} ${entry.detail ?? ''}`);
    expect(details).toEqual(
      expect.arrayContaining([
        'key.update changes=restrictions restrictions={"endpoints":["/v1/embeddings"]}',
        'key.update changes=restrictions restrictions=none',
        'account.update changes=keyRestrictions restrictions={"readOnly":true}',
        'account.update changes=keyRestrictions restrictions=none',
      ]),
    );
  });

  it('a key and an account written before the current field order, without a restrictions field, are restricted and lifted as any', async () => {
    expect((await server.admin('POST', '/admin/accounts', { id: 'older-co', name: 'Older Co' })).status).toBe(201);
    const { id, key } = await newKey({}, 'older-co');
    // The records as earlier versions wrote them: id first, status further on, and no restrictions field.
    const formerOrder = ['id', 'accountId', 'prefix', 'name', 'environment', 'status', 'createdAt'];
    const keyRecord = redisKeys.key('older-co', id);
    const accountRecord = redisKeys.account('older-co');
    for (const record of [keyRecord, accountRecord]) {
      const fields = await stats.hgetall(record);
      expect(fields.restrictions ?? '').toBe('');
      delete fields.restrictions;
      const names = [...formerOrder.filter((name) => name in fields), ...Object.keys(fields).filter((name) => !formerOrder.includes(name))];
      await stats
        .multi()
        .del(record)
        .hset(record, ...names.flatMap((name) => [name, fields[name]!]))
        .exec();
      expect((await stats.hkeys(record))[0]).toBe('id');
    }
    expect((await client.check(chat(key))).status.code).toBe(0);
    // Changed by another replica, straight in Redis as the store writes it (this one's cache believes the key
    // unrestricted): seen at once.
    for (const [record, restrictions] of [
      [keyRecord, { endpoints: ['/v1/embeddings'] }],
      [accountRecord, { readOnly: true }],
    ] as const) {
      await stats.hset(record, ...restrictionsFields(restrictions));
      expect(reasonOf(await client.check(chat(key)))).toBe('endpoint_not_permitted');
      await stats.hdel(record, redisKeys.restrictionsField(), redisKeys.restrictionsStampField());
      expect((await client.check(chat(key))).status.code).toBe(0);
    }
    // And through the admin API.
    expect((await server.admin('PATCH', `/admin/keys/${id}`, { restrictions: { endpoints: ['/v1/embeddings'] } })).status).toBe(200);
    expect(reasonOf(await client.check(chat(key)))).toBe('endpoint_not_permitted');
    expect((await server.admin('PATCH', `/admin/keys/${id}`, { restrictions: null })).status).toBe(200);
    expect((await client.check(chat(key))).status.code).toBe(0);
    expect((await server.admin('PATCH', '/admin/accounts/older-co', { keyRestrictions: { readOnly: true } })).status).toBe(200);
    expect(reasonOf(await client.check(chat(key)))).toBe('endpoint_not_permitted');
    expect((await server.admin('PATCH', '/admin/accounts/older-co', { keyRestrictions: null })).status).toBe(200);
    expect((await client.check(chat(key))).status.code).toBe(0);
  });

  it("a record whose stamp is not its text's fails closed: the Check is refused, never decided on either", async () => {
    const { id, key } = await newKey({ restrictions: { endpoints: ['chat-completions'] } });
    expect((await client.check(chat(key))).status.code).toBe(0);
    // Written by something other than the store: a wider text under the stamp the replica holds.
    const record = redisKeys.key('restricted-co', id);
    const heldStamp = await stats.hget(record, redisKeys.restrictionsStampField());
    await stats.hset(record, redisKeys.restrictionsField(), JSON.stringify({ endpoints: ['/v1/embeddings'] }));
    await stats.hset(record, redisKeys.restrictionsStampField(), 'not-the-stamp-of-it');
    expect(reasonOf(await client.check(chat(key)))).toBe('store_unavailable');
    expect(reasonOf(await client.check(chat(key)))).toBe('store_unavailable');
    expect(heldStamp).toBe(restrictionsStamp(JSON.stringify({ endpoints: ['chat-completions'] })));
  });

  /** The ARGV of the one authorize call an allowed Check makes, as Redis's slow log (every command logged) records it. */
  async function authorizeArgvOf(request: Parameters<typeof client.check>[0]): Promise<string[]> {
    const threshold = ((await stats.config('GET', 'slowlog-log-slower-than')) as string[])[1]!;
    await stats.config('SET', 'slowlog-log-slower-than', '0');
    await stats.slowlog('RESET');
    try {
      expect((await client.check(request)).status.code).toBe(0);
    } finally {
      await stats.config('SET', 'slowlog-log-slower-than', threshold);
    }
    const entries = (await stats.slowlog('GET', 1000)) as [number, number, number, string[]][];
    const scriptCalls = entries.map((entry) => entry[3]).filter((args) => args[0]?.toLowerCase() === 'evalsha');
    expect(scriptCalls).toHaveLength(1);
    const [, , keyCount, ...rest] = scriptCalls[0]!;
    return rest.slice(Number(keyCount));
  }

  it('a key without restrictions sends the authorize script no texts to compare: only its id, the time, the plan and a hold', async () => {
    const { id, key } = await newKey();
    expect((await client.check(chat(key))).status.code).toBe(0);
    const argv = await authorizeArgvOf(chat(key));
    expect(argv[0]).toBe(id);
    expect(argv.length).toBeLessThanOrEqual(4);
  });

  it('a restricted key sends the authorize script one short stamp of its restrictions, not their texts', async () => {
    const restrictions = { endpoints: ['chat-completions', 'messages'], sourceAddresses: ['127.0.0.0/8', '::1/128'] };
    const { id, key } = await newKey({ restrictions });
    const allowed = chat(key, { sourceAddress: '127.0.0.1' });
    expect((await client.check(allowed)).status.code).toBe(0); // the restrictions are cached from here on
    // The key id, the time (with the hold), the plan, then the key's stamp: the account has no defaults, so nothing for it.
    const argv = await authorizeArgvOf(allowed);
    expect(argv[0]).toBe(id);
    expect(argv.slice(3)).toEqual([restrictionsStamp(JSON.stringify(restrictions))]);
    expect(argv[3]!.length).toBeLessThan(32);
  });

  it('a restricted key costs the Redis commands of an unrestricted one, once its restrictions are cached', async () => {
    const restricted = await newKey({
      restrictions: { models: ['gpt-4o*'], sourceAddresses: ['127.0.0.0/8'], endpoints: ['chat-completions'] },
    });
    const plain = await newKey();
    const allowed = (key: string) => chat(key, { body: chatBody('gpt-4o'), sourceAddress: '127.0.0.1' });
    for (const key of [restricted.key, plain.key]) expect((await client.check(allowed(key))).status.code).toBe(0);
    const unrestrictedCost = await redisCommandsDuring(() => client.check(allowed(plain.key)));
    expect(unrestrictedCost).toBeGreaterThan(0);
    expect(await redisCommandsDuring(() => client.check(allowed(restricted.key)))).toBe(unrestrictedCost);
    expect(
      await redisCommandsDuring(() => client.check(chat(restricted.key, { body: chatBody('o3'), sourceAddress: '127.0.0.1' }))),
    ).toBeLessThanOrEqual(unrestrictedCost);
  });

  it('refuses invalid restrictions with a specific error', async () => {
    const cases: [unknown, RegExp][] = [
      [{ sourceAddresses: ['10.0.0.0/33'] }, /prefix length must be 0 to 32/],
      [{ sourceAddresses: ['10.0.0/8'] }, /no IPv4 or IPv6 address/],
      [{ endpoints: ['chat'] }, /neither a route family/],
      [{ models: [] }, /restrictions\.models: must not be empty/],
      [{ models: ['gpt-*-mini'] }, /'\*' may only end a pattern/],
    ];
    for (const [restrictions, message] of cases) {
      const answer = await server.admin('POST', '/admin/accounts/restricted-co/keys', { restrictions });
      expect(answer.status).toBe(400);
      expect(JSON.stringify(answer.body)).toMatch(message);
    }
  });
});
