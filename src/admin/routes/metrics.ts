import type { FastifyInstance } from 'fastify';
import type { MetricsSource } from '../../platform/worker-pool';
import { describeRoute } from '../../http/openapi';

/** Prometheus scrape endpoint. Labels hold no accounts, keys or prefixes, so it needs no token. */
export function registerMetricsRoute(app: FastifyInstance, source: MetricsSource): void {
  app.get(
    '/metrics',
    { config: { public: true }, schema: describeRoute({ summary: 'Prometheus metrics', tags: ['metrics'], public: true }) },
    async (_request, reply) => reply.type(source.contentType).send(await source.metrics()),
  );
}
