/**
 * Without an identity provider (no OIDC_ISSUER_URL), the customer dashboard
 * says so plainly and its API answers a clear error; the operator's admin API
 * and dashboard on the admin port work as before.
 */
import { startAppUnderTest, type AppUnderTest } from '../support/running-app';

let server: AppUnderTest;
let customerUrl: string;

beforeAll(async () => {
  server = await startAppUnderTest({});
  customerUrl = `http://127.0.0.1:${server.app.customerPort}`;
});

afterAll(async () => {
  await server?.close();
});

it('listens on its own port, apart from the admin port', () => {
  expect(server.app.customerPort).toBeGreaterThan(0);
  expect(server.app.customerPort).not.toBe(server.app.adminPort);
});

it.each(['/', '/auth/login', '/auth/callback?code=x&state=y', '/anything'])(
  'GET %s is a page saying sign-in is not set up (503)',
  async (path) => {
    const response = await fetch(`${customerUrl}${path}`, { redirect: 'manual' });
    expect(response.status).toBe(503);
    expect(response.headers.get('content-type')).toBe('text/html; charset=utf-8');
    expect(response.headers.get('content-security-policy')).toBe(
      "default-src 'none'; style-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
    );
    const html = await response.text();
    expect(html).toContain('<h1>Customer sign-in is not set up</h1>');
    expect(html).toContain(
      "This dashboard signs customers in with their organisation's identity provider (OpenID Connect), and none is configured yet.",
    );
    expect(html).toContain('The operator dashboard on the admin port works as before.');
    expect(html).not.toContain('<script');
    // Every path answers this page, so a stylesheet would not load: none is linked.
    expect(html).not.toContain('<link');
    expect(response.headers.get('set-cookie')).toBeNull();
  },
);

it.each([
  ['GET', '/api/keys'],
  ['POST', '/api/keys'],
  ['GET', '/auth/session'],
])('%s %s answers 503 sign_in_not_configured as JSON', async (method, path) => {
  const response = await fetch(`${customerUrl}${path}`, { method });
  expect(response.status).toBe(503);
  expect(await response.json()).toEqual({
    error: {
      code: 'sign_in_not_configured',
      message:
        'Customer sign-in is not configured on this server (no OIDC_ISSUER_URL), so the customer API is unavailable. The operator dashboard and admin API are unaffected.',
    },
  });
});

it('says so in the start-up log', () => {
  expect(server.logs.lines.join('')).toContain('OIDC_ISSUER_URL is not set: the customer dashboard says sign-in is not configured');
});

it('leaves the operator dashboard and the admin API with ADMIN_TOKEN working on the admin port', async () => {
  const page = await fetch(`${server.adminUrl}/dashboard`);
  expect(page.status).toBe(200);
  expect(await page.text()).toContain('Admin token');
  const created = await server.admin('POST', '/admin/accounts', { id: 'acme', name: 'Acme' });
  expect(created.status).toBe(201);
  expect((await server.admin('GET', '/admin/accounts/acme')).body.name).toBe('Acme');
  // The customer port serves nothing of the admin API.
  const adminOnCustomerPort = await fetch(`${customerUrl}/admin/accounts`, { headers: { authorization: `Bearer ${'x'.repeat(20)}` } });
  expect(adminOnCustomerPort.status).toBe(503);
});
