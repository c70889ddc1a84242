import type { FastifyInstance } from 'fastify';
import { HOUR_MS, DAY_MS, USAGE_RETENTION_MS, periodMs, periodStart, type UsageGranularity } from '../../metering/usage-periods';
import { DEFAULT_CURRENCY } from '../../accounts/money';
import { sendInvalidField } from '../../http/api-errors';
import { sendAccountNotFound, sendAdminError } from '../admin-errors';
import { accountIdSchema, accountPathParams, usageQuery } from '../admin-schemas';
import { describeRoute } from '../../http/openapi';

import type { AdminServerDeps } from '../admin-deps';
import { usageReportView } from '../admin-views';

type AccountParams = { Params: { id: string } };

/** Without `from`: the last day by hour, the last 30 days by day. */
const DEFAULT_SPAN_MS: Record<UsageGranularity, number> = { hour: 24 * HOUR_MS, day: 30 * DAY_MS };
const RETENTION_TEXT: Record<UsageGranularity, string> = { hour: '48 hours', day: '400 days' };

/**
 * `GET /admin/accounts/{id}/usage?from=&to=&granularity=hour|day&groupBy=key|model`:
 * the account's metered usage per period (every period of the range, empty
 * ones included), with totals, and optionally per key or per model. The
 * range is bounded by what is kept: hours 48 hours, days 400 days.
 */
export function registerUsageRoutes(app: FastifyInstance, deps: AdminServerDeps): void {
  app.get<AccountParams>(
    '/admin/accounts/:id/usage',
    {
      config: { permission: 'usage:read' },
      schema: describeRoute({
        summary: "An account's metered usage by hour or day",
        tags: ['usage'],
        params: accountPathParams,
        querystring: usageQuery,
      }),
    },
    async (request, reply) => {
      const { id } = request.params;
      const query = usageQuery.safeParse(request.query ?? {});
      if (!query.success) return sendInvalidField(reply, query.error);
      if (!accountIdSchema.safeParse(id).success) return sendAccountNotFound(reply, id);
      const { granularity, groupBy } = query.data;
      const nowMs = deps.clock.now();
      const size = periodMs(granularity);
      const currentEnd = periodStart(nowMs, granularity) + size;
      const toMs = query.data.toMs ?? currentEnd;
      const fromMs = query.data.fromMs ?? toMs - DEFAULT_SPAN_MS[granularity];
      const oldest = periodStart(nowMs - USAGE_RETENTION_MS[granularity], granularity);
      const iso = (ms: number) => new Date(ms).toISOString();
      if (toMs <= fromMs) {
        return sendAdminError(reply, 400, 'invalid_field', `to: must be after from (got from ${iso(fromMs)}, to ${iso(toMs)})`, 'to');
      }
      if (toMs > currentEnd) {
        return sendAdminError(
          reply,
          400,
          'invalid_field',
          `to: must not be after ${iso(currentEnd)}, the end of the current ${granularity} (got ${iso(toMs)})`,
          'to',
        );
      }
      if (periodStart(fromMs, granularity) < oldest) {
        return sendAdminError(
          reply,
          400,
          'invalid_field',
          `from: usage by ${granularity} is kept for ${RETENTION_TEXT[granularity]}, so from must be at or after ${iso(oldest)} (got ${iso(fromMs)})` +
            (granularity === 'hour' ? '; use granularity=day for older usage' : '; older usage is in the billing stream'),
          'from',
        );
      }
      const buckets = await deps.store.readUsage({ accountId: id, granularity, fromMs, toMs });
      if (!buckets) return sendAccountNotFound(reply, id);
      const prefixes = new Map<string, string>();
      if (groupBy === 'key') for (const key of (await deps.store.listKeys(id)) ?? []) prefixes.set(key.id, key.prefix);
      return reply.send(usageReportView(id, granularity, groupBy, buckets, size, prefixes, deps.currency ?? DEFAULT_CURRENCY));
    },
  );
}
