import { problemsOf, settingsOf } from '../../support/settings-results';

type Env = Record<string, string | undefined>;

const SECRET = 'a-session-secret-of-32-characters-or-more';
const CONFIGURED: Env = {
  OIDC_ISSUER_URL: 'https://login.example.com/tenant',
  OIDC_CLIENT_ID: 'gateway-dashboard',
  OIDC_CLIENT_SECRET: 'client-secret-value',
  OIDC_REDIRECT_URL: 'https://console.example.com/auth/callback',
  CUSTOMER_SESSION_SECRET: SECRET,
};

describe('customer dashboard settings', () => {
  it('by default listens on 9193 with sign-in not configured', () => {
    const settings = settingsOf({});
    expect(settings.customerPort).toBe(9193);
    expect(settings.customerSignIn).toBeUndefined();
  });

  it('reads a confidential client with the documented defaults, frozen', () => {
    const settings = settingsOf({ ...CONFIGURED, CUSTOMER_PORT: '8443' });
    expect(settings.customerPort).toBe(8443);
    expect(settings.customerSignIn).toEqual({
      issuerUrl: 'https://login.example.com/tenant',
      clientId: 'gateway-dashboard',
      clientSecret: 'client-secret-value',
      redirectUrl: 'https://console.example.com/auth/callback',
      publicOrigin: 'https://console.example.com',
      scopes: ['openid', 'email', 'profile'],
      identityClaim: 'sub',
      sessionSecret: SECRET,
      sessionIdleMs: 1_800_000,
      sessionMaxAgeMs: 43_200_000,
      plainHttpLocalhost: false,
    });
    expect(Object.isFrozen(settings.customerSignIn)).toBe(true);
    expect(Object.isFrozen(settings.customerSignIn!.scopes)).toBe(true);
  });

  it('takes a public client (no secret), its own scopes, the email claim and session lifetimes', () => {
    const settings = settingsOf({
      ...CONFIGURED,
      OIDC_CLIENT_SECRET: '',
      OIDC_SCOPES: ' openid   email ',
      OIDC_IDENTITY_CLAIM: 'email',
      CUSTOMER_SESSION_IDLE_TIMEOUT_MS: '600000',
      CUSTOMER_SESSION_MAX_AGE_MS: '3600000',
    });
    expect(settings.customerSignIn).not.toHaveProperty('clientSecret');
    expect(settings.customerSignIn).toMatchObject({
      scopes: ['openid', 'email'],
      identityClaim: 'email',
      sessionIdleMs: 600_000,
      sessionMaxAgeMs: 3_600_000,
    });
  });

  it('allows plain HTTP only on a loopback host, and only with the explicit opt-in', () => {
    const local = {
      ...CONFIGURED,
      OIDC_ISSUER_URL: 'http://127.0.0.1:4000',
      OIDC_REDIRECT_URL: 'http://localhost:9193/auth/callback',
    };
    expect(problemsOf(local)).toEqual([
      'OIDC_ISSUER_URL: plain http:// on 127.0.0.1 needs CUSTOMER_PLAIN_HTTP_LOCALHOST=true (development only)',
      'OIDC_REDIRECT_URL: plain http:// on localhost needs CUSTOMER_PLAIN_HTTP_LOCALHOST=true (development only)',
    ]);
    expect(settingsOf({ ...local, CUSTOMER_PLAIN_HTTP_LOCALHOST: 'true' }).customerSignIn).toMatchObject({
      plainHttpLocalhost: true,
      publicOrigin: 'http://localhost:9193',
    });
    expect(
      problemsOf({ ...CONFIGURED, OIDC_REDIRECT_URL: 'http://console.example.com/auth/callback', CUSTOMER_PLAIN_HTTP_LOCALHOST: 'true' }),
    ).toEqual([
      'OIDC_REDIRECT_URL: must be an https:// URL (plain http:// is allowed only on a loopback host with CUSTOMER_PLAIN_HTTP_LOCALHOST=true)',
    ]);
    expect(problemsOf({ ...CONFIGURED, CUSTOMER_PLAIN_HTTP_LOCALHOST: 'true' })).toEqual([
      'CUSTOMER_PLAIN_HTTP_LOCALHOST: only for an http:// redirect URL on a loopback host; an https:// dashboard keeps Secure cookies',
    ]);
  });

  it('lists every problem at once', () => {
    const problems = problemsOf({
      CUSTOMER_PORT: 'nine',
      OIDC_ISSUER_URL: 'ftp://login.example.com?x=1',
      OIDC_REDIRECT_URL: 'https://console.example.com/callback?next=/',
      OIDC_SCOPES: 'email profile',
      OIDC_IDENTITY_CLAIM: 'name',
      CUSTOMER_SESSION_SECRET: 'short',
      CUSTOMER_SESSION_IDLE_TIMEOUT_MS: '1000',
    });
    expect(problems.map((problem) => problem.split(':')[0])).toEqual([
      'CUSTOMER_PORT',
      'OIDC_IDENTITY_CLAIM',
      'CUSTOMER_SESSION_IDLE_TIMEOUT_MS',
    ]);
    const rest = problemsOf({
      OIDC_ISSUER_URL: 'ftp://login.example.com?x=1',
      OIDC_REDIRECT_URL: 'https://console.example.com/callback?next=/',
      OIDC_SCOPES: 'email profile',
      OIDC_IDENTITY_CLAIM: 'email',
      CUSTOMER_SESSION_SECRET: 'short',
      CUSTOMER_SESSION_IDLE_TIMEOUT_MS: '7200000',
      CUSTOMER_SESSION_MAX_AGE_MS: '3600000',
    });
    expect(rest).toEqual([
      "OIDC_ISSUER_URL: must be an https:// URL, got 'ftp:'",
      'OIDC_ISSUER_URL: must not have a query or fragment (it is the issuer identifier)',
      'OIDC_CLIENT_ID: required with OIDC_ISSUER_URL (the client id the identity provider gave this dashboard)',
      "OIDC_REDIRECT_URL: must be the dashboard's public origin followed by /auth/callback and nothing else, got 'https://console.example.com/callback?next=/'",
      "OIDC_SCOPES: must include 'openid' (got 'email profile')",
      'CUSTOMER_SESSION_SECRET: must be at least 32 characters (use a long random value)',
      'CUSTOMER_SESSION_IDLE_TIMEOUT_MS: must not exceed CUSTOMER_SESSION_MAX_AGE_MS (got 7200000 > 3600000)',
    ]);
  });

  it('needs the client id, the redirect URL and the session secret with an issuer, and the email scope for the email claim', () => {
    expect(
      problemsOf({ OIDC_ISSUER_URL: 'https://login.example.com', OIDC_IDENTITY_CLAIM: 'email', OIDC_SCOPES: 'openid profile' }),
    ).toEqual([
      'OIDC_CLIENT_ID: required with OIDC_ISSUER_URL (the client id the identity provider gave this dashboard)',
      'OIDC_REDIRECT_URL: required with OIDC_ISSUER_URL (e.g. https://console.example.com/auth/callback)',
      "OIDC_SCOPES: must include 'email' when OIDC_IDENTITY_CLAIM=email",
      'CUSTOMER_SESSION_SECRET: required with OIDC_ISSUER_URL (≥ 32 random characters, the same on every replica)',
    ]);
  });

  it('never ignores a half-done configuration: client settings without an issuer are an error', () => {
    expect(problemsOf({ OIDC_CLIENT_ID: 'x', CUSTOMER_SESSION_SECRET: SECRET })).toEqual([
      'OIDC_ISSUER_URL: required when OIDC_CLIENT_ID, CUSTOMER_SESSION_SECRET are set',
    ]);
    expect(problemsOf({ OIDC_REDIRECT_URL: 'https://console.example.com/auth/callback' })).toEqual([
      'OIDC_ISSUER_URL: required when OIDC_REDIRECT_URL is set',
    ]);
  });

  it('never repeats a secret in a problem', () => {
    const problems = problemsOf({ ...CONFIGURED, CUSTOMER_SESSION_SECRET: 'too-short-secret', OIDC_CLIENT_ID: '' }).join('\n');
    expect(problems).not.toContain('too-short-secret');
    expect(problems).not.toContain('client-secret-value');
  });
});
