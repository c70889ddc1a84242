import type { FastifyInstance } from 'fastify';
import { randomBase62 } from '../../keys/base62';
import { displayPrefixOf, generateCustomerKey, hashCustomerKey, KEY_SERVICE_PREFIX } from '../../keys/customer-key';
import type { KeyPatch, StoredKey } from '../../store/store';
import { sendAccountNotFound, sendAdminError, sendInvalidBody, sendKeyNotFound } from '../admin-errors';
import { createKeyBody, keyIdSchema, patchKeyBody } from '../admin-schemas';
import type { AdminServerDeps } from '../admin-server';
import { keyView } from '../admin-views';

type KeyParams = { Params: { keyId: string } };

/**
 * Keys: creation (the only answer that ever carries a full key), and read /
 * change by key id. Reads and changes answer the key view, which holds
 * neither the key nor its hash.
 */
export function registerKeyRoutes(app: FastifyInstance, deps: AdminServerDeps): void {
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

  app.post<{ Params: { id: string } }>('/admin/accounts/:id/keys', async (request, reply) => {
    const body = createKeyBody.safeParse(request.body ?? {});
    if (!body.success) return sendInvalidBody(reply, body.error);
    const environment = body.data.environment ?? 'live';
    const key = generateCustomerKey(environment);
    const record: StoredKey = {
      id: `key_${randomBase62(16)}`,
      accountId: request.params.id,
      prefix: displayPrefixOf(key),
      name: body.data.name ?? `${environment} key`,
      environment,
      status: 'active',
      createdAt: new Date(deps.clock.now()).toISOString(),
    };
    const result = await deps.store.insertKey(hashCustomerKey(key), record);
    if (result === 'account_not_found') return sendAccountNotFound(reply, request.params.id, 'Create it first.');
    deps.logger.info(
      { event: 'admin', action: 'key.create', accountId: record.accountId, keyId: record.id, keyPrefix: record.prefix },
      'key created',
    );
    // The only response that ever carries the full key.
    return reply.code(201).send({
      id: record.id,
      key,
      prefix: record.prefix,
      accountId: record.accountId,
      name: record.name,
      environment: record.environment,
      createdAt: record.createdAt,
    });
  });

  app.get<KeyParams>('/admin/keys/:keyId', async (request, reply) => {
    const { keyId } = request.params;
    const problem = lookupProblem(keyId);
    if (problem) return sendAdminError(reply, 404, 'key_not_found', problem);
    const key = await deps.store.getKey(keyId);
    if (!key) return sendKeyNotFound(reply, keyId);
    return reply.send(keyView(key));
  });

  app.patch<KeyParams>('/admin/keys/:keyId', async (request, reply) => {
    const { keyId } = request.params;
    const body = patchKeyBody.safeParse(request.body ?? {});
    if (!body.success) return sendInvalidBody(reply, body.error);
    const problem = lookupProblem(keyId);
    if (problem) return sendAdminError(reply, 404, 'key_not_found', problem);
    const patch: KeyPatch = {};
    const changes: string[] = [];
    if (body.data.name !== undefined) {
      patch.name = body.data.name;
      changes.push('name');
    }
    if (body.data.limits !== undefined) {
      patch.limits = body.data.limits;
      changes.push('limits');
    }
    const key = await deps.store.updateKey(keyId, patch);
    if (!key) return sendKeyNotFound(reply, keyId);
    deps.logger.info(
      { event: 'admin', action: 'key.update', accountId: key.accountId, keyId: key.id, keyPrefix: key.prefix, changes },
      'key updated',
    );
    return reply.send(keyView(key));
  });
}
