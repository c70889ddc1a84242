import type { CustomerIdentity } from '../domain/customer-identity';

declare module 'fastify' {
  interface FastifyRequest {
    customerIdentity: CustomerIdentity | undefined;
  }
}
