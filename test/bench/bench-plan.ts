import type { RatePlan } from '../../src/accounts/limits/rate-limits';
import type { TokenBudgetPlan } from '../../src/accounts/limits/token-budgets';

/**
 * The default plan the in-process benches decide with, as the full bench's
 * gateway config has it (setup.ts writes it as the config file's `1m`/`1d`
 * windows): two windows per scope, limits far above any load, so every
 * decision of a valid key is allowed.
 */
export const BENCH_PLAN: RatePlan = Object.freeze({
  key: Object.freeze([
    { limit: 1_000_000_000, windowSeconds: 60 },
    { limit: 1_000_000_000, windowSeconds: 86_400 },
  ]),
  account: Object.freeze([
    { limit: 1_000_000_000, windowSeconds: 60 },
    { limit: 1_000_000_000, windowSeconds: 86_400 },
  ]),
});

/** The token budgets `--token-budgets` adds: two per scope, never exhausted. */
export const BENCH_TOKEN_BUDGETS: TokenBudgetPlan = Object.freeze({
  key: Object.freeze([
    { tokens: 60_000_000, windowSeconds: 60 },
    { tokens: 1_000_000_000, windowSeconds: 86_400 },
  ]),
  account: Object.freeze([
    { tokens: 60_000_000, windowSeconds: 60 },
    { tokens: 1_000_000_000, windowSeconds: 86_400 },
  ]),
});
