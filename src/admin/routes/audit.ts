import type { FastifyInstance } from 'fastify';
import { sendInvalidBody } from '../admin-errors';
import { auditQuery } from '../admin-schemas';
import type { AdminServerDeps } from '../admin-deps';

/** `GET /admin/audit?limit=&before=`: newest first, paged by entry id. */
export function registerAuditRoutes(app: FastifyInstance, deps: AdminServerDeps): void {
  app.get('/admin/audit', async (request, reply) => {
    const query = auditQuery.safeParse(request.query ?? {});
    if (!query.success) return sendInvalidBody(reply, query.error);
    const page = await deps.store.readAudit({
      limit: query.data.limit ?? 100,
      ...(query.data.before !== undefined ? { before: query.data.before } : {}),
    });
    return reply.send(page);
  });
}
