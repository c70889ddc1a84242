import { createHash, generateKeyPairSync, sign, type KeyObject } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { generateCustomerKey } from '../../src/keys/customer-key';
import { EXPOSED_KEY_GRACE_SECONDS } from '../../src/keys/key-exposure';
import {
  KEY_ID_HEADER,
  MAX_ALERT_BODY_BYTES,
  MAX_ALERT_TOKENS,
  SECRET_SCANNING_ALERT_PATH,
  SIGNATURE_HEADER,
} from '../../src/customer/secret-scanning-alerts';
import { UNKNOWN_KEY_REFRESH_INTERVAL_MS } from '../../src/customer/github-signing-keys';
import { createOfficialCheckClient, envoyCheckRequest, type OfficialCheckClient } from '../support/envoy-official-client';
import { parseDenyBody } from '../support/deny-body';
import { startTestRedis, type TestRedis } from '../support/redis-server';
import { startAppUnderTest, type AppUnderTest } from '../support/running-app';
import { registerSecrets } from '../support/secret-scan';
import { until } from '../support/waiting';
import { WebhookReceiver } from '../support/webhook-receiver';
import { mistyped } from '../support/mistyped';

/**
 * GitHub's secret-scanning alerts, signed as GitHub signs them (ECDSA P-256, SHA-256, DER, base64) with a key
 * pair of the test's own, whose public half a local HTTP server publishes in GitHub's key set format. Two
 * replicas share one Redis, both configured with the key set: `scanning` (with customer sign-in, so its
 * session, Origin and CSRF checks are in the way) receives most alerts, `other` (without sign-in, where every
 * other path answers "not configured") answers the Checks that show a reported key refused at once.
 */
const TOKEN_TYPE = 'gateway_authz_key';
const KEY_SET_PATH = '/meta/public_keys/secret_scanning';
const SESSION_SECRET = 'secret-scanning-test-session-secret-0123456789';

interface SigningKey {
  id: string;
  privateKey: KeyObject;
  publicPem: string;
}

function newSigningKey(): SigningKey {
  const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'prime256v1' });
  const der = publicKey.export({ type: 'spki', format: 'der' });
  return {
    id: createHash('sha256').update(der).digest('hex'),
    privateKey,
    publicPem: publicKey.export({ type: 'spki', format: 'pem' }).toString(),
  };
}

let redis: TestRedis;
let receiver: WebhookReceiver;
let scanning: AppUnderTest;
let other: AppUnderTest;
let keySetServer: Server;
let keySetFetches = 0;
let publishedKeys: SigningKey[] = [];
/** The scanning replica's clock: the real time plus what a test moved it by. */
let clockOffsetMs = 0;
const github = newSigningKey();
let checkClients: OfficialCheckClient[] = [];
const reportedTokens: string[] = [];

beforeAll(async () => {
  keySetServer = createServer((request, response) => {
    if (request.url !== KEY_SET_PATH) return void response.writeHead(404).end();
    keySetFetches += 1;
    const keys = publishedKeys.map((key, index) => ({ key_identifier: key.id, key: key.publicPem, is_current: index === 0 }));
    response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ public_keys: keys }));
  });
  await new Promise<void>((resolve) => keySetServer.listen(0, '127.0.0.1', resolve));
  publishedKeys = [github];
  const keySetUrl = `http://127.0.0.1:${(keySetServer.address() as AddressInfo).port}${KEY_SET_PATH}`;
  redis = await startTestRedis();
  receiver = await WebhookReceiver.start();
  registerSecrets(SESSION_SECRET);
  // Either replica may deliver the account's webhooks: both may send to the test's loopback receiver.
  const webhooks = { WEBHOOK_LOOPBACK_HTTP: 'true', WEBHOOK_POLL_INTERVAL_MS: '20' };
  scanning = await startAppUnderTest({
    redisUrl: redis.url,
    env: {
      GITHUB_SECRET_SCANNING_KEYS: keySetUrl,
      ...webhooks,
      // Discovery happens at the first sign-in, which never comes: the issuer is not contacted.
      OIDC_ISSUER_URL: 'https://login.example.com',
      OIDC_CLIENT_ID: 'dashboard',
      OIDC_REDIRECT_URL: 'https://console.example.com/auth/callback',
      CUSTOMER_SESSION_SECRET: SESSION_SECRET,
    },
    clock: { now: () => Date.now() + clockOffsetMs },
  });
  other = await startAppUnderTest({ redisUrl: redis.url, env: { GITHUB_SECRET_SCANNING_KEYS: keySetUrl, ...webhooks } });
  checkClients = [scanning, other].map((app) => createOfficialCheckClient(app.grpcAddress));
  expect((await scanning.admin('POST', '/admin/accounts', { id: 'acme', name: 'Acme' })).status).toBe(201);
});

afterAll(async () => {
  checkClients.forEach((client) => client.close());
  await scanning?.close();
  await other?.close();
  await redis?.stop();
  await receiver?.stop();
  await new Promise((resolve) => keySetServer?.close(resolve));
});

async function createKey(name: string): Promise<{ key: string; id: string }> {
  const created = await scanning.admin('POST', '/admin/accounts/acme/keys', { name });
  expect(created.status).toBe(201);
  return { key: created.body.key, id: created.body.id };
}

/** What each replica answers a Check with this key: 'allow' or the deny reason. */
async function checkOnBothReplicas(key: string): Promise<string[]> {
  const request = envoyCheckRequest({ path: '/v1/chat/completions', headers: { authorization: `Bearer ${key}` } });
  const responses = await Promise.all(checkClients.map((client) => client.check(request)));
  return responses.map((r) => (r.status.code === 0 ? 'allow' : String(parseDenyBody(r.denied_response.body).error.code)));
}

function match(token: string, url = 'https://github.com/octo/app/blob/abc123/config.js') {
  reportedTokens.push(token);
  return { token, type: TOKEN_TYPE, url, source: 'content' };
}

function signed(body: string, key: SigningKey = github, keyId = key.id): Record<string, string> {
  const signature = sign('sha256', Buffer.from(body), { key: key.privateKey, dsaEncoding: 'der' }).toString('base64');
  return { [KEY_ID_HEADER]: keyId, [SIGNATURE_HEADER]: signature };
}

/** The feedback array, or an error body. */
type AlertAnswer = { error?: { code: string; message: string } } & unknown[];

async function postAlert(app: AppUnderTest, body: string, headers: Record<string, string>): Promise<{ status: number; body: AlertAnswer }> {
  const response = await fetch(`http://127.0.0.1:${app.app.customerPort}${SECRET_SCANNING_ALERT_PATH}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body,
  });
  const text = await response.text();
  return { status: response.status, body: (text.startsWith('[') || text.startsWith('{') ? JSON.parse(text) : {}) as AlertAnswer };
}

const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');

async function auditOf(keyId: string): Promise<{ action: string; detail?: string; actor?: unknown }[]> {
  const audit = await scanning.admin('GET', '/admin/accounts/acme/audit?limit=1000');
  expect(audit.status).toBe(200);
  return audit.body.entries.filter((entry) => entry.keyId === keyId).reverse();
}

it('revokes a reported live key at once: the next Check on the other replica refuses it, the audit names the URL, the account hears key.exposed', async () => {
  const hook = await scanning.admin('POST', '/admin/accounts/acme/webhooks', {
    url: receiver.url('/exposed'),
    events: ['key.exposed', 'key.revoked'],
  });
  expect(hook.status).toBe(201);
  const leaked = await createKey('ci');
  // Both replicas have it cached as allowed.
  expect(await checkOnBothReplicas(leaked.key)).toEqual(['allow', 'allow']);
  const body = JSON.stringify([match(leaked.key, 'https://github.com/octo/app/blob/abc123/.env')]);
  const answer = await postAlert(scanning, body, signed(body));
  expect(answer.status).toBe(200);
  expect(answer.body).toEqual([{ token_hash: sha256(leaked.key), token_type: TOKEN_TYPE, label: 'true_positive' }]);
  expect(await checkOnBothReplicas(leaked.key)).toEqual(['key_revoked', 'key_revoked']);
  const audit = await auditOf(leaked.id);
  expect(audit.map((entry) => entry.action)).toEqual(['key.create', 'key.revoke', 'key.exposed']);
  expect(audit[2]?.detail).toBe('reporter=github source=content handled=revoked url=https://github.com/octo/app/blob/abc123/.env');
  // Both changes name GitHub's secret scanning as their actor, not an operator.
  const byScanner = { kind: 'operator', operator: { kind: 'secret-scanning', reporter: 'github' } };
  expect(audit.slice(1).map((entry) => entry.actor)).toEqual([byScanner, byScanner]);
  // Written with the revocation in one step, delivered signed (Standard Webhooks).
  await until(() => receiver.on('/exposed').length >= 2, 'key.revoked and key.exposed at the endpoint');
  const events = receiver
    .on('/exposed')
    .map((request) => WebhookReceiver.verified(request, (hook.body as unknown as { secret: string }).secret));
  const exposed = events.find((event) => event.type === 'key.exposed');
  expect(events.map((event) => event.type).sort()).toEqual(['key.exposed', 'key.revoked']);
  expect(exposed?.data).toMatchObject({
    key: { id: leaked.id },
    action: { kind: 'revoked' },
    exposure: { source: 'github_secret_scanning:content', url: 'https://github.com/octo/app/blob/abc123/.env' },
  });
  expect(JSON.stringify(events)).not.toContain(leaked.key);
});

it('labels a live and a revoked key of ours true_positive, an unknown well-formed key and a foreign token false_positive', async () => {
  const hook = await scanning.admin('POST', '/admin/accounts/acme/webhooks', {
    url: receiver.url('/exposed-labels'),
    events: ['key.exposed'],
  });
  expect(hook.status).toBe(201);
  const live = await createKey('live');
  const revoked = await createKey('revoked earlier');
  expect((await scanning.admin('POST', `/admin/keys/${revoked.id}/revoke`)).status).toBe(200);
  const revokedBefore = (await scanning.admin('GET', `/admin/keys/${revoked.id}`)).body;
  const unknown = generateCustomerKey('live');
  const foreign = `ghp_${'a1B2c3D4e5'.repeat(3)}xyz123`;
  const checksumWrong = mistyped(live.key);
  registerSecrets(unknown, foreign, checksumWrong);
  const tokens = [live.key, revoked.key, unknown, foreign, checksumWrong];
  const body = JSON.stringify(tokens.map((token) => match(token)));
  const answer = await postAlert(scanning, body, signed(body));
  expect(answer.status).toBe(200);
  expect(answer.body).toEqual(
    tokens.map((token, index) => ({
      token_hash: sha256(token),
      token_type: TOKEN_TYPE,
      label: index < 2 ? 'true_positive' : 'false_positive',
    })),
  );
  expect(await checkOnBothReplicas(live.key)).toEqual(['key_revoked', 'key_revoked']);
  // The revoked key stays as it was (its revocation time is not moved); its exposure is still audited.
  expect((await scanning.admin('GET', `/admin/keys/${revoked.id}`)).body).toEqual(revokedBefore);
  expect((await auditOf(revoked.id)).map((entry) => [entry.action, entry.detail?.split(' ')[2]])).toEqual([
    ['key.create', undefined],
    ['key.revoke', undefined],
    ['key.exposed', 'handled=already_revoked'],
  ]);
  // Both keys' owners hear key.exposed: the live key revoked now, the revoked one with nothing done (so they learn an
  // old key of theirs is public); nothing for the tokens that are not ours.
  await until(() => receiver.on('/exposed-labels').length >= 2, 'two key.exposed events');
  const events = receiver
    .on('/exposed-labels')
    .map((request) => WebhookReceiver.verified(request, (hook.body as unknown as { secret: string }).secret));
  const actions = Object.fromEntries(events.map((event) => [(event.data['key'] as { id: string }).id, event.data['action']]));
  expect(actions).toEqual({ [live.id]: { kind: 'revoked' }, [revoked.id]: { kind: 'none', reason: 'already_revoked' } });
  expect(events.find((event) => (event.data['key'] as { id: string }).id === revoked.id)?.data).toMatchObject({
    key: { id: revoked.id, status: 'revoked' },
    exposure: { source: 'github_secret_scanning:content', url: 'https://github.com/octo/app/blob/abc123/config.js' },
  });
  expect(JSON.stringify(events)).not.toContain(revoked.key);
});

it("rotates a reported key with a short grace when its account chose 'rotate', and revokes one already in a grace", async () => {
  const patched = await scanning.admin('PATCH', '/admin/accounts/acme', { exposedKeyAction: 'rotate' });
  expect(patched.body.exposedKeyAction).toBe('rotate');
  try {
    const leaked = await createKey('rotate me');
    const graced = await createKey('already rotating');
    const planned = await scanning.admin('POST', `/admin/keys/${graced.id}/rotate`, { graceSeconds: 86_400 });
    registerSecrets(planned.body.key);
    const body = JSON.stringify([match(leaked.key), match(graced.key)]);
    const answer = await postAlert(scanning, body, signed(body));
    expect(answer.body.map((entry) => (entry as { label: string }).label)).toEqual(['true_positive', 'true_positive']);
    // The rotated key works through its grace, on both replicas; the one already in a grace is refused at once.
    expect(await checkOnBothReplicas(leaked.key)).toEqual(['allow', 'allow']);
    expect(await checkOnBothReplicas(graced.key)).toEqual(['key_revoked', 'key_revoked']);
    const rotated = (await scanning.admin('GET', `/admin/keys/${leaked.id}`)).body;
    expect(rotated.replacedBy).toEqual(expect.any(String));
    expect(Date.parse(rotated.revokeAt!) - Date.now()).toBeGreaterThan(EXPOSED_KEY_GRACE_SECONDS * 1000 - 60_000);
    expect(Date.parse(rotated.revokeAt!) - Date.now()).toBeLessThanOrEqual(EXPOSED_KEY_GRACE_SECONDS * 1000);
    const audit = await auditOf(leaked.id);
    expect(audit.map((entry) => entry.action)).toEqual(['key.create', 'key.rotate', 'key.exposed']);
    expect(audit[2]?.detail).toContain(`handled=rotated successorKeyId=${rotated.replacedBy}`);
    expect((await auditOf(graced.id)).map((entry) => entry.action)).toEqual(['key.create', 'key.rotate', 'key.revoke', 'key.exposed']);
  } finally {
    expect((await scanning.admin('PATCH', '/admin/accounts/acme', { exposedKeyAction: null })).body.exposedKeyAction).toBe('revoke');
  }
});

describe('refused alerts change nothing', () => {
  let untouched: { key: string; id: string };
  beforeAll(async () => {
    untouched = await createKey('untouched');
  });
  afterEach(async () => {
    expect(await checkOnBothReplicas(untouched.key)).toEqual(['allow', 'allow']);
    expect((await auditOf(untouched.id)).map((entry) => entry.action)).toEqual(['key.create']);
  });

  it('an unsigned alert is refused with 401 signature_missing', async () => {
    const body = JSON.stringify([match(untouched.key)]);
    const answer = await postAlert(scanning, body, {});
    expect(answer.status).toBe(401);
    expect(answer.body.error?.code).toBe('signature_missing');
  });

  it('an alert signed by another key, or with its body changed after signing, is refused with 401 signature_invalid', async () => {
    const body = JSON.stringify([match(untouched.key)]);
    const forged = await postAlert(scanning, body, signed(body, newSigningKey(), github.id));
    expect(forged.status).toBe(401);
    expect(forged.body.error?.code).toBe('signature_invalid');
    const original = JSON.stringify([match(generateCustomerKey('live'))]);
    const tampered = await postAlert(scanning, body, signed(original));
    expect(tampered.status).toBe(401);
    expect(tampered.body.error?.code).toBe('signature_invalid');
    const garbage = await postAlert(scanning, body, { [KEY_ID_HEADER]: github.id, [SIGNATURE_HEADER]: 'bm90IGEgc2lnbmF0dXJl' });
    expect(garbage.status).toBe(401);
    expect(garbage.body.error?.code).toBe('signature_invalid');
  });

  it('a signed body that is not an array of matches is refused with 400 invalid_alert, naming the entry and field', async () => {
    for (const [matches, message] of [
      [{ token: untouched.key }, 'The body must be a JSON array of {token, type, url, source}.'],
      [[match(untouched.key), { type: TOKEN_TYPE }], 'Entry 1: token must be a string of 1 to 1024 characters.'],
      [[match(untouched.key), { ...match(untouched.key), url: 7 }], 'Entry 1: url must be a string of at most 4096 characters.'],
    ] as const) {
      const body = JSON.stringify(matches);
      const answer = await postAlert(scanning, body, signed(body));
      expect([answer.status, answer.body.error]).toEqual([400, { code: 'invalid_alert', message }]);
    }
  });

  it('a body over the size limit is refused with 413 body_too_large before it is read', async () => {
    const entry = match(untouched.key);
    const padded = JSON.stringify([{ ...entry, url: `https://github.com/${'x'.repeat(MAX_ALERT_BODY_BYTES)}` }]);
    const answer = await postAlert(scanning, padded, signed(padded));
    expect(answer.status).toBe(413);
    expect(answer.body.error?.code).toBe('body_too_large');
  });

  it("more tokens than the limit are refused with 413 too_many_tokens, read from a body far past the dashboard's 64 KiB", async () => {
    // Short made-up tokens, not recorded for the log scan (which would find "t1" everywhere).
    const url = `https://github.com/octo/app/blob/${'a'.repeat(300)}`;
    const filler = Array.from({ length: MAX_ALERT_TOKENS }, (_, i) => ({ token: `t${i}`, type: TOKEN_TYPE, url, source: 'content' }));
    const entries = [match(untouched.key), ...filler];
    const body = JSON.stringify(entries);
    expect(body.length).toBeGreaterThan(256 * 1024);
    const answer = await postAlert(scanning, body, signed(body));
    expect(answer.status).toBe(413);
    expect(answer.body.error).toEqual({
      code: 'too_many_tokens',
      message: `At most ${MAX_ALERT_TOKENS} matches per request; got ${MAX_ALERT_TOKENS + 1}.`,
    });
  });

  it('a replica without a key set configured has no endpoint: the alert is not handled there', async () => {
    const unconfigured = await startAppUnderTest({ redisUrl: redis.url });
    try {
      const body = JSON.stringify([match(untouched.key)]);
      const answer = await postAlert(unconfigured, body, signed(body));
      expect(answer.status).not.toBe(200);
    } finally {
      await unconfigured.close();
    }
  });

  it('an unknown key id is refused after one refresh of the key set, and a second one within the interval fetches nothing', async () => {
    const loaded = JSON.stringify([]);
    expect((await postAlert(scanning, loaded, signed(loaded))).status).toBe(200);
    const fetchesBefore = keySetFetches;
    const body = JSON.stringify([match(untouched.key)]);
    const first = await postAlert(scanning, body, signed(body, newSigningKey(), 'not-a-published-key-id'));
    expect(first.status).toBe(401);
    expect(first.body.error?.code).toBe('signing_key_unknown');
    expect(keySetFetches).toBe(fetchesBefore + 1);
    const second = await postAlert(scanning, body, signed(body, newSigningKey(), 'another-unpublished-key-id'));
    expect(second.body.error?.code).toBe('signing_key_unknown');
    expect(keySetFetches).toBe(fetchesBefore + 1);
  });
});

it('a replica without customer sign-in serves the endpoint too', async () => {
  const leaked = await createKey('reported to the other replica');
  const body = JSON.stringify([match(leaked.key)]);
  const answer = await postAlert(other, body, signed(body));
  expect(answer.status).toBe(200);
  expect(await checkOnBothReplicas(leaked.key)).toEqual(['key_revoked', 'key_revoked']);
});

it('a newly published signing key is found by the refresh an unknown key id makes, once the interval has passed', async () => {
  const loaded = JSON.stringify([]);
  expect((await postAlert(scanning, loaded, signed(loaded))).status).toBe(200);
  const next = newSigningKey();
  publishedKeys = [github, next];
  clockOffsetMs += UNKNOWN_KEY_REFRESH_INTERVAL_MS;
  const fetchesBefore = keySetFetches;
  const body = JSON.stringify([]);
  const answer = await postAlert(scanning, body, signed(body, next));
  expect(answer.status).toBe(200);
  expect(keySetFetches).toBe(fetchesBefore + 1);
});

it('no reported token, nor its SHA-256, is in any log line of either replica', () => {
  expect(reportedTokens.length).toBeGreaterThan(5);
  expect([...scanning.logs.leaksOf(reportedTokens), ...other.logs.leaksOf(reportedTokens)]).toEqual([]);
  // The alerts were logged: the check above read lines that exist.
  expect(scanning.logs.events('secret_scanning_alert').length).toBeGreaterThan(0);
  expect(scanning.logs.events('secret_scanning_refused').length).toBeGreaterThan(0);
});
