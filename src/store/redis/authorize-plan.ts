import type { RateLimit, RatePlan } from '../../accounts/limits/rate-limits';
import { MAX_BUDGET_TOKENS, type TokenBudget, type TokenBudgetPlan } from '../../accounts/limits/token-budgets';
import { emissionIntervalUs } from '../../accounts/limits/gcra';
import { MAX_WINDOW_SECONDS } from '../../accounts/limits/rate-limit';
import { loadLua, type LoadedLua } from './lua-source';
import { BinaryArgument } from './resp';

/**
 * The authorize script (lua/authorize.lua), static: every replica runs the
 * same text, whatever its plan, and the default plan comes with each call as
 * ARGV[3], packed here once per frozen plan.
 */
export const AUTHORIZE_SCRIPT: LoadedLua = loadLua('authorize.lua');

/** Bytes of the packed plan: the four counts, each limit ('<ddd'), each budget ('<dd'). */
const COUNTS_BYTES = 4;
const LIMIT_BYTES = 24;
const BUDGET_BYTES = 16;
/** Each count is one byte. */
const MAX_PER_SCOPE = 255;

const packedPlans = new WeakMap<RatePlan, WeakMap<TokenBudgetPlan, BinaryArgument>>();

const frozenPlan = (plan: RatePlan | TokenBudgetPlan) =>
  Object.isFrozen(plan) && Object.isFrozen(plan.key) && Object.isFrozen(plan.account);

/**
 * The default plan as the authorize script reads it (ARGV[3]; the layout is
 * in lua/authorize.lua's header): binary, so the script reads its numbers
 * with one struct.unpack instead of a strtod each. A plan the script could
 * not count exactly with (a budget outside its bounds, a limit that is not a
 * whole number) is refused here, never sent. Packed once per frozen plan;
 * a plan that may still change (tests build plans on the fly) every call.
 */
export function authorizePlanArgument(plan: RatePlan, budgets: TokenBudgetPlan): BinaryArgument {
  let packed = packedPlans.get(plan)?.get(budgets);
  if (packed === undefined) {
    packed = new BinaryArgument(packPlan(plan, budgets));
    if (frozenPlan(plan) && frozenPlan(budgets)) {
      let byBudgets = packedPlans.get(plan);
      if (byBudgets === undefined) packedPlans.set(plan, (byBudgets = new WeakMap()));
      byBudgets.set(budgets, packed);
    }
  }
  return packed;
}

function packPlan(plan: RatePlan, budgets: TokenBudgetPlan): Buffer {
  const limits: readonly RateLimit[] = [...plan.key, ...plan.account];
  const allBudgets: readonly TokenBudget[] = [...budgets.key, ...budgets.account];
  for (const count of [plan.key.length, plan.account.length, budgets.key.length, budgets.account.length]) {
    if (count > MAX_PER_SCOPE) throw new Error(`a plan has at most ${MAX_PER_SCOPE} limits and ${MAX_PER_SCOPE} budgets per scope`);
  }
  for (const limit of limits) {
    if (
      !Number.isSafeInteger(limit.limit) ||
      !Number.isSafeInteger(limit.windowSeconds) ||
      limit.limit < 1 ||
      limit.windowSeconds < 1 ||
      limit.windowSeconds > MAX_WINDOW_SECONDS
    ) {
      throw new Error(`rate limits are whole numbers of requests, at least 1, over 1 s to ${MAX_WINDOW_SECONDS} s`);
    }
  }
  for (const budget of allBudgets) {
    // The arithmetic is exact in doubles within these bounds only (lua/authorize/token-unrefilled.lua, lua/lib/token-consume.lua).
    if (
      !Number.isSafeInteger(budget.tokens) ||
      !Number.isSafeInteger(budget.windowSeconds) ||
      budget.tokens < 1 ||
      budget.tokens > MAX_BUDGET_TOKENS ||
      budget.windowSeconds < 1 ||
      budget.windowSeconds > MAX_WINDOW_SECONDS
    ) {
      throw new Error(`token budgets are 1 to ${MAX_BUDGET_TOKENS} tokens over 1 s to ${MAX_WINDOW_SECONDS} s`);
    }
  }
  const out = Buffer.alloc(COUNTS_BYTES + LIMIT_BYTES * limits.length + BUDGET_BYTES * allBudgets.length);
  out.writeUInt8(plan.key.length, 0);
  out.writeUInt8(plan.account.length, 1);
  out.writeUInt8(budgets.key.length, 2);
  out.writeUInt8(budgets.account.length, 3);
  let at = COUNTS_BYTES;
  for (const limit of limits) {
    at = out.writeDoubleLE(limit.windowSeconds, at);
    at = out.writeDoubleLE(limit.limit, at);
    at = out.writeDoubleLE(emissionIntervalUs(limit), at);
  }
  for (const budget of allBudgets) {
    at = out.writeDoubleLE(budget.tokens, at);
    at = out.writeDoubleLE(budget.windowSeconds, at);
  }
  return out;
}
