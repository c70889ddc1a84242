import { Command, InvalidArgumentError } from 'commander';
import type { ApiUsageGroup, ApiUsageReport, ApiUsageTotals } from '../api-types';
import { accountPath, callApi, withJson, type JsonFlag } from '../command-kit';
import { isoTimeOption } from '../option-parsers';
import { cell, emit, renderTable, type Column } from '../output';
import { shownPrefix } from './keys';

function choiceOption<const T extends string>(choices: readonly T[]): (value: string) => T {
  return (value) => {
    if (!(choices as readonly string[]).includes(value))
      throw new InvalidArgumentError(`must be ${choices.map((c) => `'${c}'`).join(' or ')}`);
    return value as T;
  };
}

/** `2026-11-22T10:00:00.000Z` → `2026-11-22 10:00Z` by hour, `2026-11-22` by day. */
function periodText(start: string, granularity: ApiUsageReport['granularity']): string {
  return granularity === 'hour' ? `${start.slice(0, 10)} ${start.slice(11, 16)}Z` : start.slice(0, 10);
}

const TOTAL_COLUMNS: readonly Column<ApiUsageTotals>[] = [
  { header: 'REQUESTS', value: (t) => t.requests, align: 'right' },
  { header: 'INPUT', value: (t) => t.inputTokens, align: 'right' },
  { header: 'OUTPUT', value: (t) => t.outputTokens, align: 'right' },
  { header: 'CACHED', value: (t) => t.cachedInputTokens, align: 'right' },
  { header: 'CACHE WRITE', value: (t) => t.cacheCreationTokens, align: 'right' },
  { header: 'COST', value: (t) => t.costFormatted ?? t.costMinorUnits, align: 'right' },
  { header: 'ESTIMATED', value: (t) => t.estimatedRequests, align: 'right' },
];

type Row = ApiUsageTotals & { period: string; group?: string };

function groupName(group: ApiUsageGroup): string {
  if (group.keyId !== undefined) return group.keyPrefix ? `${shownPrefix(group.keyPrefix)} ${group.keyId}` : group.keyId;
  return group.model ?? '(none named)';
}

/**
 * One line per period (every period of the range), or with --group-by one
 * line per key or model that had usage in a period; then the total. Costs
 * are money as the server formats it (`costFormatted`); --json keeps the integers too.
 */
export function renderUsage(report: ApiUsageReport): string {
  const grouped = report.groupBy !== null;
  const rows: Row[] = grouped
    ? report.buckets.flatMap((bucket) =>
        (bucket.groups ?? []).map((group) => ({ ...group, period: periodText(bucket.start, report.granularity), group: groupName(group) })),
      )
    : report.buckets.map((bucket) => ({ ...bucket.total, period: periodText(bucket.start, report.granularity) }));
  const columns: Column<Row>[] = [
    { header: report.granularity === 'hour' ? 'HOUR' : 'DAY', value: (row) => row.period },
    ...(grouped ? [{ header: report.groupBy === 'key' ? 'KEY' : 'MODEL', value: (row: Row) => row.group }] : []),
    ...TOTAL_COLUMNS,
  ];
  const costs = report.currency ? `costs in ${report.currency.code}` : "costs in units of the operator's currency";
  const heading = `Usage of ${cell(report.accountId)} by ${report.granularity}, ${report.from} to ${report.to} (${costs}):\n\n`;
  if (rows.length === 0) return `${heading}No usage in this range.\n`;
  // The total is the table's last line, so its columns line up with the periods'.
  return heading + renderTable(columns, [...rows, { ...report.total, period: 'total', group: '' }]);
}

export function usageCommand(): Command {
  return withJson(
    new Command('usage')
      .description("show an account's metered usage (tokens, cost, requests) by hour or day, optionally by key or model")
      .requiredOption('--account <id>', 'account id')
      .option('--from <iso>', 'start, such as 2026-11-01 or 2026-11-22T10:00:00Z (default: 24 hours or 30 days before --to)', isoTimeOption)
      .option('--to <iso>', 'end, exclusive (default: the end of the current hour or day)', isoTimeOption)
      .option('--granularity <hour|day>', 'hour (kept 48 hours) or day (kept 400 days)', choiceOption(['hour', 'day'] as const), 'day')
      .option('--group-by <key|model>', 'one line per key or per model', choiceOption(['key', 'model'] as const)),
  ).action(
    async (options: JsonFlag & { account: string; from?: string; to?: string; granularity: 'hour' | 'day'; groupBy?: 'key' | 'model' }) => {
      const query = new URLSearchParams({ granularity: options.granularity });
      if (options.from !== undefined) query.set('from', options.from);
      if (options.to !== undefined) query.set('to', options.to);
      if (options.groupBy !== undefined) query.set('groupBy', options.groupBy);
      emit(options, await callApi<ApiUsageReport>('GET', `${accountPath(options.account)}/usage?${query.toString()}`), renderUsage);
    },
  );
}
