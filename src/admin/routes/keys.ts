import type { FastifyInstance, FastifyReply } from 'fastify';
import { randomBase62 } from '../../keys/base62';
import { displayPrefixOf, generateCustomerKey, hashCustomerKey, KEY_SERVICE_PREFIX, type KeyEnvironment } from '../../keys/customer-key';
import type { KeyPatch } from '../../store/store';
import type { StoredKey } from '../../domain/key-records';
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

  /** A fresh key and its record; rotation passes what the new key inherits. */
  const mintKey = (fields: { accountId: string; name: string; environment: KeyEnvironment } & Partial<StoredKey>) => {
    const key = generateCustomerKey(fields.environment);
    const record: StoredKey = {
      ...fields,
      id: `key_${randomBase62(16)}`,
      prefix: displayPrefixOf(key),
      status: 'active',
      createdAt: new Date(now()).toISOString(),
    };
    return { key, record };
  };

  app.post<AccountParams>('/admin/accounts/:id/keys', async (request, reply) => {
    const body = createKeyBody.safeParse(request.body ?? {});
    if (!body.success) return sendInvalidBody(reply, body.error);
    if (!isAccountId(request.params.id)) return sendAccountNotFound(reply, request.params.id);
    const environment = body.data.environment ?? 'live';
    const { key, record } = mintKey({
      accountId: request.params.id,
      name: body.data.name ?? `${environment} key`,
      environment,
      ...(body.data.expiresAt !== undefined ? { expiresAt: new Date(body.data.expiresAt).toISOString() } : {}),
      ...(body.data.limits !== undefined ? { limits: body.data.limits } : {}),
    });
    const result = await deps.store.insertKey(hashCustomerKey(key), record);
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
    // The new key inherits name, environment, account and limits, and records what it replaced.
    const { key, record } = mintKey({
      accountId: old.accountId,
      name: old.name,
      environment: old.environment,
      replaces: old.id,
      ...(old.limits !== undefined ? { limits: old.limits } : {}),
    });
    const result = await deps.store.rotateKey({
      oldKeyId: old.id,
      newKeyHash: hashCustomerKey(key),
      newKey: record,
      graceSeconds,
      nowMs: now(),
    });
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
