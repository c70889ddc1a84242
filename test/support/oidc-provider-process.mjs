// A real OpenID provider for the tests: oidc-provider (the certified
// implementation) on a free loopback port, in a process of its own because it
// is an ES module, which jest's CommonJS module registry cannot load.
//
// Configuration: the JSON in OIDC_TEST_PROVIDER, {clients, users}:
// - clients: oidc-provider client metadata (client_id, redirect_uris, ...);
// - users: login name → claims (email, email_verified, name, groups). Any other login
//   signs in too, with no claims but `sub`.
// The sign-in page is oidc-provider's development interaction (any password);
// consent is granted without asking, as a first-party dashboard would be.
//
// A test can also make the provider misbehave once, as an attacker in the
// middle would: POST /__test/tamper with {request?, response?}, each a map of
// parameters to replace in the next authorization request as it arrives
// (e.g. a different nonce) or in the next authorization response's redirect
// to the client (e.g. a different state). A browser cannot be made to do this:
// Playwright does not intercept requests reached through redirects.
//
// Writes JSON lines to stdout: {"ready":true,"issuer":...} once listening, and
// {"secret":...} for every authorization code, access token and ID token it
// issues, so the tests can scan the service's logs for them.
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { createServer } from 'node:http';
import Provider from 'oidc-provider';

const config = JSON.parse(process.env.OIDC_TEST_PROVIDER ?? '{}');
const users = config.users ?? {};

const emit = (line) => process.stdout.write(`${JSON.stringify(line)}\n`);

let handle = (_request, response) => {
  response.statusCode = 503;
  response.end();
};
const server = createServer((request, response) => handle(request, response));
await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
const issuer = `http://127.0.0.1:${server.address().port}`;

const signingKey = generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({ format: 'jwk' });

const provider = new Provider(issuer, {
  clients: config.clients ?? [],
  jwks: { keys: [{ ...signingKey, kid: 'test-signing-key', use: 'sig', alg: 'RS256' }] },
  cookies: { keys: [randomBytes(32).toString('hex')] },
  // groups: the operator dashboard's role claim (a user's `groups` in OIDC_TEST_PROVIDER).
  claims: { openid: ['sub'], email: ['email', 'email_verified'], profile: ['name'], groups: ['groups'] },
  features: { devInteractions: { enabled: true } },
  pkce: { required: () => true },
  async findAccount(_ctx, id) {
    return { accountId: id, claims: async () => ({ sub: id, ...(users[id] ?? {}) }) };
  },
  // Consent is given without a prompt (oidc-provider's documented recipe for first-party clients).
  async loadExistingGrant(ctx) {
    const grantId = ctx.oidc.result?.consent?.grantId || ctx.oidc.session.grantIdFor(ctx.oidc.client.clientId);
    if (grantId) return ctx.oidc.provider.Grant.find(grantId);
    const grant = new ctx.oidc.provider.Grant({ clientId: ctx.oidc.client.clientId, accountId: ctx.oidc.session.accountId });
    grant.addOIDCScope('openid email profile groups');
    await grant.save();
    return grant;
  },
});

let tamper = {};

async function readJson(request) {
  let text = '';
  for await (const chunk of request) text += chunk;
  return JSON.parse(text || '{}');
}

provider.use(async (ctx, next) => {
  if (ctx.path === '/__test/tamper' && ctx.method === 'POST') {
    tamper = await readJson(ctx.req);
    ctx.status = 204;
    return;
  }
  if (tamper.request && ctx.method === 'GET' && ctx.path === '/auth' && ctx.query.client_id) {
    const params = new URLSearchParams(ctx.querystring);
    for (const [name, value] of Object.entries(tamper.request)) params.set(name, value);
    ctx.querystring = params.toString();
    delete tamper.request;
  }
  await next();
  const location = ctx.response.get('location');
  if (tamper.response && location && /[?&]code=/.test(location)) {
    const url = new URL(location);
    for (const [name, value] of Object.entries(tamper.response)) url.searchParams.set(name, value);
    ctx.set('location', url.href);
    delete tamper.response;
  }
});

provider.on('authorization.success', (_ctx, out) => {
  if (out?.code) emit({ secret: out.code });
});
provider.on('grant.success', (ctx) => {
  for (const field of ['access_token', 'id_token', 'refresh_token'])
    if (typeof ctx.body?.[field] === 'string') emit({ secret: ctx.body[field] });
});
provider.on('server_error', (_ctx, error) => process.stderr.write(`oidc-provider server_error: ${error?.stack ?? error}\n`));

handle = provider.callback();
emit({ ready: true, issuer });

process.on('SIGTERM', () => server.close(() => process.exit(0)));
