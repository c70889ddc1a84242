import { MAX_BUDGET_TOKENS } from '../../../src/accounts/limits/token-budgets';
import { MAX_WINDOW_SECONDS } from '../../../src/accounts/limits/rate-limit';
import { authorizeScript } from '../../../src/store/redis/authorize-script';

/**
 * The plan's token budgets are written into the authorize script with
 * arithmetic chosen for their size, exact only within the budgets' bounds
 * (which the settings enforce): a budget outside them is refused when the
 * script is generated, never turned into a script that counts wrongly.
 */
const noLimits = { key: [], account: [] };

it.each([
  ['no tokens', { tokens: 0, windowSeconds: 60 }],
  ['more tokens than a budget may have', { tokens: MAX_BUDGET_TOKENS + 1, windowSeconds: 86_400 }],
  ['a fraction of a token', { tokens: 1.5, windowSeconds: 60 }],
  ['a window longer than the longest', { tokens: 100, windowSeconds: MAX_WINDOW_SECONDS + 1 }],
  ['no window', { tokens: 100, windowSeconds: 0 }],
])('refuses a plan budget with %s', (_name, budget) => {
  expect(() => authorizeScript(noLimits, { key: [budget], account: [] })).toThrow(
    `token budgets are 1 to ${MAX_BUDGET_TOKENS} tokens over 1 s to ${MAX_WINDOW_SECONDS} s`,
  );
});

it('generates the script for budgets at the bounds', () => {
  const script = authorizeScript(noLimits, {
    key: [{ tokens: MAX_BUDGET_TOKENS, windowSeconds: MAX_WINDOW_SECONDS }],
    account: [{ tokens: 1, windowSeconds: 1 }],
  });
  expect(script.sha).toMatch(/^[0-9a-f]{40}$/);
  expect(script.lua).toContain(`b_tokens, b_window, b_remaining, b_reset = 'key', ${MAX_BUDGET_TOKENS}, ${MAX_WINDOW_SECONDS}`);
});
