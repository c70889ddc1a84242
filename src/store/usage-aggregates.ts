import { USAGE_TOTAL_NAMES, usageTotalsOf, zeroUsageTotals, type UsageRecord, type UsageTotals } from '../metering/usage-record';
import type { UsageBucket } from '../ports/store';

/**
 * The hour and day aggregates of an account, as both stores keep them: one
 * counter per (total, group, name), where the group is `k` (by key id) or
 * `m` (by model, '' when the answer named none). The field layout is the
 * Redis hash's (`<total>:<group>:<name>`, e.g. `out:m:gpt-4o-mini`); the
 * total comes first because model names may contain ':' themselves.
 */
const SHORT_NAMES: Record<keyof UsageTotals, string> = {
  requests: 'n',
  inputTokens: 'in',
  outputTokens: 'out',
  cachedInputTokens: 'cin',
  cacheCreationTokens: 'cc',
  costMinorUnits: 'cost',
  estimatedRequests: 'est',
};
const TOTAL_BY_SHORT_NAME = new Map(Object.entries(SHORT_NAMES).map(([total, short]) => [short, total as keyof UsageTotals]));

/** The counters one record adds to, with how much; zero increments are left out. */
export function usageAggregateIncrements(record: UsageRecord): [field: string, increment: number][] {
  const totals = usageTotalsOf(record);
  const increments: [string, number][] = [];
  for (const name of USAGE_TOTAL_NAMES) {
    if (totals[name] === 0) continue;
    increments.push([`${SHORT_NAMES[name]}:k:${record.keyId}`, totals[name]]);
    increments.push([`${SHORT_NAMES[name]}:m:${record.model ?? ''}`, totals[name]]);
  }
  return increments;
}

/** A bucket from its counters (HGETALL); a field this layout does not know is left out, never guessed. */
export function usageBucketOf(startMs: number, counters: Readonly<Record<string, string | number>>): UsageBucket {
  const bucket: UsageBucket = { startMs, byKey: {}, byModel: {} };
  for (const [field, value] of Object.entries(counters)) {
    const first = field.indexOf(':');
    const total = TOTAL_BY_SHORT_NAME.get(field.slice(0, first));
    const group = field.slice(first + 1, first + 3);
    if (first < 0 || total === undefined || (group !== 'k:' && group !== 'm:')) continue;
    const name = field.slice(first + 3);
    const into = group === 'k:' ? bucket.byKey : bucket.byModel;
    const totals = (into[name] ??= zeroUsageTotals());
    totals[total] += Number(value);
  }
  return bucket;
}
