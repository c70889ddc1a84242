import type { FastifyReply } from 'fastify';

/** Typed admin API error codes; the body always names what is wrong. */
export type AdminErrorCode =
  | 'admin_disabled'
  | 'unauthorized'
  | 'invalid_json'
  | 'invalid_field'
  | 'account_exists'
  | 'account_not_found'
  | 'not_found'
  | 'store_unavailable'
  | 'internal_error';

export function sendAdminError(
  reply: FastifyReply,
  status: number,
  code: AdminErrorCode,
  message: string,
  field?: string,
): FastifyReply {
  return reply
    .code(status)
    .type('application/json')
    .send({ error: field === undefined ? { code, message } : { code, message, field } });
}
