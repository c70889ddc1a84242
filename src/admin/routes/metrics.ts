import type { FastifyInstance } from 'fastify';
import type { Registry } from 'prom-client';

/** Prometheus scrape endpoint. Labels hold no accounts, keys or prefixes, so it needs no token. */
export function registerMetricsRoute(app: FastifyInstance, registry: Registry): void {
  app.get('/metrics', { config: { public: true } }, async (_request, reply) =>
    reply.type(registry.contentType).send(await registry.metrics()),
  );
}
