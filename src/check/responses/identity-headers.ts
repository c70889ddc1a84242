/**
 * Headers that tell the upstream who the caller is. Set with overwrite
 * semantics on every allow, and removed on public routes, so a client can
 * never supply its own.
 */
export const IDENTITY_HEADERS = Object.freeze({
  accountId: 'x-gateway-account-id',
  keyId: 'x-gateway-key-id',
  keyPrefix: 'x-gateway-key-prefix',
  routeFamily: 'x-gateway-route-family',
});

export const ALL_IDENTITY_HEADERS: readonly string[] = Object.values(IDENTITY_HEADERS);
