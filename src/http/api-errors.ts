import type { FastifyReply } from 'fastify';
import type { z } from 'zod';
import { describeIssue } from './api-schemas';

/**
 * The error body of both HTTP APIs: `{"error":{"code","message","field"?}}`. Each API narrows `code` to its own list
 * (AdminErrorCode, CustomerErrorCode).
 */
export function sendApiError(reply: FastifyReply, status: number, code: string, message: string, field?: string): FastifyReply {
  return reply
    .code(status)
    .type('application/json')
    .send({ error: field === undefined ? { code, message } : { code, message, field } });
}

/** 400 invalid_field for a body or query that failed its schema, naming the first bad field (e.g. `limits.key.0.window`). */
export function sendInvalidField(reply: FastifyReply, error: z.ZodError): FastifyReply {
  const { field, message } = describeIssue(error);
  return sendApiError(reply, 400, 'invalid_field', message, field);
}
