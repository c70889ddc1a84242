import type { FastifyInstance, FastifyReply } from 'fastify';
import { createKey, revokeKey, rotateKey, updateKey } from '../../keys/key-actions';
import { KEY_SERVICE_PREFIX } from '../../keys/customer-key';
import type { KeyPatch } from '../../ports/store';
import { sendAccountNotFound, sendActiveKeyCapReached, sendAdminError, sendKeyNotFound } from '../admin-errors';
import { sendInvalidField } from '../../http/api-errors';
import {
  accountIdSchema,
  accountPathParams,
  createKeyBody,
  keyIdSchema,
  keyPathParams,
  patchKeyBody,
  rotateKeyBody,
} from '../admin-schemas';
import { describeRoute } from '../../http/openapi';

import type { AdminServerDeps } from '../admin-deps';
import { actorOf } from '../admin-authorization';
import { DEFAULT_CURRENCY } from '../../accounts/money';
import { createdKeyView, keyView } from '../admin-views';

type KeyParams = { Params: { keyId: string } };
type AccountParams = { Params: { id: string } };

/**
 * Keys: create and rotate (the only answers that ever carry a full key),
 * list, read, change, revoke. Every other answer is the key view, which
 * holds neither the key nor its hash. The changes themselves are the shared
 * key actions (src/keys/key-actions.ts), made as the operator.
 */
export function registerKeyRoutes(app: FastifyInstance, deps: AdminServerDeps): void {
  const now = () => deps.clock.now();
  const tags = ['keys'];
  const isAccountId = (id: string) => accountIdSchema.safeParse(id).success;

  /**
   * Keys are looked up by id, never by the key itself. A path that holds a
   * customer key is refused without echoing it or asking the store.
   */
  const lookupProblem = (keyId: string): string | undefined => {
    if (keyId.startsWith(`${KEY_SERVICE_PREFIX}_`)) {
      return 'That looks like a customer API key. Keys are read and changed by their id (key_…), never by the key itself.';
    }
    return keyIdSchema.safeParse(keyId).success ? undefined : `No key '${keyId}'.`;
  };
  const refuseLookup = (reply: FastifyReply, keyId: string): FastifyReply | undefined => {
    const problem = lookupProblem(keyId);
    return problem ? sendAdminError(reply, 404, 'key_not_found', problem) : undefined;
  };

  app.post<AccountParams>(
    '/admin/accounts/:id/keys',
    {
      config: { permission: 'keys:write' },
      schema: describeRoute({
        summary: 'Create a key (the answer holds the key, once)',
        tags,
        params: accountPathParams,
        body: createKeyBody,
      }),
    },
    async (request, reply) => {
      const body = createKeyBody.safeParse(request.body ?? {});
      if (!body.success) return sendInvalidField(reply, body.error);
      const accountId = request.params.id;
      if (!isAccountId(accountId)) return sendAccountNotFound(reply, accountId);
      const environment = body.data.environment ?? 'live';
      const outcome = await createKey(deps, actorOf(request), {
        accountId,
        name: body.data.name ?? `${environment} key`,
        environment,
        ...(body.data.expiresAt !== undefined ? { expiresAt: new Date(body.data.expiresAt).toISOString() } : {}),
        ...(body.data.limits !== undefined ? { limits: body.data.limits } : {}),
        ...(body.data.tokenBudgets !== undefined ? { tokenBudgets: body.data.tokenBudgets } : {}),
        ...(body.data.monthlySpendCap !== undefined ? { monthlySpendCap: body.data.monthlySpendCap } : {}),
        ...(body.data.restrictions !== undefined ? { restrictions: body.data.restrictions } : {}),
      });
      switch (outcome.kind) {
        case 'created':
          return reply.code(201).send(createdKeyView(outcome.record, outcome.key));
        case 'account_not_found':
          return sendAccountNotFound(reply, accountId, 'Create it first.');
        case 'active_key_cap_reached':
          return sendActiveKeyCapReached(reply, accountId, outcome, 'create');
        case 'outcome_unknown':
          return sendAdminError(
            reply,
            503,
            'store_unavailable',
            `The key store did not confirm the creation of key '${outcome.keyId}': it may or may not have been created, and its secret was ` +
              `not handed out (it cannot be shown again). Find out with GET /admin/keys/${outcome.keyId}: a 404 means nothing was created; ` +
              `create the key again. If it exists, nobody holds it: revoke it (POST /admin/keys/${outcome.keyId}/revoke), then create the key again.`,
          );
      }
    },
  );

  app.get<AccountParams>(
    '/admin/accounts/:id/keys',
    { config: { permission: 'keys:read' }, schema: describeRoute({ summary: "List an account's keys", tags, params: accountPathParams }) },
    async (request, reply) => {
      const keys = isAccountId(request.params.id) ? await deps.store.listKeys(request.params.id) : null;
      if (!keys) return sendAccountNotFound(reply, request.params.id);
      const at = now();
      return reply.send({ keys: keys.map((key) => keyView(key, at, deps.currency ?? DEFAULT_CURRENCY)) });
    },
  );

  app.get<KeyParams>(
    '/admin/keys/:keyId',
    { config: { permission: 'keys:read' }, schema: describeRoute({ summary: 'Read a key', tags, params: keyPathParams }) },
    async (request, reply) => {
      const { keyId } = request.params;
      const refused = refuseLookup(reply, keyId);
      if (refused) return refused;
      const key = await deps.store.getKey(keyId);
      if (!key) return sendKeyNotFound(reply, keyId);
      return reply.send(keyView(key, now(), deps.currency ?? DEFAULT_CURRENCY));
    },
  );

  app.patch<KeyParams>(
    '/admin/keys/:keyId',
    {
      config: { permission: 'keys:write' },
      schema: describeRoute({ summary: 'Change a key', tags, params: keyPathParams, body: patchKeyBody }),
    },
    async (request, reply) => {
      const { keyId } = request.params;
      const body = patchKeyBody.safeParse(request.body ?? {});
      if (!body.success) return sendInvalidField(reply, body.error);
      const refused = refuseLookup(reply, keyId);
      if (refused) return refused;
      const patch: KeyPatch = {};
      if (body.data.name !== undefined) patch.name = body.data.name;
      if (body.data.limits !== undefined) patch.limits = body.data.limits;
      if (body.data.expiresAt !== undefined) {
        patch.expiresAt = body.data.expiresAt === null ? null : new Date(body.data.expiresAt).toISOString();
      }
      if (body.data.tokenBudgets !== undefined) patch.tokenBudgets = body.data.tokenBudgets;
      if (body.data.monthlySpendCap !== undefined) patch.monthlySpendCap = body.data.monthlySpendCap;
      if (body.data.restrictions !== undefined) patch.restrictions = body.data.restrictions;
      const key = await updateKey(deps, actorOf(request), keyId, patch);
      if (!key) return sendKeyNotFound(reply, keyId);
      return reply.send(keyView(key, now(), deps.currency ?? DEFAULT_CURRENCY));
    },
  );

  app.post<KeyParams>(
    '/admin/keys/:keyId/rotate',
    {
      config: { permission: 'keys:write' },
      schema: describeRoute({
        summary: 'Rotate a key (the answer holds the new key, once)',
        tags,
        params: keyPathParams,
        body: rotateKeyBody,
      }),
    },
    async (request, reply) => {
      const { keyId } = request.params;
      const body = rotateKeyBody.safeParse(request.body ?? {});
      if (!body.success) return sendInvalidField(reply, body.error);
      const refused = refuseLookup(reply, keyId);
      if (refused) return refused;
      const old = await deps.store.getKey(keyId);
      if (!old) return sendKeyNotFound(reply, keyId);
      const graceSeconds = body.data.graceSeconds ?? 0;
      const outcome = await rotateKey(deps, actorOf(request), old, graceSeconds);
      switch (outcome.kind) {
        case 'rotated':
          return reply.code(201).send({
            ...createdKeyView(outcome.newKey, outcome.key),
            replaces: old.id,
            oldKey: keyView(outcome.oldKey, now(), deps.currency ?? DEFAULT_CURRENCY),
          });
        case 'key_not_found':
          return sendKeyNotFound(reply, keyId);
        case 'key_revoked':
          return sendAdminError(reply, 409, 'key_revoked', `Key '${keyId}' is revoked and cannot be rotated. Create a new key instead.`);
        case 'key_expired':
          return sendAdminError(reply, 409, 'key_expired', `Key '${keyId}' has expired and cannot be rotated. Create a new key instead.`);
        case 'key_already_rotated':
          return sendAdminError(
            reply,
            409,
            'key_already_rotated',
            `Key '${keyId}' was already rotated; its replacement is '${outcome.replacedBy}'. Rotate that key, or revoke this one now.`,
          );
        case 'active_key_cap_reached':
          return sendActiveKeyCapReached(reply, old.accountId, outcome, 'rotate');
        case 'outcome_unknown':
          return sendAdminError(
            reply,
            503,
            'store_unavailable',
            `The key store did not confirm the rotation of key '${keyId}': it may or may not have been applied, and the new key's ` +
              `secret was not handed out (it cannot be shown again). Find out with GET /admin/keys/${keyId}. If it has no replacedBy, ` +
              `nothing changed and the old key still works: rotate it again. If its replacedBy is '${outcome.keyId}', the rotation was ` +
              `applied: the old key is ${graceSeconds === 0 ? 'revoked' : 'revoked at its revokeAt'} and nobody holds key '${outcome.keyId}'. ` +
              `Revoke '${outcome.keyId}' (POST /admin/keys/${outcome.keyId}/revoke) and create a new key for account '${old.accountId}' ` +
              `(POST /admin/accounts/${old.accountId}/keys).`,
          );
      }
    },
  );

  app.post<KeyParams>(
    '/admin/keys/:keyId/revoke',
    { config: { permission: 'keys:write' }, schema: describeRoute({ summary: 'Revoke a key', tags, params: keyPathParams }) },
    async (request, reply) => {
      const { keyId } = request.params;
      const refused = refuseLookup(reply, keyId);
      if (refused) return refused;
      const key = await revokeKey(deps, actorOf(request), keyId);
      if (!key) return sendKeyNotFound(reply, keyId);
      return reply.send(keyView(key, now(), deps.currency ?? DEFAULT_CURRENCY));
    },
  );
}
