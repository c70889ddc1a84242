import { asRefusal, identityFromClaims, SignInRefused } from '../../../src/http/sign-in/oidc-relying-party';

const ISSUER = 'https://login.example.com';

describe('identityFromClaims', () => {
  it('with `sub`: issuer and subject, a verified email kept (lowercased), the name for display', () => {
    expect(
      identityFromClaims({ iss: ISSUER, sub: 'u-1', email: ' Ada@Example.COM ', email_verified: true, name: ' Ada L. ' }, 'sub'),
    ).toEqual({ issuer: ISSUER, subject: 'u-1', verifiedEmail: 'ada@example.com', displayName: 'Ada L.' });
  });

  it('with `sub`: an unverified email is not kept and never used', () => {
    expect(identityFromClaims({ iss: ISSUER, sub: 'u-1', email: 'ada@example.com', email_verified: false }, 'sub')).toEqual({
      issuer: ISSUER,
      subject: 'u-1',
    });
  });

  it('with `email`: the verified email is the subject ("true" as a string counts, as a few providers send it)', () => {
    expect(identityFromClaims({ iss: ISSUER, sub: 'pairwise-x', email: 'Ada@example.com', email_verified: 'true' }, 'email')).toEqual({
      issuer: ISSUER,
      subject: 'ada@example.com',
      verifiedEmail: 'ada@example.com',
      displayName: 'ada@example.com',
    });
  });

  it('with `email`: refuses a missing or unverified email', () => {
    const missing = () => identityFromClaims({ iss: ISSUER, sub: 'u-1' }, 'email');
    expect(missing).toThrow(SignInRefused);
    expect(missing).toThrow("did not share an email address, which this dashboard uses to identify people. Allow the 'email' scope");
    const unverified = () => identityFromClaims({ iss: ISSUER, sub: 'u-1', email: 'ada@example.com' }, 'email');
    expect(unverified).toThrow('has not verified your email address');
  });

  it('refuses claims without an issuer or subject', () => {
    expect(() => identityFromClaims({ sub: 'u-1' }, 'sub')).toThrow('did not say who signed in');
    expect(() => identityFromClaims({ iss: ISSUER, sub: '' }, 'sub')).toThrow('did not say who signed in');
  });
});

describe('asRefusal', () => {
  // The shapes of openid-client's errors (ES modules, which jest cannot load): name, code, the OAuth error and a cause.
  it('an error answer from the provider', () => {
    const refused = asRefusal({ name: 'AuthorizationResponseError', code: 'OAUTH_AUTHORIZATION_RESPONSE_ERROR', error: 'access_denied' });
    expect([refused.reason, refused.message]).toEqual(['provider_error', 'The identity provider did not sign you in (access_denied).']);
  });

  it('a refused code', () => {
    const refused = asRefusal({ name: 'ResponseBodyError', code: 'OAUTH_RESPONSE_BODY_ERROR', error: 'invalid_grant' });
    expect(refused.reason).toBe('code_refused');
    expect(refused.detail).toEqual({ errorName: 'ResponseBodyError', errorCode: 'OAUTH_RESPONSE_BODY_ERROR', oauthError: 'invalid_grant' });
  });

  it('a nonce that does not match: names the claim, never its value', () => {
    const error = {
      name: 'ClientError',
      code: 'OAUTH_JWT_CLAIM_COMPARISON_FAILED',
      message: 'unexpected JWT claim value encountered',
      cause: { cause: { claim: 'nonce', expected: 'the-nonce-value', claims: { nonce: 'other-nonce-value' } } },
    };
    const refused = asRefusal(error);
    expect(refused.reason).toBe('response_invalid');
    expect(refused.message).toBe("The identity provider's ID token was not issued for this sign-in (its nonce does not match).");
    expect(JSON.stringify(refused.detail)).not.toMatch(/nonce-value/);
    expect(refused.detail.claim).toBe('nonce');
  });

  it('other failed checks, and an unreachable provider', () => {
    expect(asRefusal({ name: 'ClientError', code: 'OAUTH_INVALID_RESPONSE' }).reason).toBe('response_invalid');
    expect(asRefusal({ name: 'ClientError', code: 'OAUTH_TIMEOUT' }).reason).toBe('provider_unreachable');
    expect(asRefusal(new TypeError('fetch failed')).reason).toBe('provider_unreachable');
    expect(asRefusal(undefined).reason).toBe('provider_unreachable');
  });
});
