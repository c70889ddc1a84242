import fastifySwagger from '@fastify/swagger';
import type { FastifyInstance, FastifySchema } from 'fastify';
import type { FastifyDynamicSwaggerOptions } from '@fastify/swagger';
import { z } from 'zod';
import { packageVersion } from '../platform/package-version';

/**
 * The OpenAPI 3.1 descriptions of the HTTP APIs, made by @fastify/swagger from the routes themselves: each route
 * carries its request parts as JSON Schema converted from the same zod schemas its handler checks them with
 * (describeRoute), so the description cannot drift from what is accepted.
 *
 * The route schemas describe; they do not validate. Every handler checks its own request with zod, answering the
 * APIs' own error body (a dotted field path and a message), and the customer API must check membership before it
 * looks at a body at all (a non-member learns nothing from a 400), which Fastify's validation, running before any
 * preHandler hook, would not allow.
 */

/** OpenAPI 3.1: its Schema Object is JSON Schema 2020-12, what zod produces, so the schemas need no translation. */
const OPENAPI_VERSION = '3.1.0';

/** What a route's description says beyond its method and path. */
export interface RouteDescription {
  summary: string;
  tags: readonly string[];
  params?: z.ZodType;
  querystring?: z.ZodType;
  headers?: z.ZodType;
  body?: z.ZodType;
  /** Needs no credentials (health, metrics, the API descriptions); the document's default security does not apply. */
  public?: boolean;
}

/** The route's `schema`: its request parts as JSON Schema (as the client sends them, before any zod transform). */
export function describeRoute(description: RouteDescription): FastifySchema {
  return {
    summary: description.summary,
    tags: description.tags,
    ...(description.params ? { params: jsonSchemaOf(description.params) } : {}),
    ...(description.querystring ? { querystring: jsonSchemaOf(description.querystring) } : {}),
    ...(description.headers ? { headers: jsonSchemaOf(description.headers) } : {}),
    ...(description.body ? { body: jsonSchemaOf(description.body) } : {}),
    ...(description.public ? { security: [] } : {}),
  };
}

/**
 * Route schemas on `app` (and the plugins registered in it) describe and are never checked by Fastify. A plugin whose
 * routes carry describeRoute schemas calls this itself, whatever instance it is mounted on: Fastify's default
 * validator would otherwise drop unknown body fields (removeAdditional) that the handler must refuse.
 */
export function describeOnly(app: FastifyInstance): void {
  app.setValidatorCompiler(() => () => true);
}

/** A route left out of the description (a dashboard page or asset, a browser sign-in step): not part of an API. */
export const UNDESCRIBED: FastifySchema = { hide: true };

function jsonSchemaOf(schema: z.ZodType): Record<string, unknown> {
  // `$schema` names the dialect, which OpenAPI 3.1 already fixes; refinements have no JSON Schema and are left out.
  const { $schema: _dialect, ...jsonSchema } = z.toJSONSchema(schema, { io: 'input', target: 'draft-2020-12', unrepresentable: 'any' });
  return jsonSchema;
}

type SecuritySchemes = NonNullable<NonNullable<FastifyDynamicSwaggerOptions['openapi']>['components']>['securitySchemes'];

export interface ApiDocumentOptions {
  title: string;
  description: string;
  securitySchemes: NonNullable<SecuritySchemes>;
}

/**
 * Registers @fastify/swagger on `app` and turns off Fastify's own validation of the route schemas (see above).
 * The plugin collects only the routes registered once it has loaded: await this, or register the routes in a plugin
 * registered after it. `app.swagger()` then returns the document.
 */
export function registerApiDocument(app: FastifyInstance, options: ApiDocumentOptions): PromiseLike<unknown> {
  describeOnly(app);
  return app.register(fastifySwagger, {
    openapi: {
      openapi: OPENAPI_VERSION,
      info: { title: options.title, description: options.description, version: packageVersion() },
      components: { securitySchemes: options.securitySchemes },
      // Every route needs these credentials unless it says otherwise (describeRoute's `public`).
      security: Object.keys(options.securitySchemes).map((name) => ({ [name]: [] })),
    },
  });
}
