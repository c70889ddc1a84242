import type { FastifyInstance } from 'fastify';
import { describeRoute } from '../../http/openapi';
import { sendAdminError } from '../admin-errors';
import type { AdminServerDeps } from '../admin-deps';

/** Both documents are served by the admin listener, the one place an operator already reaches. */
export const ADMIN_API_DOCUMENT_PATH = '/openapi/admin.json';
export const CUSTOMER_API_DOCUMENT_PATH = '/openapi/customer.json';

/**
 * The OpenAPI 3.1 descriptions of the admin API (this listener) and of the customer API (the customer listener),
 * made from the routes (src/http/openapi.ts). They hold no data, only what the code already says, so like /healthz
 * they need no token.
 */
export function registerApiDescriptionRoutes(app: FastifyInstance, deps: AdminServerDeps): void {
  const tags = ['API description'];
  app.get(
    ADMIN_API_DOCUMENT_PATH,
    { config: { public: true }, schema: describeRoute({ summary: 'This API as an OpenAPI 3.1 document', tags, public: true }) },
    async (_request, reply) => reply.send(app.swagger()),
  );
  if (!deps.customerApiDocument) return;
  const customerApiDocument = deps.customerApiDocument;
  app.get(
    CUSTOMER_API_DOCUMENT_PATH,
    {
      config: { public: true },
      schema: describeRoute({ summary: "The customer listener's API as an OpenAPI 3.1 document", tags, public: true }),
    },
    async (_request, reply) => {
      const document = customerApiDocument();
      if (document !== undefined) return reply.send(document);
      return sendAdminError(
        reply,
        404,
        'customer_api_not_configured',
        'The customer listener serves no API: customer sign-in is not configured (no OIDC_ISSUER_URL).',
      );
    },
  );
}
