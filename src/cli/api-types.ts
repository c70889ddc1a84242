/**
 * The admin API's answers as the CLI reads them (the wire contract, see the
 * README's "Admin API and CLI"). Declared here rather than imported from
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
  };
  limits: { key: ApiLimit[] | null; account: ApiLimit[] | null };
  tokenBudgets?: { key: ApiTokenBudget[] | null; account: ApiTokenBudget[] | null };
  createdAt: string;
}

export interface ApiAccountList {
  accounts: ApiAccount[];
  /** Accounts whose stored record cannot be read (absent from servers older than issue 13). */
  unreadable?: { id: string; problem: string }[];
}

export interface ApiCredit {
  accountId: string;
  creditBalance: number;
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
  /** Absent from servers older than issue 16. */
  tokenBudgets?: ApiTokenBudget[] | null;
  monthlySpendCap?: number | null;
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
  estimatedRequests: number;
}

export type ApiUsageGroup = ApiUsageTotals & { keyId?: string; keyPrefix?: string | null; model?: string | null };

export interface ApiUsageReport {
  accountId: string;
  granularity: 'hour' | 'day';
  groupBy: 'key' | 'model' | null;
  from: string;
  to: string;
  total: ApiUsageTotals;
  buckets: { start: string; total: ApiUsageTotals; groups?: ApiUsageGroup[] }[];
}
