import type { Account, AccountStatus, ExposedKeyAction, StoredKey } from '../keys/key-records';
import { DEFAULT_EXPOSED_KEY_ACTION } from '../keys/key-exposure';
import type { KeyRestrictions } from '../keys/key-restrictions';
import { currencyView, DEFAULT_CURRENCY, formatMoney, type Currency } from '../accounts/money';
import { addUsageTotals, zeroUsageTotals, type UsageTotals } from '../metering/usage-record';
import { usageMonthOf, type UsageGranularity } from '../metering/usage-periods';
import { commonKeyView, limitsView, tokenBudgetsView, type CommonKeyView, type LimitView, type TokenBudgetView } from '../http/api-views';
import type { AccountListing, UnreadableRecord, UsageBucket } from '../ports/store';

export {
  actorView,
  keyViewStatus,
  limitsView,
  memberView,
  tokenBudgetsView,
  type ActorView,
  type KeyViewStatus,
  type LimitView,
  type MemberView,
  type TokenBudgetView,
} from '../http/api-views';

/**
 * Store records → admin API answers. Every field is picked explicitly, so a
 * field added to a record later (a hash, a counter) never leaks by default.
 *
 * Money: every amount stays the integer it always was (clients compute with it); beside each one an `…Formatted`
 * string shows it as a person reads it ("$0.0042"), and the answer names the `currency` the integers count.
 */

/** The unit the integer amounts of an answer count: 10^-exponent of the ISO 4217 currency `code`. */
export type CurrencyView = ReturnType<typeof currencyView>;

export interface AccountView {
  id: string;
  name: string;
  billing: {
    status: AccountStatus;
    /** Integer minor units; null means post-paid. */
    creditBalance: number | null;
    /** Integer minor units all keys together may spend per UTC month; null: no cap. */
    monthlySpendCap: number | null;
    /** Spend of the current UTC month (prepaid or post-paid), integer minor units. */
    spentThisMonth: number;
    /** Usage the prepaid balance could not take because it was at −10^15 (normally 0). */
    creditShortfall: number;
    currency: CurrencyView;
    creditBalanceFormatted: string | null;
    monthlySpendCapFormatted: string | null;
    spentThisMonthFormatted: string;
    creditShortfallFormatted: string;
  };
  /** null for a scope means "not overridden": the operator's default plan applies. */
  limits: { key: LimitView[] | null; account: LimitView[] | null };
  /** The account's own active-key cap; null means the service default (DEFAULT_MAX_ACTIVE_KEYS) applies. */
  maxActiveKeys: number | null;
  /** null for a scope means "not overridden": the operator's default token budgets apply. */
  tokenBudgets: { key: TokenBudgetView[] | null; account: TokenBudgetView[] | null };
  /** Restrictions every key of the account has on top of its own; null: none. */
  keyRestrictions: KeyRestrictions | null;
  /** What is done with a key of the account found published: the account's choice, else the default (revoke). */
  exposedKeyAction: ExposedKeyAction;
  createdAt: string;
}

export interface KeyView extends CommonKeyView {
  accountId: string;
  /** null means "not overridden": the account's key limits, else the plan's, apply. */
  limits: LimitView[] | null;
  /** null means "not overridden": the account's key token budgets, else the plan's, apply. */
  tokenBudgets: TokenBudgetView[] | null;
  /** Integer minor units this key may spend per UTC month; null: no cap of its own. */
  monthlySpendCap: number | null;
  monthlySpendCapFormatted: string | null;
}

export interface AccountListView {
  accounts: AccountView[];
  /** Accounts whose stored record cannot be read: left out of `accounts`, named here with what is wrong. */
  unreadable: UnreadableRecord[];
}

export interface CreditView {
  accountId: string;
  creditBalance: number;
  currency: CurrencyView;
  creditBalanceFormatted: string;
}

export function creditView(accountId: string, creditBalance: number, currency: Currency): CreditView {
  return { accountId, creditBalance, currency: currencyView(currency), creditBalanceFormatted: formatMoney(creditBalance, currency) };
}

/** `nowMs` says which month is "this month" (UTC). */
export function accountView(account: Account, nowMs: number, currency: Currency = DEFAULT_CURRENCY): AccountView {
  const spentThisMonth = account.monthlySpend?.[usageMonthOf(nowMs)] ?? 0;
  const creditShortfall = account.creditShortfall ?? 0;
  return {
    id: account.id,
    name: account.name,
    billing: {
      status: account.status,
      creditBalance: account.creditBalance ?? null,
      monthlySpendCap: account.monthlySpendCap ?? null,
      spentThisMonth,
      creditShortfall,
      currency: currencyView(currency),
      creditBalanceFormatted: account.creditBalance === undefined ? null : formatMoney(account.creditBalance, currency),
      monthlySpendCapFormatted: account.monthlySpendCap === undefined ? null : formatMoney(account.monthlySpendCap, currency),
      spentThisMonthFormatted: formatMoney(spentThisMonth, currency),
      creditShortfallFormatted: formatMoney(creditShortfall, currency),
    },
    limits: { key: limitsView(account.limits?.key), account: limitsView(account.limits?.account) },
    maxActiveKeys: account.maxActiveKeys ?? null,
    tokenBudgets: { key: tokenBudgetsView(account.tokenBudgets?.key), account: tokenBudgetsView(account.tokenBudgets?.account) },
    keyRestrictions: account.keyRestrictions ?? null,
    exposedKeyAction: account.exposedKeyAction ?? DEFAULT_EXPOSED_KEY_ACTION,
    createdAt: account.createdAt,
  };
}

export function accountListView(listing: AccountListing, nowMs: number, currency: Currency): AccountListView {
  return {
    accounts: listing.accounts.map((account) => accountView(account, nowMs, currency)),
    unreadable: listing.unreadable.map(({ id, problem }) => ({ id, problem })),
  };
}

/** Never the key or its hash: the record holds neither, and only these fields are copied. */
export function keyView(key: StoredKey, nowMs: number, currency: Currency = DEFAULT_CURRENCY): KeyView {
  const { id, createdBy, ...fields } = commonKeyView(key, nowMs);
  // The field order the admin API (and the CLI's --json output) has always had.
  return {
    id,
    accountId: key.accountId,
    ...fields,
    limits: limitsView(key.limits),
    createdBy,
    tokenBudgets: tokenBudgetsView(key.tokenBudgets),
    monthlySpendCap: key.monthlySpendCap ?? null,
    monthlySpendCapFormatted: key.monthlySpendCap === undefined ? null : formatMoney(key.monthlySpendCap, currency),
  };
}

/** The one answer that carries a full key: create and rotate. */
export function createdKeyView(key: StoredKey, fullKey: string) {
  return {
    id: key.id,
    key: fullKey,
    prefix: key.prefix,
    accountId: key.accountId,
    name: key.name,
    environment: key.environment,
    createdAt: key.createdAt,
  };
}

export type UsageGroupBy = 'key' | 'model';

/** A usage total as the API answers it: the integer counts, and the cost as a person reads it. */
export type UsageTotalsView = UsageTotals & { costFormatted: string };

export type UsageGroupView = UsageTotalsView & ({ keyId: string; keyPrefix: string | null } | { model: string | null });

export interface UsageBucketView {
  /** The period's start, ISO-8601 (UTC). */
  start: string;
  total: UsageTotalsView;
  /** With groupBy: one entry per key or model that had usage in the period, by key id or model name. */
  groups?: UsageGroupView[];
}

export interface UsageReportView {
  accountId: string;
  granularity: UsageGranularity;
  groupBy: UsageGroupBy | null;
  /** The first period's start and the last period's end (exclusive). */
  from: string;
  to: string;
  currency: CurrencyView;
  total: UsageTotalsView;
  buckets: UsageBucketView[];
}

/** Store buckets → the usage API's answer. `prefixes` names each key id's display prefix (keys that still exist). */
export function usageReportView(
  accountId: string,
  granularity: UsageGranularity,
  groupBy: UsageGroupBy | undefined,
  buckets: readonly UsageBucket[],
  periodMs: number,
  prefixes: ReadonlyMap<string, string>,
  currency: Currency,
): UsageReportView {
  const shown = (totals: UsageTotals): UsageTotalsView => ({ ...totals, costFormatted: formatMoney(totals.costMinorUnits, currency) });
  const total = zeroUsageTotals();
  const views = buckets.map((bucket): UsageBucketView => {
    const bucketTotal = zeroUsageTotals();
    // Every record is counted once by key: the key groups sum to the period's total.
    for (const totals of Object.values(bucket.byKey)) addUsageTotals(bucketTotal, totals);
    addUsageTotals(total, bucketTotal);
    const view: UsageBucketView = { start: new Date(bucket.startMs).toISOString(), total: shown(bucketTotal) };
    if (groupBy === 'key') {
      view.groups = Object.entries(bucket.byKey)
        .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
        .map(([keyId, totals]) => ({ keyId, keyPrefix: prefixes.get(keyId) ?? null, ...shown(totals) }));
    } else if (groupBy === 'model') {
      view.groups = Object.entries(bucket.byModel)
        .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
        .map(([model, totals]) => ({ model: model === '' ? null : model, ...shown(totals) }));
    }
    return view;
  });
  const first = buckets[0]?.startMs ?? 0;
  const last = buckets.at(-1)?.startMs ?? first - periodMs;
  return {
    accountId,
    granularity,
    groupBy: groupBy ?? null,
    from: new Date(first).toISOString(),
    to: new Date(last + periodMs).toISOString(),
    currency: currencyView(currency),
    total: shown(total),
    buckets: views,
  };
}
