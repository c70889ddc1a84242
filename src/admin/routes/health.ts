import type { FastifyInstance } from 'fastify';
import type { HealthMonitor } from '../../health/health-monitor';

/**
 * `/healthz`: the process is alive (a Redis outage must not restart pods).
 * `/readyz`: this replica can decide requests now (Redis answers, not shutting down).
 * Both hold no data and need no token.
 */
export function registerHealthRoutes(app: FastifyInstance, health: HealthMonitor | undefined): void {
  app.get('/healthz', { config: { public: true } }, async (_request, reply) => reply.send({ status: 'alive' }));
  app.get('/readyz', { config: { public: true } }, async (_request, reply) => {
    const current = health?.current() ?? { status: 'SERVING' as const };
    return current.status === 'SERVING'
      ? reply.send({ status: 'ready' })
      : reply.code(503).send({ status: 'not_ready', reason: current.reason });
  });
}
