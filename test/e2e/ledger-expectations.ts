/**
 * For e2e tests whose front runs envoy.yaml's ext_proc filter against
 * gateway-authz itself (startE2EWorld({ extProc: 'gateway' })): the usage
 * the fake upstream reported reaches the ledger, priced, exactly once. The
 * price table makes a cost easy to read off the tokens: 1 minor unit per
 * input or cached input token, 2 per output token, 3 per cache write.
 */
import type { ApiAccount, ApiUsageReport } from '../../src/cli/api-types';
import type { RouteFamily } from '../../src/check/routes/route';
import type { TokenCounts, UsageOutcome } from '../../src/metering/usage';
import { usageOutcome } from '../../src/metering/usage-estimate';
import { createUsageExtractor } from '../../src/metering/usage-extractor';
import { startE2EWorld, type E2EWorld } from './e2e-world';
import type { RecordedRequest } from './fake-upstream';

export const METERED_PRICING = {
  models: [],
  default: { input: 1_000_000, output: 2_000_000, cachedInput: 1_000_000, cacheCreation: 3_000_000, webSearchCall: 10_000 },
  unpricedModels: 'charge-default',
};

/** A usage with every kind of token, so that each is seen to be priced. */
export const METERED_USAGE: TokenCounts = { inputTokens: 23, outputTokens: 9, cachedInputTokens: 5, cacheCreationTokens: 3 };

/** Pieces of a slow stream: far enough apart that a client that leaves is seen before the next one. */
export const METERED_SLOW_GAP_MS = 150;

/**
 * A prepaid balance for tests that send a second request right after the first answer. Check sees no body (envoy.yaml
 * sends it none), so each request holds for the default 4,096 output tokens (8,192 units here, plus its input); and
 * metering runs in observability mode, so the first answer's hold may still be in flight when the second request is
 * checked. 10,000 covers one such hold, not two: on a busy machine the second request was refused 402. This covers
 * both, so the test measures the charges, never that race.
 */
export const BALANCE_FOR_TWO_ANSWERS = 100_000;

export function chargeOf(tokens: TokenCounts): number {
  return tokens.inputTokens + 2 * tokens.outputTokens + tokens.cachedInputTokens + 3 * tokens.cacheCreationTokens;
}

export function startMeteredWorld(): Promise<E2EWorld> {
  return startE2EWorld({
    extProc: 'gateway',
    config: { pricing: METERED_PRICING },
    upstream: { usage: METERED_USAGE, slowEventGapMs: METERED_SLOW_GAP_MS },
  });
}

export interface Ledger {
  creditBalance: number | null;
  spentThisMonth: number;
  usage: ApiUsageReport['total'];
}

export async function ledgerOf(world: E2EWorld, accountId: string): Promise<Ledger> {
  // Usage first: one script applies a record to both, so an account read after it is never behind it.
  const usage = await world.gateway.admin('GET', `/admin/accounts/${accountId}/usage?granularity=day`);
  const account = await world.gateway.admin('GET', `/admin/accounts/${accountId}`);
  if (account.status !== 200 || usage.status !== 200)
    throw new Error(`reading the ledger of ${accountId}: ${account.status} ${usage.status}`);
  const billing = (account.body as unknown as ApiAccount).billing;
  // The ledger is the integers; the money text beside them (costFormatted) is tested with the usage API.
  const { costFormatted: _shown, ...total } = (usage.body as unknown as ApiUsageReport).total;
  return {
    creditBalance: billing.creditBalance,
    spentThisMonth: billing.spentThisMonth ?? 0,
    usage: total,
  };
}

/**
 * The ledger once `requests` answers of the account are applied: the processor hands an answer over when its
 * ext_proc stream ends (at the answer's end, or deferred_close_timeout after a client left).
 */
export async function meteredLedger(world: E2EWorld, accountId: string, requests: number, timeoutMs = 10_000): Promise<Ledger> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const ledger = await ledgerOf(world, accountId);
    if (ledger.usage.requests >= requests && world.gateway.app.usage.buffered === 0) return ledger;
    if (Date.now() > deadline) throw new Error(`${accountId}: ${ledger.usage.requests} of ${requests} answers metered in time`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

/** The account's usage totals for exactly these tokens, over `requests` answers, none estimated. */
export function totalsOf(tokens: TokenCounts, requests = 1, estimatedRequests = 0): ApiUsageReport['total'] {
  return { requests, ...tokens, costMinorUnits: chargeOf(tokens), estimatedRequests };
}

export function sumOf(...usages: TokenCounts[]): TokenCounts {
  const sum = { inputTokens: 0, outputTokens: 0, cachedInputTokens: 0, cacheCreationTokens: 0 };
  for (const usage of usages) for (const name of Object.keys(sum) as (keyof typeof sum)[]) sum[name] += usage[name];
  return sum;
}

/**
 * What an answer the client left mid-way is charged: the usage in the bytes that passed (the upstream stopped
 * writing when the front reset it), read by the style's rules (the last running counts reported, or the
 * chat-completions estimate), as `src/metering/` reads a whole answer.
 */
export function deliveredOutcome(upstream: RecordedRequest, family: RouteFamily, contentType = 'text/event-stream'): UsageOutcome {
  const extractor = createUsageExtractor({
    family,
    method: upstream.method,
    path: upstream.path.split('?', 1)[0]!,
    status: upstream.status ?? 0,
    contentType,
    contentEncoding: undefined,
  });
  for (const chunk of upstream.responseChunks) extractor.write(chunk);
  return usageOutcome(extractor.finish(), { family, requestBodyBytes: Buffer.byteLength(upstream.body) });
}

/**
 * A key token budget below one answer's usage (METERED_USAGE is 40 tokens, 37 without cache writes): the first
 * answer puts the budget in debt, so the next request is refused until about 2 s later, when it has refilled.
 */
export const SMALL_TOKEN_BUDGET = { tokens: 20, window: '2s' };
/** How the refusal names that budget, in every style's message. */
export const SMALL_TOKEN_BUDGET_MESSAGE = 'Token budget reached: 20 tokens per 2s for this API key';

export interface TokenBudgetInput {
  tokens: number;
  window: string;
}

export async function giveTokenBudget(world: E2EWorld, keyId: string, budget: TokenBudgetInput): Promise<void> {
  const patched = await world.gateway.admin('PATCH', `/admin/keys/${encodeURIComponent(keyId)}`, { tokenBudgets: [budget] });
  if (patched.status !== 200) throw new Error(`giving ${keyId} a token budget: ${patched.status} ${JSON.stringify(patched.body)}`);
}

export function giveSmallTokenBudget(world: E2EWorld, keyId: string): Promise<void> {
  return giveTokenBudget(world, keyId, SMALL_TOKEN_BUDGET);
}

/**
 * A window over which a budget of a few thousand tokens or less refills far slower than a test runs: 1,000
 * tokens per 30 days is one token back every 2,592 s. A budget over it moves only by what metering takes.
 */
export const SLOW_REFILL_WINDOW = '30d';
export const SLOW_TOKEN_BUDGET: TokenBudgetInput = { tokens: 1000, window: SLOW_REFILL_WINDOW };

/**
 * What a budget's token headers say is left once `used` tokens were metered, read before one whole token has
 * refilled (SLOW_REFILL_WINDOW): the whole tokens available, budget − used (src/accounts/limits/token-budget.ts: a
 * token that has only begun to refill is not back yet). Metering one token more or less moves them by one.
 */
export function tokensLeftAfter(budget: number, used: number): number {
  return Math.max(0, budget - used);
}

/**
 * The two budgets on either side of `used` metered tokens, over SLOW_REFILL_WINDOW: a Check is refused while not
 * one whole token is available, so a budget of exactly `used` is exhausted (all of it used) and one of `used` + 1
 * is not. Metering one token less would leave the first open; one more would exhaust the second.
 */
export function budgetsAround(used: number): { exhausted: TokenBudgetInput; open: TokenBudgetInput } {
  return { exhausted: { tokens: used, window: SLOW_REFILL_WINDOW }, open: { tokens: used + 1, window: SLOW_REFILL_WINDOW } };
}

/** Waits out a refusal's retry-after(-ms), with a little slack for the clocks of the front and the gateway. */
export function waitForRefill(retryAfterMs: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, retryAfterMs + 50));
}
