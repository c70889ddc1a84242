import { consumeTokenBudget, effectiveTokenBudgets, tokenBudgetState } from '../../../src/accounts/limits/token-budget';

const NOW = 1_795_000_000_000_000;
const perDay = { tokens: 1_000_000_000, windowSeconds: 86_400 };

describe('token budget buckets', () => {
  it('moves a bucket by n × window / tokens, keeping the fraction of a µs', () => {
    expect(consumeTokenBudget(undefined, NOW, { tokens: 100_000, windowSeconds: 60 }, 1_000)).toEqual({
      tatUs: NOW + 600_000,
      fraction: 0,
    });
    // 86.4 µs a token: 3 tokens are 259.2 µs, kept as 259 µs and 200,000,000/10^9.
    expect(consumeTokenBudget(undefined, NOW, perDay, 3)).toEqual({ tatUs: NOW + 259, fraction: 200_000_000 });
    let bucket = consumeTokenBudget(undefined, NOW, perDay, 3);
    for (let i = 0; i < 4; i += 1) bucket = consumeTokenBudget(bucket, NOW, perDay, 3);
    expect(bucket).toEqual({ tatUs: NOW + 1_296, fraction: 0 });
  });

  it('starts from now once the bucket has refilled, and drops a fraction that does not fit a resized budget', () => {
    expect(consumeTokenBudget({ tatUs: NOW - 5, fraction: 9 }, NOW, { tokens: 10, windowSeconds: 1 }, 1)).toEqual({
      tatUs: NOW + 100_000,
      fraction: 0,
    });
    expect(consumeTokenBudget({ tatUs: NOW + 5, fraction: 12 }, NOW, { tokens: 10, windowSeconds: 1 }, 1)).toEqual({
      tatUs: NOW + 100_005,
      fraction: 0,
    });
  });

  it('leaves exactly T − n of a full budget, refills over the window, and is exhausted until one whole token is back', () => {
    const budget = { tokens: 1_000, windowSeconds: 60 };
    const used = consumeTokenBudget(undefined, NOW, budget, 999);
    expect(tokenBudgetState('key', used, NOW, budget)).toEqual({
      scope: 'key',
      tokens: 1_000,
      windowSeconds: 60,
      remaining: 1,
      resetMs: 59_940,
      retryAfterMs: 0,
    });
    const over = consumeTokenBudget(used, NOW, budget, 2);
    // 1,001 used: 2 tokens (60 ms each) must refill before one whole token is available.
    expect(tokenBudgetState('key', over, NOW, budget)).toMatchObject({ remaining: 0, resetMs: 60_060, retryAfterMs: 120 });
    expect(tokenBudgetState('key', over, NOW + 60_000, budget)).toMatchObject({ remaining: 0, retryAfterMs: 60 });
    expect(tokenBudgetState('key', over, NOW + 119_999, budget)).toMatchObject({ remaining: 0, retryAfterMs: 1 });
    expect(tokenBudgetState('key', over, NOW + 120_000, budget)).toMatchObject({ remaining: 1, retryAfterMs: 0 });
    expect(tokenBudgetState('account', over, NOW + 70_000_000, budget)).toMatchObject({ scope: 'account', remaining: 1_000, resetMs: 0 });
  });

  it('counts only whole tokens as available: a token that has begun to refill is not back yet', () => {
    const budget = { tokens: 1_000, windowSeconds: 60 };
    const oneTokenUs = 60_000;
    const all = consumeTokenBudget(undefined, NOW, budget, 1_000);
    // The whole budget used: refused, now and a moment later, until one token's refill time has passed.
    expect(tokenBudgetState('key', all, NOW, budget)).toMatchObject({ remaining: 0, retryAfterMs: 60 });
    expect(tokenBudgetState('key', all, NOW + 1, budget)).toMatchObject({ remaining: 0, retryAfterMs: 60 });
    expect(tokenBudgetState('key', all, NOW + oneTokenUs - 1, budget)).toMatchObject({ remaining: 0, retryAfterMs: 1 });
    expect(tokenBudgetState('key', all, NOW + oneTokenUs, budget)).toMatchObject({ remaining: 1, retryAfterMs: 0 });
    // One token less than the whole budget: one left.
    expect(tokenBudgetState('key', consumeTokenBudget(undefined, NOW, budget, 999), NOW + 1, budget)).toMatchObject({ remaining: 1 });
    // n used, a moment later: T − n, and T − n + 1 only once a whole token has refilled.
    const forty = consumeTokenBudget(undefined, NOW, budget, 40);
    expect(tokenBudgetState('key', forty, NOW + 1, budget).remaining).toBe(960);
    expect(tokenBudgetState('key', forty, NOW + oneTokenUs - 1, budget).remaining).toBe(960);
    expect(tokenBudgetState('key', forty, NOW + oneTokenUs, budget).remaining).toBe(961);
    // A window that is not a whole number of µs per token (10^9 tokens a day: 86.4 µs each), at the bound.
    const big = { tokens: 1_000_000_000, windowSeconds: 86_400 };
    const allBig = consumeTokenBudget(undefined, NOW, big, 1_000_000_000);
    expect(tokenBudgetState('key', allBig, NOW + 86, big)).toMatchObject({ remaining: 0, retryAfterMs: 1 });
    expect(tokenBudgetState('key', allBig, NOW + 87, big)).toMatchObject({ remaining: 1, retryAfterMs: 0 });
  });

  it('applies overrides like request limits: key over the account key override over the plan', () => {
    const plan = { key: [perDay], account: [perDay] };
    const mine = [{ tokens: 5, windowSeconds: 60 }];
    expect(effectiveTokenBudgets(plan, undefined, undefined)).toEqual(plan);
    expect(effectiveTokenBudgets(plan, { key: [] }, undefined)).toEqual({ key: [], account: [perDay] });
    expect(effectiveTokenBudgets(plan, { key: [], account: mine }, mine)).toEqual({ key: mine, account: mine });
  });
});
