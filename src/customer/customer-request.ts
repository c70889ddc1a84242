import type { FastifyInstance } from 'fastify';
import type { CustomerIdentity } from '../accounts/customer-identity';
import type { CustomerAction } from './customer-permissions';

/**
 * The customer dashboard's per-request facts, declared once. The customer
 * server's sign-in (OpenID Connect sessions) sets `customerIdentity` on each
 * request; the customer API (customer-api.ts) reads it and never trusts
 * anything else about who is calling.
 */
declare module 'fastify' {
  interface FastifyRequest {
    /** The signed-in person; undefined when the request carries no valid session. */
    customerIdentity: CustomerIdentity | undefined;
  }
  interface FastifyContextConfig {
    /**
     * What a customer API route does, checked against the permission matrix
     * (src/customer/customer-permissions.ts) for the caller's role on the
     * route's account; 'signed-in' for routes about the caller alone (/me).
     * Every customer API route must declare it: registering one without it fails.
     */
    customerAction?: CustomerAction | 'signed-in';
    /** A page only for a signed-in person (the API Keys page): anyone else is sent to the start page to sign in. */
    signedInPage?: boolean;
  }
}

/**
 * Declares `request.customerIdentity` on an instance (undefined until a hook
 * sets it). Safe to call from both the server and the API plugin: the second
 * call finds it declared and does nothing.
 */
export function declareCustomerIdentity(app: FastifyInstance): void {
  if (!app.hasRequestDecorator('customerIdentity')) app.decorateRequest('customerIdentity', undefined);
}
