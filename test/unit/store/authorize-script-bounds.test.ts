import { MAX_BUDGET_TOKENS } from '../../../src/domain/token-budgets';
import { MAX_WINDOW_SECONDS } from '../../../src/limits/rate-limit';
import { authorizeArgument } from '../../../src/store/redis/scripts';

/**
 * The plan's token budgets go to the authorize script in its argument, and
 * its arithmetic is exact only within the budgets' bounds (which the
 * settings enforce): a budget outside them is refused when the argument is
 * built, never sent to a script that would count wrongly.
 */
const noLimits = { key: [], account: [] };

it.each([
  ['no tokens', { tokens: 0, windowSeconds: 60 }],
  ['more tokens than a budget may have', { tokens: MAX_BUDGET_TOKENS + 1, windowSeconds: 86_400 }],
  ['a fraction of a token', { tokens: 1.5, windowSeconds: 60 }],
  ['a window longer than the longest', { tokens: 100, windowSeconds: MAX_WINDOW_SECONDS + 1 }],
  ['no window', { tokens: 100, windowSeconds: 0 }],
])('refuses a plan budget with %s', (_name, budget) => {
  expect(() => authorizeArgument(0, noLimits, { key: [budget], account: [] })).toThrow(
    `token budgets are 1 to ${MAX_BUDGET_TOKENS} tokens over 1 s to ${MAX_WINDOW_SECONDS} s`,
  );
});

it('refuses a limit that is not a whole number', () => {
  expect(() => authorizeArgument(0, { key: [{ limit: 2.5, windowSeconds: 60 }], account: [] }, noLimits)).toThrow(
    'limits are whole numbers',
  );
});

it('writes the time, then each limit with its emission interval and each budget, the key scope first', () => {
  const argument = authorizeArgument(
    1_795_000_000_000_000,
    { key: [{ limit: 3, windowSeconds: 60 }], account: [{ limit: 100, windowSeconds: 3600 }] },
    { key: [{ tokens: MAX_BUDGET_TOKENS, windowSeconds: MAX_WINDOW_SECONDS }], account: [{ tokens: 1, windowSeconds: 1 }] },
  );
  expect(JSON.parse(argument)).toEqual([
    1_795_000_000_000_000,
    1,
    1,
    60,
    3,
    20_000_000,
    3600,
    100,
    36_000_000,
    1,
    1,
    MAX_BUDGET_TOKENS,
    MAX_WINDOW_SECONDS,
    1,
    1,
  ]);
});
