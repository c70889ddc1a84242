import Fastify, { type FastifyInstance, type FastifyReply } from 'fastify';
import { z } from 'zod';
import type { Clock } from '../domain/clock';
import { randomBase62 } from '../keys/base62';
import { displayPrefixOf, generateCustomerKey, hashCustomerKey, KEY_ENVIRONMENTS } from '../keys/customer-key';
import type { Logger } from '../logging/logger';
import { StoreUnavailableError, type AdminStore, type Account, type StoredKey } from '../store/store';
import { sendAdminError } from './admin-errors';
import { adminTokenMatches } from './admin-token';

export interface AdminServerDeps {
  store: AdminStore;
  clock: Clock;
  logger: Logger;
  /** Absent: every call is refused with 503 admin_disabled. */
  adminToken?: string;
}

const accountId = z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, 'must be 1-64 characters of letters, digits, _ or -');
const displayName = z.string().trim().min(1, 'must not be empty').max(200, 'must be at most 200 characters');

const createAccountBody = z.strictObject({ id: accountId, name: displayName });
const createKeyBody = z.strictObject({
  name: displayName.optional(),
  environment: z.enum(KEY_ENVIRONMENTS).optional(),
});

function invalid(reply: FastifyReply, error: z.ZodError): FastifyReply {
  const issue = error.issues[0]!;
  const field = issue.path.join('.') || undefined;
  const message =
    issue.code === 'unrecognized_keys'
      ? `unknown field(s): ${issue.keys.join(', ')}`
      : `${field ?? 'body'}: ${issue.message}`;
  return sendAdminError(reply, 400, 'invalid_field', message, field ?? (issue.code === 'unrecognized_keys' ? issue.keys[0] : undefined));
}

/** The admin API (minimal for now: accounts and key creation). Every route needs the admin token. */
export function buildAdminServer(deps: AdminServerDeps): FastifyInstance {
  // Fastify's own request logging is off: create-key responses carry a full key.
  const app = Fastify({ logger: false, bodyLimit: 64 * 1024 });

  app.addHook('onRequest', async (request, reply) => {
    if (!deps.adminToken) {
      return sendAdminError(reply, 503, 'admin_disabled', 'The admin API is disabled because ADMIN_TOKEN is not set.');
    }
    if (!adminTokenMatches(request.headers.authorization, deps.adminToken)) {
      return sendAdminError(reply, 401, 'unauthorized', "Send the admin token as 'Authorization: Bearer <ADMIN_TOKEN>'.");
    }
    return undefined;
  });

  app.setErrorHandler((error: { statusCode?: number; code?: string; message: string }, _request, reply) => {
    if (error instanceof StoreUnavailableError) {
      deps.logger.error({ event: 'admin', detail: error.message }, 'admin call failed: store unavailable');
      return sendAdminError(reply, 503, 'store_unavailable', 'The key store is unavailable; nothing was changed. Retry shortly.');
    }
    if (error.statusCode && error.statusCode < 500) {
      const code = error.code?.startsWith('FST_ERR_CTP') ? 'invalid_json' : 'invalid_field';
      return sendAdminError(reply, error.statusCode, code, `Bad request: ${error.message}`);
    }
    deps.logger.error({ event: 'admin', err: error }, 'admin call failed');
    return sendAdminError(reply, 500, 'internal_error', 'Internal error.');
  });

  app.setNotFoundHandler((request, reply) =>
    sendAdminError(reply, 404, 'not_found', `No admin route ${request.method} ${request.url.split('?')[0]}.`),
  );

  app.post('/admin/accounts', async (request, reply) => {
    const body = createAccountBody.safeParse(request.body);
    if (!body.success) return invalid(reply, body.error);
    const account: Account = {
      id: body.data.id,
      name: body.data.name,
      status: 'active',
      createdAt: new Date(deps.clock.now()).toISOString(),
    };
    if (!(await deps.store.createAccount(account))) {
      return sendAdminError(reply, 409, 'account_exists', `An account with id '${account.id}' already exists.`, 'id');
    }
    deps.logger.info({ event: 'admin', action: 'account.create', accountId: account.id }, 'account created');
    return reply.code(201).send(account);
  });

  app.get<{ Params: { id: string } }>('/admin/accounts/:id', async (request, reply) => {
    const account = await deps.store.getAccount(request.params.id);
    if (!account) return sendAdminError(reply, 404, 'account_not_found', `No account '${request.params.id}'.`);
    return reply.send(account);
  });

  app.post<{ Params: { id: string } }>('/admin/accounts/:id/keys', async (request, reply) => {
    const body = createKeyBody.safeParse(request.body ?? {});
    if (!body.success) return invalid(reply, body.error);
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
    if (result === 'account_not_found') {
      return sendAdminError(reply, 404, 'account_not_found', `No account '${request.params.id}'. Create it first.`);
    }
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

  return app;
}
