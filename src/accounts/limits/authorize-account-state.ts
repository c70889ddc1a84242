import type { Account, StoredKey } from '../../keys/key-records';
import type { AuthorizeOutcome, RestrictionsSent } from '../../check/ports';
import { restrictionsStamp, restrictionsText } from '../../keys/key-restrictions';
import { gcraStep } from './gcra';
import { effectiveLimits } from './rate-limit';
import { limitHit, type LimitHit, type LimitScope, type LimitState, type RatePlan } from './rate-limits';
import type { TokenBudgetPlan, TokenBudgetState } from './token-budgets';
import { effectiveTokenBudgets, tokenBucketName, tokenBudgetState, type TokenBucket } from './token-budget';

/**
 * The authorization rules for a known key, as one pure function: key status
 * → restrictions (Check's verdict, on the stamps it sent) → billing (credit) → monthly spend caps → request rate limits → token
 * budgets, consuming nothing unless everything passes (and token budgets
 * never: usage consumes them, src/accounts/limits/usage-account-state.ts). The
 * in-memory store runs this; the Redis store runs the same rules in its Lua
 * script (src/store/redis/lua/authorize.lua), and both pass one
 * contract suite.
 */
export interface AccountState {
  key: StoredKey | null;
  account: Account | null;
  /** Stored TAT per rate-limit bucket name. */
  tats: ReadonlyMap<string, number>;
  /** Stored token buckets by bucket name. */
  tokenBuckets: ReadonlyMap<string, TokenBucket>;
  /** The spend so far in the current month (UTC, by the decision's clock) of the account and of the key. */
  accountMonthSpend: number;
  keyMonthSpend: number;
  /** What the account's holds in flight reserve (none expired), and of those the key's; absent: none. */
  held?: HeldAmounts;
  /** What Check decided on the key's restrictions, and on which stamps; absent: none believed, none refused. */
  restrictions?: RestrictionsSent;
}

/** The sums of holds in flight: money against the balance and the account's cap, tokens against its budgets; the key's apart. */
export interface HeldAmounts {
  accountMinorUnits: number;
  accountTokens: number;
  keyMinorUnits: number;
  keyTokens: number;
}

export const NOTHING_HELD: HeldAmounts = Object.freeze({ accountMinorUnits: 0, accountTokens: 0, keyMinorUnits: 0, keyTokens: 0 });

/** What an allowed decision holds for its request: money only where there is a balance or a cap, tokens only where a budget applies. */
export interface HeldForRequest {
  minorUnits: number;
  tokens: number;
}

export interface BucketWrite {
  bucket: string;
  tatUs: number;
  /** How long the bucket matters: after this it is equivalent to an empty bucket. */
  ttlMs: number;
}

/** Bucket names within one account's state (the Redis key layout is in src/store/redis/redis-keys.ts). */
export function bucketName(scope: LimitScope, keyId: string, windowSeconds: number): string {
  return scope === 'key' ? `rl:k:${keyId}:${windowSeconds}` : `rl:a:${windowSeconds}`;
}

export function authorizeAccountState(
  state: AccountState,
  nowUs: number,
  defaultPlan: RatePlan,
  defaultTokenBudgets: TokenBudgetPlan,
  hold?: { minorUnits: number; tokens: number },
): { outcome: AuthorizeOutcome; writes: BucketWrite[]; held?: HeldForRequest } {
  const { key, account } = state;
  if (!key || !account) return { outcome: { kind: 'unknown_key' }, writes: [] };
  // A Check that brings no hold (a route none of whose answers is metered) is judged without the holds in flight, as
  // the authorize script, which reads their sums only with a hold: it will cost nothing they could be short of.
  const held = hold ? (state.held ?? NOTHING_HELD) : NOTHING_HELD;
  const prefix = key.prefix;
  const revokedByRotation = key.revokeAt !== undefined && Date.parse(key.revokeAt) * 1000 <= nowUs;
  if (key.status === 'revoked' || revokedByRotation) return { outcome: { kind: 'key_revoked', prefix }, writes: [] };
  if (key.expiresAt !== undefined && Date.parse(key.expiresAt) * 1000 <= nowUs) {
    return { outcome: { kind: 'key_expired', prefix }, writes: [] };
  }
  if (account.status === 'suspended') return { outcome: { kind: 'account_suspended', prefix }, writes: [] };
  // After the status, so a revoked key is told it is revoked; before everything that consumes or holds.
  const keyText = restrictionsText(key.restrictions);
  const accountText = restrictionsText(account.keyRestrictions);
  const sent = state.restrictions;
  // The stamps, as the authorize script compares them (redisKeys.restrictionsStampField).
  if (restrictionsStamp(keyText) !== (sent?.keyStamp ?? '') || restrictionsStamp(accountText) !== (sent?.accountStamp ?? '')) {
    return { outcome: { kind: 'restrictions_changed', prefix, keyText, accountText }, writes: [] };
  }
  if (sent?.refused !== undefined) return { outcome: { kind: 'restricted', prefix }, writes: [] };
  // Money is held only where something counts it; a postpaid account without caps holds none.
  const holdsMoney = account.creditBalance !== undefined || key.monthlySpendCap !== undefined || account.monthlySpendCap !== undefined;
  const holdMinorUnits = hold && holdsMoney ? hold.minorUnits : 0;
  if (
    account.creditBalance !== undefined &&
    (account.creditBalance <= 0 || account.creditBalance - held.accountMinorUnits < holdMinorUnits)
  ) {
    return { outcome: { kind: 'credit_exhausted', prefix }, writes: [] };
  }
  // The key's own cap first, as its limits come first; a cap of 0 refuses from the start.
  const overCap = (spent: number, heldThere: number, cap: number) => spent >= cap || spent + heldThere + holdMinorUnits > cap;
  if (key.monthlySpendCap !== undefined && overCap(state.keyMonthSpend, held.keyMinorUnits, key.monthlySpendCap)) {
    return { outcome: { kind: 'budget_exceeded', prefix, scope: 'key', cap: key.monthlySpendCap }, writes: [] };
  }
  if (account.monthlySpendCap !== undefined && overCap(state.accountMonthSpend, held.accountMinorUnits, account.monthlySpendCap)) {
    return { outcome: { kind: 'budget_exceeded', prefix, scope: 'account', cap: account.monthlySpendCap }, writes: [] };
  }

  const limits = effectiveLimits(defaultPlan, account.limits, key.limits);
  const writes: BucketWrite[] = [];
  let tightest: LimitState | undefined;
  let refused: LimitHit | undefined;
  for (const scope of ['key', 'account'] as const) {
    for (const limit of limits[scope]) {
      const bucket = bucketName(scope, key.id, limit.windowSeconds);
      const step = gcraStep(state.tats.get(bucket), nowUs, limit);
      const view = {
        scope,
        limit: limit.limit,
        windowSeconds: limit.windowSeconds,
        remaining: step.remaining,
        resetMs: Math.ceil(step.resetUs / 1000),
      };
      if (!step.allowed) {
        // Name the limit that keeps the caller waiting longest: all must pass.
        const retryAfterMs = Math.ceil(step.retryAfterUs / 1000);
        if (!refused || retryAfterMs > refused.retryAfterMs) refused = limitHit(view, retryAfterMs);
        continue;
      }
      writes.push({ bucket, tatUs: step.newTatUs, ttlMs: Math.ceil(step.resetUs / 1000) + 1 });
      if (!tightest || view.remaining < tightest.remaining) tightest = view;
    }
  }
  if (refused) return { outcome: { kind: 'rate_limited', prefix, hit: refused }, writes: [] };

  const budgets = effectiveTokenBudgets(defaultTokenBudgets, account.tokenBudgets, key.tokenBudgets);
  let tightestBudget: TokenBudgetState | undefined;
  let exhausted: TokenBudgetState | undefined;
  for (const scope of ['key', 'account'] as const) {
    for (const budget of budgets[scope]) {
      const stored = state.tokenBuckets.get(tokenBucketName(scope, key.id, budget.windowSeconds));
      const view = tokenBudgetState(scope, stored, nowUs, budget);
      // Tokens held by answers in flight count as used: one must be left after them.
      if (view.remaining <= (scope === 'key' ? held.keyTokens : held.accountTokens)) {
        // Refused for the holds: none left to spend now, and no time to wait for but the answers in flight.
        const refused =
          view.remaining === 0
            ? view
            : { scope, tokens: view.tokens, windowSeconds: view.windowSeconds, remaining: 0, resetMs: view.resetMs, retryAfterMs: 0 };
        if (!exhausted || refused.retryAfterMs > exhausted.retryAfterMs) exhausted = refused;
      } else if (!tightestBudget || view.remaining < tightestBudget.remaining) tightestBudget = view;
    }
  }
  if (exhausted) return { outcome: { kind: 'token_budget_exhausted', prefix, budget: exhausted }, writes: [] };
  const holdsTokens =
    account.tokenBudgets !== undefined ||
    key.tokenBudgets !== undefined ||
    defaultTokenBudgets.key.length + defaultTokenBudgets.account.length > 0;
  const placed = hold && (holdsMoney || holdsTokens) ? { held: { minorUnits: holdMinorUnits, tokens: holdsTokens ? hold.tokens : 0 } } : {};
  return {
    outcome: {
      kind: 'allow',
      prefix,
      environment: key.environment,
      ...(tightest ? { tightest } : {}),
      ...(tightestBudget ? { tightestBudget } : {}),
    },
    writes,
    ...placed,
  };
}
