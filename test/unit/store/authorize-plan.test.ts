import { MAX_BUDGET_TOKENS } from '../../../src/accounts/limits/token-budgets';
import { MAX_WINDOW_SECONDS } from '../../../src/accounts/limits/rate-limit';
import { authorizePlanArgument } from '../../../src/store/redis/authorize-plan';

/**
 * The default plan goes to the authorize script packed, and the script's
 * arithmetic is exact only within the budgets' bounds (which the settings
 * enforce): a plan outside them is refused when it is packed, never sent to
 * a script that would count wrongly.
 */
const noLimits = { key: [], account: [] };

it.each([
  ['no tokens', { tokens: 0, windowSeconds: 60 }],
  ['more tokens than a budget may have', { tokens: MAX_BUDGET_TOKENS + 1, windowSeconds: 86_400 }],
  ['a fraction of a token', { tokens: 1.5, windowSeconds: 60 }],
  ['a window longer than the longest', { tokens: 100, windowSeconds: MAX_WINDOW_SECONDS + 1 }],
  ['no window', { tokens: 100, windowSeconds: 0 }],
])('refuses a plan budget with %s', (_name, budget) => {
  expect(() => authorizePlanArgument(noLimits, { key: [budget], account: [] })).toThrow(
    `token budgets are 1 to ${MAX_BUDGET_TOKENS} tokens over 1 s to ${MAX_WINDOW_SECONDS} s`,
  );
});

it.each([
  ['no requests', { limit: 0, windowSeconds: 60 }],
  ['a fraction of a request', { limit: 2.5, windowSeconds: 60 }],
  ['a window longer than the longest', { limit: 10, windowSeconds: MAX_WINDOW_SECONDS + 1 }],
])('refuses a plan limit with %s', (_name, limit) => {
  expect(() => authorizePlanArgument({ key: [], account: [limit] }, noLimits)).toThrow(/^rate limits are whole numbers/);
});

it('packs the counts, then each limit and each budget, as the script reads them', () => {
  const plan = { key: [{ limit: 600, windowSeconds: 60 }], account: [{ limit: 7, windowSeconds: 86_400 }] };
  const budgets = { key: [], account: [{ tokens: MAX_BUDGET_TOKENS, windowSeconds: MAX_WINDOW_SECONDS }] };
  const packed = authorizePlanArgument(plan, budgets).buffer;
  expect([...packed.subarray(0, 4)]).toEqual([1, 1, 0, 1]);
  const numbers = Array.from({ length: (packed.length - 4) / 8 }, (_, i) => packed.readDoubleLE(4 + 8 * i));
  // Window, limit and emission interval (µs) per limit; tokens and window per budget.
  expect(numbers).toEqual([60, 600, 100_000, 86_400, 7, 12_342_857_142, MAX_BUDGET_TOKENS, MAX_WINDOW_SECONDS]);
  // Its bulk string carries the same bytes, one character each.
  expect(Buffer.from(authorizePlanArgument(plan, budgets).bulk, 'latin1')).toEqual(
    Buffer.concat([Buffer.from(`$${packed.length}\r\n`), packed, Buffer.from('\r\n')]),
  );
});

it('packs a frozen plan once', () => {
  const plan = Object.freeze({ key: Object.freeze([{ limit: 1, windowSeconds: 1 }]), account: Object.freeze([]) });
  const budgets = Object.freeze({ key: Object.freeze([]), account: Object.freeze([]) });
  expect(authorizePlanArgument(plan, budgets)).toBe(authorizePlanArgument(plan, budgets));
});
