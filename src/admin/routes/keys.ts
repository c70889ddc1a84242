import type { FastifyInstance, FastifyReply } from 'fastify';
import { KEY_SERVICE_PREFIX } from '../../keys/customer-key';
import { mintKey, successorTerms } from '../../keys/key-minting';
import { StoreOutcomeUnknownError, type KeyPatch } from '../../store/store';
import { recordAdminAction } from '../admin-actions';
import { sendAccountNotFound, sendAdminError, sendInvalidBody, sendKeyNotFound } from '../admin-errors';
import { accountIdSchema, createKeyBody, keyIdSchema, patchKeyBody, rotateKeyBody } from '../admin-schemas';
import type { AdminServerDeps } from '../admin-deps';
import { createdKeyView, keyView } from '../admin-views';

type KeyParams = { Params: { keyId: string } };
type AccountParams = { Params: { id: string } };

/**
 * Keys: create and rotate (the only answers that ever carry a full key),
 * list, read, change, revoke. Every other answer is the key view, which
 * holds neither the key nor its hash.
 */
export function registerKeyRoutes(app: FastifyInstance, deps: AdminServerDeps): void {
  const now = () => deps.clock.now();
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

  /**
   * Runs a key write; when the store cannot tell whether it was applied
   * (StoreOutcomeUnknownError), answers 503 with what is known and how to find
   * out, instead of the generic "store unavailable". Undefined when it has answered.
   */
  const writeOrExplain = async <T>(reply: FastifyReply, write: () => Promise<T>, explanation: string): Promise<T | undefined> => {
    try {
      return await write();
    } catch (error) {
      if (!(error instanceof StoreOutcomeUnknownError)) throw error;
      deps.logger.error({ event: 'admin', detail: error.message }, 'admin call failed: outcome unknown');
      sendAdminError(reply, 503, 'store_unavailable', explanation);
      return undefined;
    }
  };

  app.post<AccountParams>('/admin/accounts/:id/keys', async (request, reply) => {
    const body = createKeyBody.safeParse(request.body ?? {});
    if (!body.success) return sendInvalidBody(reply, body.error);
    if (!isAccountId(request.params.id)) return sendAccountNotFound(reply, request.params.id);
    const environment = body.data.environment ?? 'live';
    const { key, keyHash, record } = mintKey(
      {
        accountId: request.params.id,
        name: body.data.name ?? `${environment} key`,
        environment,
        ...(body.data.expiresAt !== undefined ? { expiresAt: new Date(body.data.expiresAt).toISOString() } : {}),
        ...(body.data.limits !== undefined ? { limits: body.data.limits } : {}),
        ...(body.data.tokenBudgets !== undefined ? { tokenBudgets: body.data.tokenBudgets } : {}),
        ...(body.data.monthlySpendCap !== undefined ? { monthlySpendCap: body.data.monthlySpendCap } : {}),
      },
      now(),
    );
    const result = await writeOrExplain(
      reply,
      () => deps.store.insertKey(keyHash, record),
      `The key store did not confirm the creation of key '${record.id}': it may or may not have been created, and its secret was ` +
        `not handed out (it cannot be shown again). Find out with GET /admin/keys/${record.id}: a 404 means nothing was created; ` +
        `create the key again. If it exists, nobody holds it: revoke it (POST /admin/keys/${record.id}/revoke), then create the key again.`,
    );
    if (result === undefined) return reply;
    if (result === 'account_not_found') return sendAccountNotFound(reply, request.params.id, 'Create it first.');
    await recordAdminAction(deps, { action: 'key.create', accountId: record.accountId, keyId: record.id, keyPrefix: record.prefix });
    return reply.code(201).send(createdKeyView(record, key));
  });

  app.get<AccountParams>('/admin/accounts/:id/keys', async (request, reply) => {
    const keys = isAccountId(request.params.id) ? await deps.store.listKeys(request.params.id) : null;
    if (!keys) return sendAccountNotFound(reply, request.params.id);
    const at = now();
    return reply.send({ keys: keys.map((key) => keyView(key, at)) });
  });

  app.get<KeyParams>('/admin/keys/:keyId', async (request, reply) => {
    const { keyId } = request.params;
    const refused = refuseLookup(reply, keyId);
    if (refused) return refused;
    const key = await deps.store.getKey(keyId);
    if (!key) return sendKeyNotFound(reply, keyId);
    return reply.send(keyView(key, now()));
  });

  app.patch<KeyParams>('/admin/keys/:keyId', async (request, reply) => {
    const { keyId } = request.params;
    const body = patchKeyBody.safeParse(request.body ?? {});
    if (!body.success) return sendInvalidBody(reply, body.error);
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
    const key = await deps.store.updateKey(keyId, patch);
    if (!key) return sendKeyNotFound(reply, keyId);
    await recordAdminAction(deps, {
      action: 'key.update',
      accountId: key.accountId,
      keyId: key.id,
      keyPrefix: key.prefix,
      detail: `changes=${Object.keys(patch).join(',')}`,
    });
    return reply.send(keyView(key, now()));
  });

  app.post<KeyParams>('/admin/keys/:keyId/rotate', async (request, reply) => {
    const { keyId } = request.params;
    const body = rotateKeyBody.safeParse(request.body ?? {});
    if (!body.success) return sendInvalidBody(reply, body.error);
    const refused = refuseLookup(reply, keyId);
    if (refused) return refused;
    const old = await deps.store.getKey(keyId);
    if (!old) return sendKeyNotFound(reply, keyId);
    const graceSeconds = body.data.graceSeconds ?? 0;
    const { key, keyHash, record } = mintKey(successorTerms(old), now());
    // The grace end and the expiry check use the store's clock, not this replica's.
    const result = await writeOrExplain(
      reply,
      () => deps.store.rotateKey({ oldKeyId: old.id, newKeyHash: keyHash, newKey: record, graceSeconds }),
      `The key store did not confirm the rotation of key '${keyId}': it may or may not have been applied, and the new key's ` +
        `secret was not handed out (it cannot be shown again). Find out with GET /admin/keys/${keyId}. If it has no replacedBy, ` +
        `nothing changed and the old key still works: rotate it again. If its replacedBy is '${record.id}', the rotation was ` +
        `applied: the old key is ${graceSeconds === 0 ? 'revoked' : 'revoked at its revokeAt'} and nobody holds key '${record.id}'. ` +
        `Revoke '${record.id}' (POST /admin/keys/${record.id}/revoke) and create a new key for account '${old.accountId}' ` +
        `(POST /admin/accounts/${old.accountId}/keys).`,
    );
    if (result === undefined) return reply;
    switch (result.kind) {
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
          `Key '${keyId}' was already rotated; its replacement is '${result.replacedBy}'. Rotate that key, or revoke this one now.`,
        );
      case 'rotated':
        break;
    }
    await recordAdminAction(deps, {
      action: 'key.rotate',
      accountId: old.accountId,
      keyId: old.id,
      keyPrefix: old.prefix,
      detail: `newKeyId=${result.newKey.id} newKeyPrefix=${result.newKey.prefix} graceSeconds=${graceSeconds}`,
    });
    return reply.code(201).send({ ...createdKeyView(result.newKey, key), replaces: old.id, oldKey: keyView(result.oldKey, now()) });
  });

  app.post<KeyParams>('/admin/keys/:keyId/revoke', async (request, reply) => {
    const { keyId } = request.params;
    const refused = refuseLookup(reply, keyId);
    if (refused) return refused;
    const key = await deps.store.revokeKey(keyId, now());
    if (!key) return sendKeyNotFound(reply, keyId);
    await recordAdminAction(deps, { action: 'key.revoke', accountId: key.accountId, keyId: key.id, keyPrefix: key.prefix });
    return reply.send(keyView(key, now()));
  });
}
