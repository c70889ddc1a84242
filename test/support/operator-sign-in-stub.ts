import { randomBytes } from 'node:crypto';
import type { ClaimsRelyingParty } from '../../src/http/sign-in/oidc-relying-party';
import type { OperatorSignInSettings } from '../../src/platform/operator-sign-in-settings';

/**
 * Operator sign-in in process, for jest (openid-client is an ES module jest
 * cannot load): a relying party that trusts the callback's `code`, which the
 * test makes from a subject and its groups. Everything else (sessions, the
 * cookie, CSRF, roles from the claim) is the real server's.
 */
export const STUB_ISSUER = 'https://operators.example.com';

export const stubOperatorRelyingParty: ClaimsRelyingParty = {
  beginLogin: async (nowMs) => {
    const state = randomBytes(12).toString('hex');
    return {
      authorizationUrl: `${STUB_ISSUER}/authorize?state=${state}`,
      pending: { state, nonce: 'n', codeVerifier: 'v', startedAtMs: nowMs },
    };
  },
  completeLoginWithClaims: async (callbackQuery) => {
    const code = new URLSearchParams(callbackQuery).get('code') ?? '';
    const { subject, groups } = JSON.parse(Buffer.from(code, 'base64url').toString()) as { subject: string; groups: string[] };
    return { identity: { issuer: STUB_ISSUER, subject, displayName: subject }, claims: { sub: subject, groups } };
  },
};

export function stubOperatorSignInSettings(publicOrigin: string): OperatorSignInSettings {
  return {
    issuerUrl: STUB_ISSUER,
    clientId: 'operator-dashboard',
    redirectUrl: `${publicOrigin}/dashboard/auth/callback`,
    publicOrigin,
    scopes: ['openid', 'groups'],
    identityClaim: 'sub',
    rolesClaim: 'groups',
    roleMap: { 'gw-admins': ['admin'], 'gw-billing': ['billing'], 'gw-support': ['support'] },
    sessionSecret: 'operator-session-secret-for-tests-0123456789',
    sessionIdleMs: 900_000,
    sessionMaxAgeMs: 28_800_000,
    plainHttpLocalhost: true,
  };
}

export interface OperatorBrowser {
  cookie: string;
  csrfToken: string;
  /** A call as the dashboard makes it: the cookie, and for changes the Origin and CSRF token. */
  call(
    method: string,
    path: string,
    body?: unknown,
  ): Promise<{ status: number; body: { error?: { code: string; message: string } } & Record<string, unknown> }>;
}

const cookieOf = (response: Response) => (response.headers.get('set-cookie') ?? '').split(';')[0] ?? '';

/** Signs in through /dashboard/auth/login and the callback, as a browser would; throws if the server refuses. */
export async function signInOperator(adminUrl: string, subject: string, groups: string[]): Promise<OperatorBrowser> {
  const login = await fetch(`${adminUrl}/dashboard/auth/login`, { redirect: 'manual' });
  const state = new URL(login.headers.get('location')!).searchParams.get('state')!;
  const code = Buffer.from(JSON.stringify({ subject, groups })).toString('base64url');
  const callback = await fetch(`${adminUrl}/dashboard/auth/callback?code=${code}&state=${state}`, {
    redirect: 'manual',
    headers: { cookie: cookieOf(login) },
  });
  if (callback.headers.get('location') !== '/dashboard') throw new Error(`sign-in refused: ${callback.headers.get('location')}`);
  const cookie = cookieOf(callback);
  const session = (await (await fetch(`${adminUrl}/dashboard/auth/session`, { headers: { cookie } })).json()) as { csrfToken: string };
  return {
    cookie,
    csrfToken: session.csrfToken,
    async call(method, path, body) {
      const unsafe = !['GET', 'HEAD'].includes(method);
      const response = await fetch(`${adminUrl}${path}`, {
        method,
        headers: {
          cookie,
          ...(unsafe ? { origin: adminUrl, 'x-csrf-token': session.csrfToken } : {}),
          ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
        },
        ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
      });
      const text = await response.text();
      return { status: response.status, body: text ? (JSON.parse(text) as { error?: { code: string; message: string } }) : {} };
    },
  };
}

/** Where a refused sign-in lands: `/dashboard?sign_in=<reason>`. */
export async function refusedSignIn(adminUrl: string, subject: string, groups: string[]): Promise<string | null> {
  try {
    await signInOperator(adminUrl, subject, groups);
    return null;
  } catch (error) {
    return (error as Error).message;
  }
}
