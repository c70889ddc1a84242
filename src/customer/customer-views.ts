import {
  actorView,
  commonKeyView,
  keyViewStatus,
  limitsView,
  type ActorView,
  type CommonKeyView,
  type KeyViewStatus,
  type LimitView,
} from '../http/api-views';
import type { CustomerIdentity, MemberRole } from '../accounts/customer-identity';
import { actionsOf, type CustomerAction } from './customer-permissions';
import type { Account, AccountStatus, StoredKey } from '../keys/key-records';
import { currencyView, DEFAULT_CURRENCY, formatMoney, type Currency } from '../accounts/money';
import type { RatePlan } from '../accounts/limits/rate-limits';
import type { KeyEnvironment } from '../keys/customer-key';
import { USAGE_WINDOWS, type UsageGranularity, type UsageWindow } from '../keys/request-counts';
import type { AuditEntry, RequestCountsByKey, UsageBucket } from '../ports/store';
import { totalTokens } from '../metering/usage';
import { addUsageTotals, zeroUsageTotals, type UsageTotals } from '../metering/usage-record';

/**
 * Store records → customer API answers. As in the admin views every field is
 * picked explicitly, and these pick less: no balance figure, no per-key
 * limit override details beyond what applies, no other account.
 */

export interface MeView {
  identity: { issuer: string; subject: string; email: string | null; name: string | null };
  /** Ordered by account id; empty means "no access" (the dashboard says so). */
  accounts: { id: string; name: string; role: MemberRole }[];
}

export function meView(identity: CustomerIdentity, accounts: MeView['accounts']): MeView {
  return {
    identity: {
      issuer: identity.issuer,
      subject: identity.subject,
      email: identity.verifiedEmail ?? null,
      name: identity.displayName ?? null,
    },
    accounts,
  };
}

export interface AccountSummaryView {
  id: string;
  name: string;
  role: MemberRole;
  /** What the caller's role may do here (the permission matrix's row); the server checks every call anyway. */
  permissions: CustomerAction[];
  billing: {
    status: AccountStatus;
    prepaid: boolean;
    /** Prepaid accounts: whether requests are still paid for (balance above zero). Never the balance. Null when post-paid. */
    creditRemains: boolean | null;
  };
  /** The limits that apply now: the account's overrides, else the operator's default plan. */
  limits: { key: LimitView[]; account: LimitView[] };
  keys: { active: number; maxActiveKeys: number };
}

export function accountSummaryView(
  account: Account,
  role: MemberRole,
  facts: { defaultPlan: RatePlan; defaultMaxActiveKeys: number; activeKeys: number },
): AccountSummaryView {
  const prepaid = account.creditBalance !== undefined;
  return {
    id: account.id,
    name: account.name,
    role,
    permissions: actionsOf(role),
    billing: { status: account.status, prepaid, creditRemains: prepaid ? account.creditBalance! > 0 : null },
    limits: {
      key: limitsView(account.limits?.key ?? facts.defaultPlan.key) ?? [],
      account: limitsView(account.limits?.account ?? facts.defaultPlan.account) ?? [],
    },
    keys: { active: facts.activeKeys, maxActiveKeys: account.maxActiveKeys ?? facts.defaultMaxActiveKeys },
  };
}

/** Never the key or its hash. */
export type CustomerKeyView = CommonKeyView;
export const customerKeyView = commonKeyView;

/** The one customer answer that carries a full key: create and regenerate. */
export function customerCreatedKeyView(key: StoredKey, fullKey: string, nowMs: number) {
  return { ...customerKeyView(key, nowMs), key: fullKey };
}

export interface CustomerAuditEntryView {
  id: string;
  time: string;
  action: AuditEntry['action'];
  actor: ActorView;
  keyId: string | null;
  keyPrefix: string | null;
  memberId: string | null;
  /**
   * Only for key, member and webhook changes (what the account's own people set): the operator's account changes
   * (billing, credit, limits) carry figures that stay internal.
   */
  detail: string | null;
}

export function customerAuditEntryView(entry: AuditEntry): CustomerAuditEntryView {
  const detailShown = entry.action.startsWith('key.') || entry.action.startsWith('member.') || entry.action.startsWith('webhook.');
  return {
    id: entry.id,
    time: entry.time,
    action: entry.action,
    actor: actorView(entry.actor),
    keyId: entry.keyId ?? null,
    keyPrefix: entry.keyPrefix ?? null,
    memberId: entry.memberId ?? null,
    detail: detailShown ? (entry.detail ?? null) : null,
  };
}

/**
 * The series each key (and the total) has, in this order. `requests`: requests allowed at Check (the request counts);
 * the rest come from the usage ledger (metered answers): `tokens` is every token counted (the four kinds, as a
 * token budget consumes them), and `costMinorUnits` the spend as an integer count of the operator's unit (`currency`:
 * 10^-exponent of the currency; the name stays, clients read it). `spendFormatted` shows the same spend as money.
 */
export const USAGE_METRICS = [
  'requests',
  'tokens',
  'inputTokens',
  'outputTokens',
  'cachedInputTokens',
  'cacheCreationTokens',
  'costMinorUnits',
] as const;
export type UsageMetric = (typeof USAGE_METRICS)[number];
type MeteredMetric = Exclude<UsageMetric, 'requests'>;

export interface UsageView {
  window: UsageWindow;
  granularity: UsageGranularity;
  /** Start of each bucket (UTC), oldest first; the last one is the current hour or day, still counting. */
  bucketStarts: string[];
  /** Counts reach the store in batches: the newest requests show up within this long. */
  countsDelayMs: number;
  metrics: UsageMetric[];
  /** What `costMinorUnits` counts: 10^-exponent of the ISO 4217 currency `code`. */
  currency: { code: string; exponent: number };
  /** Per bucket, over every key of the account (revoked and deleted ones included). */
  totals: Record<UsageMetric, number[]>;
  /** The spend of `totals` as money: the window's sum and each bucket's ("$0.0042"). */
  spendFormatted: SpendFormatted;
  /** Keys that are not revoked, and any other key with requests or metered usage in the window; newest first. */
  keys: {
    id: string;
    prefix: string;
    name: string;
    environment: KeyEnvironment;
    status: KeyViewStatus;
    series: Record<UsageMetric, number[]>;
    spendFormatted: SpendFormatted;
  }[];
}

export interface SpendFormatted {
  total: string;
  buckets: string[];
}

/** Summed in integers, then formatted: the shown total is the exact sum of the shown buckets. */
function spendFormatted(costs: readonly number[], currency: Currency): SpendFormatted {
  return {
    total: formatMoney(
      costs.reduce((sum, n) => sum + n, 0),
      currency,
    ),
    buckets: costs.map((cost) => formatMoney(cost, currency)),
  };
}

/** A bucket's metered figures for one key (or summed over keys), named as the view names them. */
function meteredFigures(totals: UsageTotals | undefined): Record<MeteredMetric, number> {
  const t = totals ?? zeroUsageTotals();
  return {
    tokens: totalTokens(t),
    inputTokens: t.inputTokens,
    outputTokens: t.outputTokens,
    cachedInputTokens: t.cachedInputTokens,
    cacheCreationTokens: t.cacheCreationTokens,
    costMinorUnits: t.costMinorUnits,
  };
}

/** Per metric, one value per bucket. */
function seriesOf(requests: number[], metered: Record<MeteredMetric, number>[]): Record<UsageMetric, number[]> {
  const series = { requests } as Record<UsageMetric, number[]>;
  for (const metric of USAGE_METRICS) if (metric !== 'requests') series[metric] = metered.map((bucket) => bucket[metric]);
  return series;
}

/**
 * Requests allowed, tokens and spend per key and bucket: what the dashboard's usage chart draws. `usage` holds the
 * ledger's buckets for the same starts as `counts`.
 */
export function usageView(
  window: UsageWindow,
  bucketStartsMs: readonly number[],
  counts: readonly RequestCountsByKey[],
  usage: readonly UsageBucket[],
  keys: readonly StoredKey[],
  facts: { nowMs: number; countsDelayMs: number },
  currency: Currency = DEFAULT_CURRENCY,
): UsageView {
  const seriesOfKey = (keyId: string) =>
    seriesOf(
      counts.map((bucket) => bucket[keyId] ?? 0),
      usage.map((bucket) => meteredFigures(bucket.byKey[keyId])),
    );
  const used = (series: Record<UsageMetric, number[]>) =>
    (['requests', 'tokens', 'costMinorUnits'] as const).some((metric) => series[metric].some((n) => n > 0));
  const shown = keys
    .map((key) => ({ key, series: seriesOfKey(key.id) }))
    .filter(({ key, series }) => keyViewStatus(key, facts.nowMs) !== 'revoked' || used(series))
    .sort((a, b) => (a.key.createdAt < b.key.createdAt ? 1 : a.key.createdAt > b.key.createdAt ? -1 : 0));
  const bucketTotals = usage.map((bucket) => {
    // Every record is counted once by key: the key groups sum to the bucket's total.
    const total = zeroUsageTotals();
    for (const totals of Object.values(bucket.byKey)) addUsageTotals(total, totals);
    return meteredFigures(total);
  });
  const totals = seriesOf(
    counts.map((bucket) => Object.values(bucket).reduce((sum, n) => sum + n, 0)),
    bucketTotals,
  );
  return {
    window,
    granularity: USAGE_WINDOWS[window].granularity,
    bucketStarts: bucketStartsMs.map((ms) => new Date(ms).toISOString()),
    countsDelayMs: facts.countsDelayMs,
    metrics: [...USAGE_METRICS],
    currency: currencyView(currency),
    totals,
    spendFormatted: spendFormatted(totals.costMinorUnits, currency),
    keys: shown.map(({ key, series }) => ({
      id: key.id,
      prefix: key.prefix,
      name: key.name,
      environment: key.environment,
      status: keyViewStatus(key, facts.nowMs),
      series,
      spendFormatted: spendFormatted(series.costMinorUnits, currency),
    })),
  };
}
