import type { FastifyInstance } from 'fastify';
import { sendAccountNotFound } from '../admin-errors';
import { sendInvalidField } from '../../http/api-errors';
import { accountIdSchema, accountPathParams, adminAuditQuery, auditQuery } from '../admin-schemas';
import type { AuditTrailEntry } from '../../ports/store';
import type { AuditActor } from '../../accounts/customer-identity';
import { describeRoute } from '../../http/openapi';

import type { AdminServerDeps } from '../admin-deps';

/**
 * `GET /admin/audit?limit=&before=&accountId=&action=&actor=&from=&to=`: newest first, paged by entry id, filtered;
 * the operator-level entries (operator tokens made and revoked) with the accounts', except under an account filter.
 * `GET /admin/accounts/:id/audit`: the same for one account, from its own
 * trail (what its owners see in the dashboard; ids are positions in it).
 */
export function registerAuditRoutes(app: FastifyInstance, deps: AdminServerDeps): void {
  const tags = ['audit'];
  app.get<{ Params: { id: string } }>(
    '/admin/accounts/:id/audit',
    {
      config: { permission: 'audit:read' },
      schema: describeRoute({
        summary: "An account's audit trail, newest first",
        tags,
        params: accountPathParams,
        querystring: auditQuery,
      }),
    },
    async (request, reply) => {
      const query = auditQuery.safeParse(request.query ?? {});
      if (!query.success) return sendInvalidField(reply, query.error);
      const accountId = request.params.id;
      if (!accountIdSchema.safeParse(accountId).success || !(await deps.store.getAccount(accountId))) {
        return sendAccountNotFound(reply, accountId);
      }
      const page = await deps.store.readAudit({
        accountId,
        limit: query.data.limit ?? 100,
        ...(query.data.before !== undefined ? { before: query.data.before } : {}),
      });
      return reply.send(page);
    },
  );

  app.get(
    '/admin/audit',
    {
      config: { permission: 'audit:read' },
      schema: describeRoute({
        summary: 'The audit trail, newest first, filtered by account, action, actor and time',
        tags,
        querystring: adminAuditQuery,
      }),
    },
    async (request, reply) => {
      const query = adminAuditQuery.safeParse(request.query ?? {});
      if (!query.success) return sendInvalidField(reply, query.error);
      const { limit = 100, before, accountId, action, actor, from, to } = query.data;
      const fromMs = from === undefined ? undefined : Date.parse(from);
      const toMs = to === undefined ? undefined : Date.parse(to);
      const wanted = (entry: AuditTrailEntry) =>
        (action === undefined || entry.action === action) &&
        (actor === undefined || actorMatches(entry.actor, actor)) &&
        (toMs === undefined || Date.parse(entry.time) < toMs);
      // Newest first, page by page, until the page is full, the trail is older than `from`, or the scan budget is spent
      // (then `next` lets the caller go on from where the scan stopped).
      const filtered = action !== undefined || actor !== undefined || fromMs !== undefined || toMs !== undefined;
      const entries: AuditTrailEntry[] = [];
      let cursor = before;
      let scanned = 0;
      let next: string | null = null;
      scan: for (;;) {
        const page = await deps.store.readAudit({
          limit: filtered ? SCAN_PAGE : limit,
          ...(cursor !== undefined ? { before: cursor } : {}),
          ...(accountId ? { accountId } : {}),
        });
        for (const entry of page.entries) {
          if (fromMs !== undefined && Date.parse(entry.time) < fromMs) break scan;
          scanned += 1;
          cursor = entry.id;
          if (wanted(entry)) entries.push(entry);
          if (entries.length === limit || scanned === MAX_SCANNED_PER_PAGE) {
            next = entry.id;
            break scan;
          }
        }
        if (page.next === null) break;
      }
      return reply.send({ entries, next });
    },
  );
}

/** Entries read from the store to fill one filtered page, at most: a filter that matches nothing answers in bounded time. */
const MAX_SCANNED_PER_PAGE = 10_000;
const SCAN_PAGE = 500;

/** `break-glass`, an operator token id, or a subject (of a signed-in operator or a member). */
function actorMatches(actor: AuditActor, wanted: string): boolean {
  if (actor.kind === 'member') return actor.subject === wanted;
  const operator = actor.operator;
  if (!operator) return wanted === 'operator';
  switch (operator.kind) {
    case 'break-glass':
      return wanted === 'break-glass';
    case 'secret-scanning':
      return wanted === 'secret-scanning';
    case 'token':
      return operator.tokenId === wanted;
    case 'person':
      return operator.subject === wanted;
  }
}
