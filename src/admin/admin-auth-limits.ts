/**
 * Limits on failed admin authentications (wrong admin tokens), per client
 * address and in total, over a fixed window. Read from the settings
 * (ADMIN_AUTH_*) and enforced by src/admin/admin-auth-limiter.ts.
 */
export interface AdminAuthLimits {
  /** Wrong tokens one client address may present per window; then it is refused (429) without its token being checked. */
  readonly failuresPerAddress: number;
  /** Wrong tokens from all addresses together per window; then only addresses that recently authenticated are served. */
  readonly failuresTotal: number;
  /** Window length in milliseconds. */
  readonly windowMs: number;
}

/** Which limit refused a request: its client address's own, or the total over all addresses. */
export type AuthLimitKind = 'address' | 'total';

/** Counts failed and refused admin authentications, for /metrics. Labels hold the limit kind only, never an address. */
export interface AdminAuthMetrics {
  adminAuthFailed(): void;
  adminAuthRefused(limit: AuthLimitKind): void;
}

export const DEFAULT_ADMIN_AUTH_LIMITS: AdminAuthLimits = Object.freeze({
  failuresPerAddress: 10,
  failuresTotal: 100,
  windowMs: 60_000,
});
