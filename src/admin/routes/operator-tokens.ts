import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { describeRoute } from '../../http/openapi';
import { sendInvalidField } from '../../http/api-errors';
import { OPERATOR_PERMISSIONS } from '../../operators/operator-permissions';
import { operatorActorOf, permissionsOf } from '../../operators/operator-principal';
import {
  generateOperatorToken,
  hashOperatorToken,
  newOperatorTokenId,
  OPERATOR_TOKEN_DEFAULT_DAYS,
  OPERATOR_TOKEN_MAX_DAYS,
  operatorTokenIsLive,
  type OperatorTokenRecord,
} from '../../operators/operator-token';
import { operatorAuditActor, type OperatorActor } from '../../accounts/customer-identity';
import { sendAdminError } from '../admin-errors';
import type { AdminServerDeps } from '../admin-deps';

const DAY_MS = 86_400_000;

export const createOperatorTokenBody = z.strictObject({
  name: z.string().trim().min(1, 'must not be empty').max(100, 'must be at most 100 characters'),
  scopes: z
    .array(z.enum(OPERATOR_PERMISSIONS))
    .min(1, 'must name at least one permission')
    .refine((scopes) => new Set(scopes).size === scopes.length, 'must not repeat a permission'),
  expiresInDays: z
    .int('must be a whole number of days')
    .min(1, 'must be at least 1')
    .max(OPERATOR_TOKEN_MAX_DAYS, `must be at most ${OPERATOR_TOKEN_MAX_DAYS}`)
    .optional(),
});

const tokenPathParams = z.strictObject({ tokenId: z.string() });

export interface OperatorTokenView {
  id: string;
  name: string;
  displayPrefix: string;
  scopes: string[];
  status: 'active' | 'revoked' | 'expired';
  createdAt: string;
  expiresAt: string;
  createdBy: OperatorActor;
  revokedAt: string | null;
}

export function operatorTokenView(record: OperatorTokenRecord, nowMs: number): OperatorTokenView {
  const status = record.revokedAt !== undefined ? 'revoked' : operatorTokenIsLive(record, nowMs) ? 'active' : 'expired';
  return {
    id: record.id,
    name: record.name,
    displayPrefix: record.displayPrefix,
    scopes: [...record.scopes],
    status,
    createdAt: record.createdAt,
    expiresAt: record.expiresAt,
    createdBy: record.createdBy,
    revokedAt: record.revokedAt ?? null,
  };
}

/**
 * Operator API tokens, for automation: an admin creates one with scopes from
 * the permission vocabulary and an expiry (the answer holds the token, once),
 * lists them and revokes them. `GET /admin/operator/me` tells any operator who
 * they are to this API and what they may do (the dashboard shows or hides
 * its controls by it; the server checks every call anyway).
 *
 * Creating and revoking a token are audited at operator level (no account):
 * the actor, the token's id and name, never the token or its hash. The entry
 * cannot be written in one step with the change: the token's keys and the
 * audit trail (gwa:audit, shared with every account's entries) are in
 * different slots on a Cluster, and the tokens have a store and connection
 * of their own. So the entry is written first, and the change only if it was:
 * a token authenticates, or stops authenticating, only after its entry is in
 * the trail. A change that then fails (the caller gets the error and may
 * retry) leaves an entry for an attempt, or one entry more; a change that
 * took effect never lacks its entry.
 */
export function registerOperatorTokenRoutes(app: FastifyInstance, deps: AdminServerDeps): void {
  const tags = ['operators'];
  const iso = (ms: number) => new Date(ms).toISOString();

  app.get(
    '/admin/operator/me',
    { config: { permission: 'authenticated' }, schema: describeRoute({ summary: 'Who is calling, and with which permissions', tags }) },
    async (request, reply) => {
      const operator = request.operator!;
      return reply.header('cache-control', 'no-store').send({
        operator: operatorActorOf(operator),
        ...(operator.kind === 'person' ? { roles: operator.roles, displayName: operator.displayName ?? null } : {}),
        permissions: permissionsOf(operator),
      });
    },
  );

  app.post(
    '/admin/operator-tokens',
    {
      config: { permission: 'operators:admin' },
      schema: describeRoute({
        summary: 'Create an operator API token (the answer holds the token, once)',
        tags,
        body: createOperatorTokenBody,
      }),
    },
    async (request, reply) => {
      const body = createOperatorTokenBody.safeParse(request.body ?? {});
      if (!body.success) return sendInvalidField(reply, body.error);
      if (!deps.operatorTokens) return sendAdminError(reply, 503, 'store_unavailable', 'This server keeps no operator tokens.');
      const nowMs = deps.clock.now();
      const { token, displayPrefix } = generateOperatorToken();
      const record: OperatorTokenRecord = {
        id: newOperatorTokenId(),
        name: body.data.name,
        displayPrefix,
        scopes: body.data.scopes,
        createdAt: iso(nowMs),
        expiresAt: iso(nowMs + (body.data.expiresInDays ?? OPERATOR_TOKEN_DEFAULT_DAYS) * DAY_MS),
        createdBy: operatorActorOf(request.operator!),
      };
      await deps.store.appendOperatorAudit(
        {
          action: 'operator_token.create',
          actor: operatorAuditActor(record.createdBy),
          operatorTokenId: record.id,
          operatorTokenName: record.name,
          detail: `scopes=${record.scopes.join(',')} expiresAt=${record.expiresAt}`,
        },
        nowMs,
      );
      await deps.operatorTokens.insertOperatorToken(hashOperatorToken(token), record);
      deps.logger.info(
        {
          event: 'operator_token',
          action: 'create',
          tokenId: record.id,
          name: record.name,
          scopes: record.scopes,
          actor: record.createdBy,
        },
        'operator token created',
      );
      return reply
        .code(201)
        .header('cache-control', 'no-store')
        .send({ ...operatorTokenView(record, nowMs), token });
    },
  );

  app.get(
    '/admin/operator-tokens',
    { config: { permission: 'operators:admin' }, schema: describeRoute({ summary: 'List the operator API tokens', tags }) },
    async (_request, reply) => {
      const nowMs = deps.clock.now();
      const records = (await deps.operatorTokens?.listOperatorTokens()) ?? [];
      return reply.send({ tokens: records.map((record) => operatorTokenView(record, nowMs)) });
    },
  );

  app.post<{ Params: { tokenId: string } }>(
    '/admin/operator-tokens/:tokenId/revoke',
    {
      config: { permission: 'operators:admin' },
      schema: describeRoute({ summary: 'Revoke an operator API token (refused from the next request on)', tags, params: tokenPathParams }),
    },
    async (request, reply) => {
      const { tokenId } = request.params;
      const notFound = () => sendAdminError(reply, 404, 'operator_token_not_found', `No operator token '${tokenId}'.`);
      const tokens = deps.operatorTokens;
      const existing = tokens && /^otk_[0-9A-Za-z]{1,40}$/.test(tokenId) ? await tokens.getOperatorToken(tokenId) : null;
      if (!tokens || !existing) return notFound();
      const nowMs = deps.clock.now();
      // A token revoked already keeps the entry of its revocation: repeating it changes nothing, so adds none.
      if (existing.revokedAt === undefined) {
        await deps.store.appendOperatorAudit(
          {
            action: 'operator_token.revoke',
            actor: operatorAuditActor(operatorActorOf(request.operator!)),
            operatorTokenId: existing.id,
            operatorTokenName: existing.name,
          },
          nowMs,
        );
      }
      const record = await tokens.revokeOperatorToken(tokenId, iso(nowMs));
      if (!record) return notFound();
      deps.logger.info(
        { event: 'operator_token', action: 'revoke', tokenId, actor: operatorActorOf(request.operator!) },
        'operator token revoked',
      );
      return reply.send(operatorTokenView(record, deps.clock.now()));
    },
  );
}
