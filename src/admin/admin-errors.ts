import type { FastifyReply } from 'fastify';
import type { z } from 'zod';
import { describeIssue } from './admin-schemas';

/** Typed admin API error codes; the body always names what is wrong. */
export type AdminErrorCode =
  | 'admin_disabled'
  | 'unauthorized'
  | 'invalid_json'
  | 'invalid_field'
  | 'account_exists'
  | 'account_not_found'
  | 'key_not_found'
  | 'not_prepaid'
  | 'credit_balance_out_of_range'
  | 'account_unreadable'
  | 'key_revoked'
  | 'key_expired'
  | 'key_already_rotated'
  | 'not_found'
  | 'store_unavailable'
  | 'internal_error'
  | 'too_many_auth_failures';

export function sendAdminError(reply: FastifyReply, status: number, code: AdminErrorCode, message: string, field?: string): FastifyReply {
  return reply
    .code(status)
    .type('application/json')
    .send({ error: field === undefined ? { code, message } : { code, message, field } });
}

/** 400 invalid_field for a body that failed its schema, naming the first bad field (e.g. `limits.key.0.window`). */
export function sendInvalidBody(reply: FastifyReply, error: z.ZodError): FastifyReply {
  const { field, message } = describeIssue(error);
  return sendAdminError(reply, 400, 'invalid_field', message, field);
}

export function sendAccountNotFound(reply: FastifyReply, accountId: string, hint = ''): FastifyReply {
  return sendAdminError(reply, 404, 'account_not_found', `No account '${accountId}'.${hint ? ` ${hint}` : ''}`);
}

export function sendKeyNotFound(reply: FastifyReply, keyId: string): FastifyReply {
  return sendAdminError(reply, 404, 'key_not_found', `No key '${keyId}'. Key ids look like key_… (see the answer of key creation).`);
}
