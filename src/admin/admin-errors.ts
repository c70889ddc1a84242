import type { FastifyReply } from 'fastify';
import { sendApiError } from '../http/api-errors';

/** Typed admin API error codes; the body always names what is wrong. */
export type AdminErrorCode =
  | 'unauthorized'
  | 'forbidden'
  | 'operator_token_not_found'
  | 'invalid_json'
  | 'invalid_field'
  | 'account_exists'
  | 'account_not_found'
  | 'key_not_found'
  | 'not_prepaid'
  | 'credit_balance_out_of_range'
  | 'invalid_idempotency_key'
  | 'idempotency_key_reused'
  | 'account_unreadable'
  | 'key_revoked'
  | 'key_expired'
  | 'key_already_rotated'
  | 'active_key_cap_reached'
  | 'member_not_found'
  | 'member_exists'
  | 'member_limit_reached'
  | 'last_owner'
  | 'endpoint_not_found'
  | 'endpoint_limit_reached'
  | 'endpoint_disabled'
  | 'not_found'
  | 'store_unavailable'
  | 'internal_error'
  | 'too_many_auth_failures'
  | 'customer_api_not_configured';

export function sendAdminError(reply: FastifyReply, status: number, code: AdminErrorCode, message: string, field?: string): FastifyReply {
  return sendApiError(reply, status, code, message, field);
}

export function sendAccountNotFound(reply: FastifyReply, accountId: string, hint = ''): FastifyReply {
  return sendAdminError(reply, 404, 'account_not_found', `No account '${accountId}'.${hint ? ` ${hint}` : ''}`);
}

/** 409 active_key_cap_reached: what the cap is, how many keys count, and what frees a place. */
export function sendActiveKeyCapReached(
  reply: FastifyReply,
  accountId: string,
  refusal: { maxActiveKeys: number; activeKeys: number },
  operation: 'create' | 'rotate',
): FastifyReply {
  const why =
    operation === 'create'
      ? `Account '${accountId}' holds ${refusal.activeKeys} keys that are not revoked (expired ones included), and its cap is ${refusal.maxActiveKeys}.`
      : `Account '${accountId}' holds ${refusal.activeKeys} keys that are not revoked, above its cap of ${refusal.maxActiveKeys}, because an earlier rotation's grace period is still running. Rotate without a grace period (graceSeconds 0), or wait until that grace period ends.`;
  return sendAdminError(
    reply,
    409,
    'active_key_cap_reached',
    `${why} Revoke keys that are no longer used, or raise the cap (PATCH /admin/accounts/${accountId} {"maxActiveKeys": N}). Nothing was changed.`,
  );
}

export function sendMemberNotFound(reply: FastifyReply, accountId: string, memberId: string): FastifyReply {
  return sendAdminError(reply, 404, 'member_not_found', `Account '${accountId}' has no member '${memberId}'. Member ids look like mem_….`);
}

export function sendKeyNotFound(reply: FastifyReply, keyId: string): FastifyReply {
  return sendAdminError(reply, 404, 'key_not_found', `No key '${keyId}'. Key ids look like key_… (see the answer of key creation).`);
}
