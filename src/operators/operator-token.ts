import * as crypto from 'node:crypto';
import { crc32 } from 'node:zlib';
import { encodeBase62, isBase62, randomBase62 } from '../keys/base62';
import type { OperatorActor } from '../accounts/customer-identity';
import type { OperatorPermission } from './operator-permissions';

/**
 * Operator API token format: gko_<30 random base62><6 base62 checksum>, the
 * customer key format (src/keys/customer-key.ts) under its own prefix, so a
 * secret scanner tells an operator token (which can reach every account)
 * from a customer key, and the checksum refuses typos and made-up strings
 * without a store lookup.
 */
export const OPERATOR_TOKEN_PREFIX = 'gko_';
const RANDOM_LENGTH = 30;
const CHECKSUM_LENGTH = 6;
export const OPERATOR_TOKEN_LENGTH = OPERATOR_TOKEN_PREFIX.length + RANDOM_LENGTH + CHECKSUM_LENGTH;
/** How much of a token may be shown: the prefix and 4 random characters. */
const DISPLAY_PREFIX_LENGTH = OPERATOR_TOKEN_PREFIX.length + 4;
/** Longest life a token may be given: automation is re-issued a token at least once a year. */
export const OPERATOR_TOKEN_MAX_DAYS = 365;
export const OPERATOR_TOKEN_DEFAULT_DAYS = 90;

/** An operator token as stored: never the token, only its hash elsewhere. */
export interface OperatorTokenRecord {
  /** otk_…: how the token is named in listings, revocations and the audit trail. */
  id: string;
  name: string;
  displayPrefix: string;
  scopes: OperatorPermission[];
  createdAt: string;
  expiresAt: string;
  createdBy: OperatorActor;
  revokedAt?: string;
}

function checksumOf(body: string): string {
  return encodeBase62(crc32(body), CHECKSUM_LENGTH);
}

export function generateOperatorToken(): { token: string; displayPrefix: string } {
  const body = `${OPERATOR_TOKEN_PREFIX}${randomBase62(RANDOM_LENGTH)}`;
  const token = body + checksumOf(body);
  return { token, displayPrefix: token.slice(0, DISPLAY_PREFIX_LENGTH) };
}

export function newOperatorTokenId(): string {
  return `otk_${randomBase62(16)}`;
}

export function looksLikeOperatorToken(candidate: string): boolean {
  return candidate.startsWith(OPERATOR_TOKEN_PREFIX);
}

/** Shape and checksum only: says nothing about whether the token exists. */
export function isWellFormedOperatorToken(candidate: string): boolean {
  if (!candidate.startsWith(OPERATOR_TOKEN_PREFIX) || candidate.length !== OPERATOR_TOKEN_LENGTH) return false;
  if (!isBase62(candidate.slice(OPERATOR_TOKEN_PREFIX.length))) return false;
  const body = candidate.slice(0, OPERATOR_TOKEN_LENGTH - CHECKSUM_LENGTH);
  return checksumOf(body) === candidate.slice(OPERATOR_TOKEN_LENGTH - CHECKSUM_LENGTH);
}

/** Tokens are stored only as this hash; unsalted is fine at ~178 bits of randomness. */
export function hashOperatorToken(token: string): string {
  return crypto.createHash('sha256').update(token).digest('hex');
}

/** Whether a stored token still authenticates at `nowMs`. */
export function operatorTokenIsLive(record: OperatorTokenRecord, nowMs: number): boolean {
  return record.revokedAt === undefined && Date.parse(record.expiresAt) > nowMs;
}
