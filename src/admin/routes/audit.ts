import type { FastifyInstance } from 'fastify';
import { sendAccountNotFound } from '../admin-errors';
import { sendInvalidField } from '../../http/api-errors';
import { accountIdSchema, accountPathParams, auditQuery } from '../admin-schemas';
import { describeRoute } from '../../http/openapi';

import type { AdminServerDeps } from '../admin-deps';

/**
 * `GET /admin/audit?limit=&before=`: newest first, paged by entry id.
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
      schema: describeRoute({ summary: 'The audit trail, newest first', tags, querystring: auditQuery }),
    },
    async (request, reply) => {
      const query = auditQuery.safeParse(request.query ?? {});
      if (!query.success) return sendInvalidField(reply, query.error);
      const page = await deps.store.readAudit({
        limit: query.data.limit ?? 100,
        ...(query.data.before !== undefined ? { before: query.data.before } : {}),
      });
      return reply.send(page);
    },
  );
}
