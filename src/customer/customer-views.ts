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
import type { CustomerIdentity, MemberRole } from '../domain/customer-identity';
import { actionsOf, type CustomerAction } from '../domain/customer-permissions';
import type { Account, AccountStatus, StoredKey } from '../domain/key-records';
import type { RatePlan } from '../domain/rate-limits';
import type { KeyEnvironment } from '../keys/customer-key';
import { USAGE_WINDOWS, type UsageGranularity, type UsageWindow } from '../domain/request-counts';
import type { AuditEntry, RequestCountsByKey } from '../store/store';

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
  /** Only for key and member changes: the operator's account changes (billing, credit, limits) carry figures that stay internal. */
  detail: string | null;
}

export function customerAuditEntryView(entry: AuditEntry): CustomerAuditEntryView {
  const detailShown = entry.action.startsWith('key.') || entry.action.startsWith('member.');
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

/** The series each key (and the total) has, in this order; token and spend series join this list when they are metered. */
export const USAGE_METRICS = ['requests'] as const;
export type UsageMetric = (typeof USAGE_METRICS)[number];

export interface UsageView {
  window: UsageWindow;
  granularity: UsageGranularity;
  /** Start of each bucket (UTC), oldest first; the last one is the current hour or day, still counting. */
  bucketStarts: string[];
  /** Counts reach the store in batches: the newest requests show up within this long. */
  countsDelayMs: number;
  metrics: UsageMetric[];
  /** Per bucket, over every key of the account (revoked ones included). */
  totals: Record<UsageMetric, number[]>;
  /** Keys that are not revoked, and any other key with requests in the window; newest first. */
  keys: {
    id: string;
    prefix: string;
    name: string;
    environment: KeyEnvironment;
    status: KeyViewStatus;
    series: Record<UsageMetric, number[]>;
  }[];
}

/** Requests allowed per key and bucket: what the dashboard's usage chart draws. */
export function usageView(
  window: UsageWindow,
  bucketStartsMs: readonly number[],
  counts: readonly RequestCountsByKey[],
  keys: readonly StoredKey[],
  facts: { nowMs: number; countsDelayMs: number },
): UsageView {
  const requestsOf = (keyId: string) => counts.map((bucket) => bucket[keyId] ?? 0);
  const shown = keys
    .map((key) => ({ key, requests: requestsOf(key.id) }))
    .filter(({ key, requests }) => keyViewStatus(key, facts.nowMs) !== 'revoked' || requests.some((n) => n > 0))
    .sort((a, b) => (a.key.createdAt < b.key.createdAt ? 1 : a.key.createdAt > b.key.createdAt ? -1 : 0));
  return {
    window,
    granularity: USAGE_WINDOWS[window].granularity,
    bucketStarts: bucketStartsMs.map((ms) => new Date(ms).toISOString()),
    countsDelayMs: facts.countsDelayMs,
    metrics: [...USAGE_METRICS],
    totals: { requests: counts.map((bucket) => Object.values(bucket).reduce((sum, n) => sum + n, 0)) },
    keys: shown.map(({ key, requests }) => ({
      id: key.id,
      prefix: key.prefix,
      name: key.name,
      environment: key.environment,
      status: keyViewStatus(key, facts.nowMs),
      series: { requests },
    })),
  };
}
