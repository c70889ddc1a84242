/**
 * The admin API's answers as the CLI reads them (the wire contract, see
 * docs/reference/admin-api.md). Declared here rather than imported from
 * src/admin so the CLI depends only on what goes over HTTP.
 */

export interface ApiLimit {
  limit: number;
  window: string;
}

export interface ApiTokenBudget {
  tokens: number;
  window: string;
}

export interface ApiAccount {
  id: string;
  name: string;
  billing: {
    status: 'active' | 'suspended';
    creditBalance: number | null;
    /** Absent from servers older than issue 16. */
    monthlySpendCap?: number | null;
    spentThisMonth?: number;
    creditShortfall?: number;
    /** The amounts as money, and what the integers count (absent from servers older than issue 35). */
    currency?: ApiCurrency;
    creditBalanceFormatted?: string | null;
    monthlySpendCapFormatted?: string | null;
    spentThisMonthFormatted?: string;
    creditShortfallFormatted?: string;
  };
  limits: { key: ApiLimit[] | null; account: ApiLimit[] | null };
  /** The account's own active-key cap; null: the service default applies (absent from servers older than issue 15). */
  maxActiveKeys?: number | null;
  tokenBudgets?: { key: ApiTokenBudget[] | null; account: ApiTokenBudget[] | null };
  /** Absent from servers older than issue 38. */
  keyRestrictions?: ApiRestrictions | null;
  /** What is done with a key found published (absent from servers older than issue 39). */
  exposedKeyAction?: 'revoke' | 'rotate';
  createdAt: string;
}

export interface ApiAccountList {
  accounts: ApiAccount[];
  /** Accounts whose stored record cannot be read (absent from servers older than issue 13). */
  unreadable?: { id: string; problem: string }[];
}

/** What the integer amounts count: 10^-exponent of the ISO 4217 currency `code`. */
export interface ApiCurrency {
  code: string;
  exponent: number;
}

export interface ApiCredit {
  accountId: string;
  creditBalance: number;
  /** Absent from servers older than issue 35. */
  currency?: ApiCurrency;
  creditBalanceFormatted?: string;
}

export interface ApiKey {
  id: string;
  accountId: string;
  prefix: string;
  name: string;
  environment: 'live' | 'test';
  status: 'active' | 'revoked' | 'expired';
  createdAt: string;
  lastUsedAt?: string | null;
  expiresAt: string | null;
  revokedAt?: string | null;
  /** Set while a rotated key is still in its grace period: when it stops working. */
  revokeAt?: string | null;
  replaces?: string | null;
  replacedBy?: string | null;
  limits: ApiLimit[] | null;
  /** Who created the key (absent from servers older than issue 15; null for keys from before it). */
  createdBy?: ApiActor | null;
  /** Absent from servers older than issue 16. */
  tokenBudgets?: ApiTokenBudget[] | null;
  monthlySpendCap?: number | null;
  /** Absent from servers older than issue 35. */
  monthlySpendCapFormatted?: string | null;
  /** Absent from servers older than issue 38. */
  restrictions?: ApiRestrictions | null;
}

/** A key's restrictions, or an account's defaults for its keys (docs/concepts/key-restrictions.md). */
export interface ApiRestrictions {
  endpoints?: string[];
  readOnly?: boolean;
  models?: string[];
  sourceAddresses?: string[];
}

export interface ApiKeyList {
  keys: ApiKey[];
}

/** The only answers that ever carry a full key: creation and rotation. */
export interface ApiCreatedKey {
  id: string;
  key: string;
  prefix: string;
  accountId: string;
  name: string;
  environment: 'live' | 'test';
  createdAt: string;
}

export interface ApiRotatedKey extends ApiCreatedKey {
  replaces: string;
  oldKey: ApiKey;
}

/** Who made a change. */
export type ApiActor = { kind: 'operator' } | { kind: 'member'; issuer: string; subject: string };

export interface ApiMember {
  id: string;
  accountId: string;
  role: 'owner' | 'developer' | 'viewer';
  /** `invited` until the invited person first signs in with that verified email. */
  status: 'active' | 'invited';
  issuer: string | null;
  subject: string | null;
  email: string | null;
  addedAt: string;
  addedBy: ApiActor;
  joinedAt: string | null;
}

export interface ApiMemberList {
  members: ApiMember[];
}

export interface ApiErrorBody {
  error: { code: string; message: string; field?: string };
}

export interface ApiUsageTotals {
  requests: number;
  inputTokens: number;
  outputTokens: number;
  cachedInputTokens: number;
  cacheCreationTokens: number;
  costMinorUnits: number;
  /** Absent from servers older than issue 35. */
  costFormatted?: string;
  estimatedRequests: number;
}

export type ApiUsageGroup = ApiUsageTotals & { keyId?: string; keyPrefix?: string | null; model?: string | null };

export interface ApiUsageReport {
  accountId: string;
  granularity: 'hour' | 'day';
  groupBy: 'key' | 'model' | null;
  from: string;
  to: string;
  /** Absent from servers older than issue 35. */
  currency?: ApiCurrency;
  total: ApiUsageTotals;
  buckets: { start: string; total: ApiUsageTotals; groups?: ApiUsageGroup[] }[];
}

/** An operator API token as the admin API shows it (never the token, but when it is created). */
export interface ApiOperatorToken {
  id: string;
  name: string;
  displayPrefix: string;
  scopes: string[];
  status: 'active' | 'revoked' | 'expired';
  createdAt: string;
  expiresAt: string;
  revokedAt: string | null;
}

export interface ApiCreatedOperatorToken extends ApiOperatorToken {
  /** The token itself: in this answer only. */
  token: string;
}

export interface ApiOperatorTokenList {
  tokens: ApiOperatorToken[];
}
