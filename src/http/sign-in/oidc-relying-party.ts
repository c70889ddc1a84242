import type { CustomerIdentity } from '../../accounts/customer-identity';
import type { CustomerSignInSettings, IdentityClaim } from '../../platform/settings';

/** What a relying party needs of its dashboard's settings (the customer's and the operator's have these alike). */
export type RelyingPartySettings = Pick<
  CustomerSignInSettings,
  'issuerUrl' | 'clientId' | 'clientSecret' | 'redirectUrl' | 'scopes' | 'identityClaim'
>;
import type { PendingLogin } from './sign-in-session';

/**
 * The OpenID Connect relying party: authorization code flow with PKCE (S256),
 * `state` and `nonce`, by `openid-client` (certified; no OAuth written here).
 *
 * openid-client is an ES module and this project is CommonJS: tsc would turn
 * `import()` into `require()`, so the import is made at run time through a
 * function tsc does not rewrite. Nothing loads it until the first sign-in, so
 * the service starts (and serves Checks) even when the identity provider is down.
 */
type OpenIdClient = typeof import('openid-client');
type OidcConfiguration = import('openid-client').Configuration;

// eslint-disable-next-line @typescript-eslint/no-implied-eval -- a real dynamic import(), which tsc (module: commonjs) would rewrite to require()
const importModule = new Function('specifier', 'return import(specifier)') as (specifier: string) => Promise<unknown>;

/** Seconds an identity provider request may take (discovery, token, userinfo, keys). */
const PROVIDER_TIMEOUT_SECONDS = 10;

export type SignInRefusalReason =
  /** No sign-in with this `state` was started in this browser (tampered, replayed, or another browser's). */
  | 'unknown_sign_in'
  /** Started here, but longer ago than PENDING_LOGIN_TTL_MS. */
  | 'sign_in_expired'
  /** The identity provider answered with an error (e.g. the person cancelled). */
  | 'provider_error'
  /** The token endpoint refused the code (used before, expired, or not issued for this sign-in). */
  | 'code_refused'
  /** The answer or ID token failed a check (issuer, audience, signature, expiry, nonce). */
  | 'response_invalid'
  /** The identity provider could not be reached or answered garbage. */
  | 'provider_unreachable'
  /** Signed in, but the identity claim this dashboard uses is missing or unverified. */
  | 'identity_unusable';

/** A sign-in that must not complete. `detail` holds names and codes only, never a value from the exchange. */
export class SignInRefused extends Error {
  constructor(
    readonly reason: SignInRefusalReason,
    message: string,
    readonly detail: Readonly<Record<string, string>> = {},
  ) {
    super(message);
    this.name = 'SignInRefused';
  }
}

/** What a dashboard's server needs from the identity provider side. */
export interface RelyingParty {
  /** Where to send the browser, and what its return must match. */
  beginLogin(nowMs: number): Promise<{ authorizationUrl: string; pending: PendingLogin }>;
  /** Checks the provider's answer (the callback's query string) against the pending sign-in; throws SignInRefused. */
  completeLogin(callbackQuery: string, pending: PendingLogin): Promise<CustomerIdentity>;
}

/** A relying party that also hands over the claims it was told to read (the operator dashboard's role claim). */
export interface ClaimsRelyingParty {
  beginLogin(nowMs: number): Promise<{ authorizationUrl: string; pending: PendingLogin }>;
  completeLoginWithClaims(
    callbackQuery: string,
    pending: PendingLogin,
  ): Promise<{ identity: CustomerIdentity; claims: Record<string, unknown> }>;
}

export class OidcRelyingParty implements RelyingParty, ClaimsRelyingParty {
  private discovered: Promise<{ client: OpenIdClient; config: OidcConfiguration }> | undefined;

  /** `extraClaims`: claims the caller reads besides the identity; when the ID token lacks one, userinfo is asked too. */
  constructor(
    private readonly settings: RelyingPartySettings,
    private readonly extraClaims: readonly string[] = [],
  ) {}

  async beginLogin(nowMs: number): Promise<{ authorizationUrl: string; pending: PendingLogin }> {
    const { client, config } = await this.provider();
    const pending: PendingLogin = {
      state: client.randomState(),
      nonce: client.randomNonce(),
      codeVerifier: client.randomPKCECodeVerifier(),
      startedAtMs: nowMs,
    };
    const url = client.buildAuthorizationUrl(config, {
      redirect_uri: this.settings.redirectUrl,
      scope: this.settings.scopes.join(' '),
      code_challenge: await client.calculatePKCECodeChallenge(pending.codeVerifier),
      code_challenge_method: 'S256',
      state: pending.state,
      nonce: pending.nonce,
    });
    return { authorizationUrl: url.href, pending };
  }

  async completeLogin(callbackQuery: string, pending: PendingLogin): Promise<CustomerIdentity> {
    return (await this.completeLoginWithClaims(callbackQuery, pending)).identity;
  }

  async completeLoginWithClaims(
    callbackQuery: string,
    pending: PendingLogin,
  ): Promise<{ identity: CustomerIdentity; claims: Record<string, unknown> }> {
    const { client, config } = await this.provider();
    // The redirect URI sent to the token endpoint is the configured one, whatever a proxy made of the request's own URL.
    const currentUrl = new URL(this.settings.redirectUrl);
    currentUrl.search = callbackQuery;
    try {
      const tokens = await client.authorizationCodeGrant(config, currentUrl, {
        pkceCodeVerifier: pending.codeVerifier,
        expectedState: pending.state,
        expectedNonce: pending.nonce,
        idTokenExpected: true,
      });
      const idToken = tokens.claims();
      if (!idToken) throw new SignInRefused('response_invalid', 'The identity provider sent no ID token.');
      let claims: Record<string, unknown> = idToken;
      const lacksExtra = this.extraClaims.some((claim) => idToken[claim] === undefined);
      if ((lacksExtra || needsUserInfo(idToken, this.settings.identityClaim)) && config.serverMetadata().userinfo_endpoint) {
        // The ID token stays authoritative for who this is; userinfo adds email and name (fetchUserInfo checks `sub`).
        const userInfo = await client.fetchUserInfo(config, tokens.access_token, idToken.sub);
        claims = { ...userInfo, iss: idToken.iss, sub: idToken.sub };
      }
      return { identity: identityFromClaims(claims, this.settings.identityClaim), claims };
    } catch (error) {
      throw asRefusal(error);
    }
  }

  /** Discovered once and kept; a failed discovery is retried on the next sign-in. */
  private provider(): Promise<{ client: OpenIdClient; config: OidcConfiguration }> {
    this.discovered ??= this.discover().catch((error: unknown) => {
      this.discovered = undefined;
      throw asRefusal(error);
    });
    return this.discovered;
  }

  private async discover(): Promise<{ client: OpenIdClient; config: OidcConfiguration }> {
    const client = await loadOpenIdClient();
    const { clientId, clientSecret } = this.settings;
    const config = await client.discovery(
      new URL(this.settings.issuerUrl),
      clientId,
      undefined,
      // A confidential client authenticates as most providers register one by default; a public one relies on PKCE.
      clientSecret ? client.ClientSecretBasic(clientSecret) : client.None(),
      {
        timeout: PROVIDER_TIMEOUT_SECONDS,
        // Only on a loopback issuer with CUSTOMER_PLAIN_HTTP_LOCALHOST or OPERATOR_PLAIN_HTTP_LOCALHOST (settings.ts refuses anything else).
        execute: new URL(this.settings.issuerUrl).protocol === 'http:' ? [client.allowInsecureRequests] : [],
      },
    );
    return { client, config };
  }
}

async function loadOpenIdClient(): Promise<OpenIdClient> {
  try {
    return (await importModule('openid-client')) as OpenIdClient;
  } catch (error) {
    throw new SignInRefused('provider_unreachable', 'The OpenID Connect client library could not be loaded.', {
      cause: (error as Error).message,
    });
  }
}

function needsUserInfo(claims: Record<string, unknown>, identityClaim: IdentityClaim): boolean {
  return identityClaim === 'email' ? typeof claims.email !== 'string' : typeof claims.email !== 'string' || typeof claims.name !== 'string';
}

/** `email_verified` is a boolean by the specification; a few providers send the string "true". */
function emailIsVerified(claims: Record<string, unknown>): boolean {
  return claims.email_verified === true || claims.email_verified === 'true';
}

/**
 * Who signed in, from the provider's claims. With `sub`, the identity is the
 * issuer and subject (stable, unique within the issuer). With `email`, it is
 * the issuer and the email address, only if the provider marked it verified.
 * An email is kept (for invitations) only when verified.
 */
export function identityFromClaims(claims: Record<string, unknown>, identityClaim: IdentityClaim): CustomerIdentity {
  const issuer = claims.iss;
  const sub = claims.sub;
  if (typeof issuer !== 'string' || typeof sub !== 'string' || sub === '') {
    throw new SignInRefused('response_invalid', 'The identity provider did not say who signed in (no issuer or subject).');
  }
  const verifiedEmail = typeof claims.email === 'string' && emailIsVerified(claims) ? claims.email.trim().toLowerCase() : undefined;
  let subject = sub;
  if (identityClaim === 'email') {
    if (typeof claims.email !== 'string' || claims.email.trim() === '') {
      throw new SignInRefused(
        'identity_unusable',
        "The identity provider did not share an email address, which this dashboard uses to identify people. Allow the 'email' scope and try again.",
      );
    }
    if (!verifiedEmail) {
      throw new SignInRefused(
        'identity_unusable',
        'Your identity provider has not verified your email address, which this dashboard uses to identify people. Verify it there and try again.',
      );
    }
    subject = verifiedEmail;
  }
  const name = typeof claims.name === 'string' && claims.name.trim() !== '' ? claims.name.trim() : undefined;
  const displayName = name ?? verifiedEmail;
  return { issuer, subject, ...(verifiedEmail ? { verifiedEmail } : {}), ...(displayName ? { displayName } : {}) };
}

interface LibraryError {
  name?: unknown;
  code?: unknown;
  error?: unknown;
  cause?: unknown;
}

/**
 * openid-client's errors, sorted into what the person is told. Only error
 * names, codes and the failed claim's name are kept: their messages and
 * causes can hold the values being compared (state, nonce, tokens).
 */
export function asRefusal(error: unknown): SignInRefused {
  if (error instanceof SignInRefused) return error;
  const failure = (error ?? {}) as LibraryError;
  const name = typeof failure.name === 'string' ? failure.name : 'Error';
  const code = typeof failure.code === 'string' ? failure.code : '';
  const detail: Record<string, string> = { errorName: name, ...(code ? { errorCode: code } : {}) };
  if (name === 'AuthorizationResponseError') {
    const oauthError = typeof failure.error === 'string' ? failure.error : 'error';
    return new SignInRefused('provider_error', `The identity provider did not sign you in (${oauthError}).`, { ...detail, oauthError });
  }
  if (name === 'ResponseBodyError') {
    const oauthError = typeof failure.error === 'string' ? failure.error : 'error';
    return new SignInRefused(
      'code_refused',
      `The identity provider refused to complete this sign-in (${oauthError}): its code was already used, has expired, or was not issued for this sign-in.`,
      { ...detail, oauthError },
    );
  }
  if (
    code === 'OAUTH_JWT_CLAIM_COMPARISON_FAILED' ||
    code === 'OAUTH_JSON_ATTRIBUTE_COMPARISON_FAILED' ||
    code === 'OAUTH_JWT_TIMESTAMP_CHECK_FAILED'
  ) {
    const claim = claimNameOf(failure.cause);
    return new SignInRefused(
      'response_invalid',
      claim === 'nonce'
        ? "The identity provider's ID token was not issued for this sign-in (its nonce does not match)."
        : `The identity provider's answer failed a check${claim ? ` (${claim})` : ''}.`,
      { ...detail, ...(claim ? { claim } : {}) },
    );
  }
  if (code.startsWith('OAUTH_') && code !== 'OAUTH_TIMEOUT' && code !== 'OAUTH_ABORT' && code !== 'OAUTH_RESPONSE_IS_NOT_CONFORM') {
    return new SignInRefused('response_invalid', "The identity provider's answer failed a check.", detail);
  }
  return new SignInRefused(
    'provider_unreachable',
    'The identity provider could not be reached or did not answer as expected. Try again shortly.',
    detail,
  );
}

/** The name of the claim or parameter a comparison failed on (oauth4webapi puts it in the cause), never its value. */
function claimNameOf(cause: unknown): string | undefined {
  const inner = (cause as { cause?: { claim?: unknown; attribute?: unknown } } | undefined)?.cause;
  const claim = inner?.claim ?? inner?.attribute;
  return typeof claim === 'string' && /^[a-z_]{1,40}$/.test(claim) ? claim : undefined;
}
