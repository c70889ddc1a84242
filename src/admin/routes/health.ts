import type { FastifyInstance } from 'fastify';
import type { HealthMonitor } from '../../platform/health-monitor';
import { describeRoute } from '../../http/openapi';

/**
 * `/healthz`: the process is alive (a Redis outage must not restart pods).
 * `/readyz`: this replica can decide requests now (Redis answers, not shutting down).
 * Both hold no data and need no token.
 */
export function registerHealthRoutes(app: FastifyInstance, health: HealthMonitor | undefined): void {
  const tags = ['health'];
  app.get(
    '/healthz',
    { config: { public: true }, schema: describeRoute({ summary: 'The process is alive', tags, public: true }) },
    async (_request, reply) => reply.send({ status: 'alive' }),
  );
  app.get(
    '/readyz',
    { config: { public: true }, schema: describeRoute({ summary: 'This replica can decide requests now', tags, public: true }) },
    async (_request, reply) => {
      const current = health?.current() ?? { status: 'SERVING' as const };
      return current.status === 'SERVING'
        ? reply.send({ status: 'ready' })
        : reply.code(503).send({ status: 'not_ready', reason: current.reason });
    },
  );
}
