import type { FastifyReply } from 'fastify';
import { sendApiError } from '../http/api-errors';

/**
 * The customer API's error codes. Bodies have the admin API's shape,
 * `{"error":{"code","message","field"?}}`; messages speak to the customer
 * (never an admin path, a balance or another account's existence).
 */
export type CustomerErrorCode =
  | 'unauthenticated'
  | 'forbidden'
  | 'invalid_json'
  | 'invalid_field'
  | 'account_not_found'
  | 'key_not_found'
  | 'member_not_found'
  | 'key_revoked'
  | 'key_expired'
  | 'key_already_rotated'
  | 'active_key_cap_reached'
  | 'member_exists'
  | 'member_limit_reached'
  | 'last_owner'
  | 'endpoint_not_found'
  | 'endpoint_limit_reached'
  | 'endpoint_disabled'
  | 'not_found'
  | 'store_unavailable'
  | 'internal_error';

export function sendCustomerError(
  reply: FastifyReply,
  status: number,
  code: CustomerErrorCode,
  message: string,
  field?: string,
): FastifyReply {
  return sendApiError(reply, status, code, message, field);
}

/** The same answer whether the account does not exist or the caller is not one of its members: nothing about it leaks. */
export function sendNoSuchAccount(reply: FastifyReply, accountId: string): FastifyReply {
  return sendCustomerError(reply, 404, 'account_not_found', `None of your accounts is '${accountId}'.`);
}

/** The same answer whether the key does not exist or belongs to another account. */
export function sendNoSuchKey(reply: FastifyReply, accountId: string, keyId: string): FastifyReply {
  return sendCustomerError(reply, 404, 'key_not_found', `Account '${accountId}' has no key '${keyId}'.`);
}

export function sendNoSuchMember(reply: FastifyReply, accountId: string, memberId: string): FastifyReply {
  return sendCustomerError(reply, 404, 'member_not_found', `Account '${accountId}' has no member '${memberId}'.`);
}
