import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { wideningProblem, type KeyRestrictions } from '../keys/key-restrictions';
import type { ActionDeps } from '../accounts/action-deps';
import { createKey, revokeKey, rotateKey, updateKey } from '../keys/key-actions';
import { addMember, changeMemberRole, memberDirectory, removeMember } from '../accounts/member-actions';
import {
  accountIdSchema,
  addMemberBody,
  addMemberBodyShape,
  auditQuery,
  keyIdSchema,
  memberIdSchema,
  patchMemberBody,
  principalOf,
  rotateKeyBody,
} from '../http/api-schemas';
import { memberView } from '../http/api-views';
import { countsTowardCap } from '../keys/active-key-cap';
import { bucketLengthMs, USAGE_WINDOWS, windowBucketStarts } from '../keys/request-counts';
import { memberActor, type CustomerIdentity } from '../accounts/customer-identity';
import { mayPerform, PERMISSIONS, type CustomerAction } from './customer-permissions';
import type { StoredKey } from '../keys/key-records';
import type { Member } from '../accounts/members';
import type { RatePlan } from '../accounts/limits/rate-limits';
import { registerJsonBodyParser } from '../http/json-body';
import { KEY_SERVICE_PREFIX } from '../keys/customer-key';
import {
  StoreUnavailableError,
  type AddMemberResult,
  type AdminStore,
  type UsageReader,
  type KeyPatch,
  type MemberChangeResult,
} from '../ports/store';
import { sendCustomerError, sendNoSuchAccount, sendNoSuchKey, sendNoSuchMember, type CustomerErrorCode } from './customer-errors';
import { sendInvalidField } from '../http/api-errors';
import { declareCustomerIdentity } from './customer-request';
import type { Currency } from '../accounts/money';
import {
  accountPathParams,
  customerCreateKeyBody,
  customerPatchKeyBody,
  keyPathParams,
  memberPathParams,
  usageQuery,
} from './customer-schemas';
import { describeOnly, describeRoute } from '../http/openapi';
import { registerWebhookRoutes } from '../http/webhook-routes';
import type { WebhookActionDeps } from '../webhooks/endpoint-actions';
import { STRICT_TARGETS } from '../webhooks/endpoint-targets';
import { accountSummaryView, customerAuditEntryView, customerCreatedKeyView, customerKeyView, meView, usageView } from './customer-views';

/** What the customer API needs; the customer server builds it from the settings and the shared store. */
export interface CustomerApiDeps extends ActionDeps {
  /** Where webhook endpoints may point (WEBHOOK_ALLOW_PRIVATE_TARGETS, WEBHOOK_LOOPBACK_HTTP); absent: STRICT_TARGETS. */
  targets?: WebhookActionDeps['targets'];
  /** The usage view reads the usage ledger too. */
  store: AdminStore & UsageReader;
  /** The operator's default plan: the summary shows it where the account has no override. */
  defaultPlan: RatePlan;
  /** The active-key cap of accounts without their own (settings DEFAULT_MAX_ACTIVE_KEYS); the store enforces it, the summary shows it. */
  defaultMaxActiveKeys: number;
  /** How often request counts reach the store (settings LAST_USED_FLUSH_MS): the usage view says counts lag by up to this. */
  countsFlushIntervalMs: number;
  /** What the amounts count, for the usage view's money; absent: DEFAULT_CURRENCY. */
  currency?: Currency;
}

/** Where the customer API lives on the customer listener. */
export const CUSTOMER_API_PREFIX = '/api';

/** How a refusal names what the caller tried. */
const ACTION_WORDS: Readonly<Record<CustomerAction, string>> = {
  'account.read': 'see this account',
  'usage.read': 'see usage',
  'keys.read': 'see keys',
  'keys.create': 'create keys',
  'keys.update': 'rename keys or change their expiry',
  'keys.regenerate': 'regenerate keys',
  'keys.revoke': 'revoke keys',
  'members.read': 'see members',
  'members.manage': 'manage members',
  'audit.read': 'see the audit log',
  'webhooks.manage': 'manage webhooks',
};

type AccountParams = { Params: { accountId: string } };
type KeyParams = { Params: { accountId: string; keyId: string } };
type MemberParams = { Params: { accountId: string; memberId: string } };

/**
 * The customer-facing API, mounted by the customer server under
 * CUSTOMER_API_PREFIX (this function registers the prefix itself; call it
 * on the customer listener's root instance). The server's sign-in sets
 * `request.customerIdentity`; without it every call is 401.
 *
 * Every route declares what it does (`config.customerAction`), and one hook
 * checks it on the server, on every call, against the caller's current
 * membership and the permission matrix (src/customer/customer-permissions.ts).
 * Someone who is not a member of an account gets the same 404 as for an
 * account that does not exist, and a key or member id of another account
 * the same 404 as one that does not exist. A customer can never set limits,
 * billing or credit: those fields are not in its bodies.
 */
export function registerCustomerApi(app: FastifyInstance, deps: CustomerApiDeps): void {
  declareCustomerIdentity(app);
  void app.register(async (api) => customerApiRoutes(api, deps), { prefix: CUSTOMER_API_PREFIX });
}

async function customerApiRoutes(api: FastifyInstance, deps: CustomerApiDeps): Promise<void> {
  const now = () => deps.clock.now();
  const lookup = memberDirectory(deps);
  /** The caller's membership on the route's account, found by the access hook. */
  const callers = new WeakMap<FastifyRequest, { identity: CustomerIdentity; member: Member }>();
  const callerOf = (request: FastifyRequest) => callers.get(request)!;

  registerJsonBodyParser(api);
  describeOnly(api);

  api.addHook('onRoute', (route) => {
    if (route.config?.customerAction === undefined) {
      throw new Error(`customer API route ${String(route.method)} ${route.url} declares no customerAction`);
    }
  });

  // After every hook of the server (its session hook sets customerIdentity), before any body is validated:
  // a member of one account sending anything to another's ids learns nothing from a 400.
  api.addHook('preHandler', async (request, reply) => {
    const access = request.routeOptions.config?.customerAction;
    if (access === undefined) return undefined; // the not-found handler: nothing to protect
    const identity = request.customerIdentity;
    if (!identity) return sendCustomerError(reply, 401, 'unauthenticated', 'Sign in to use the dashboard.');
    if (access === 'signed-in') return undefined;
    const { accountId } = request.params as { accountId: string };
    if (!accountIdSchema.safeParse(accountId).success) return sendNoSuchAccount(reply, accountId);
    const member = await deps.store.findMember(accountId, { kind: 'identity', issuer: identity.issuer, subject: identity.subject });
    if (!member) return sendNoSuchAccount(reply, accountId);
    if (!mayPerform(member.role, access)) {
      const roles = Object.entries(PERMISSIONS[access])
        .filter(([, allowed]) => allowed)
        .map(([role]) => role);
      return sendCustomerError(
        reply,
        403,
        'forbidden',
        `Your role on account '${accountId}' is ${member.role}, which cannot ${ACTION_WORDS[access]}; ${roles.join(' or ')} can. Ask an owner.`,
      );
    }
    callers.set(request, { identity, member });
    return undefined;
  });

  // The store's and the body's errors are answered here; any other refusal (the server's CSRF check fails a
  // request to these routes with a 403 error, for instance) goes on to the server's own error handler.
  api.setErrorHandler((error: FastifyError, request, reply) => {
    if (error instanceof StoreUnavailableError) {
      deps.logger.error({ event: 'customer', detail: error.message }, 'customer call failed: store unavailable');
      const message =
        request.method === 'GET'
          ? 'The service is briefly unavailable. Retry shortly.'
          : 'The service is briefly unavailable; the change may or may not have been made. Reload before retrying.';
      return sendCustomerError(reply, 503, 'store_unavailable', message);
    }
    if (error.code?.startsWith('FST_ERR_CTP')) {
      return sendCustomerError(reply, 400, 'invalid_json', 'The body is not valid JSON. Send a JSON object, or no body at all.');
    }
    if (error.statusCode && error.statusCode < 500) throw error;
    deps.logger.error({ event: 'customer', err: error }, 'customer call failed');
    return sendCustomerError(reply, 500, 'internal_error', 'Internal error.');
  });

  api.setNotFoundHandler((request, reply) =>
    sendCustomerError(reply, 404, 'not_found', `No API route ${request.method} ${request.url.split('?')[0]}.`),
  );

  /**
   * The key with this id if it belongs to the account: the same null for a
   * key of another account as for none at all. Ids only, never a key itself.
   */
  const keyOfAccount = async (accountId: string, keyId: string): Promise<StoredKey | null> => {
    if (!keyIdSchema.safeParse(keyId).success || keyId.startsWith(`${KEY_SERVICE_PREFIX}_`)) return null;
    const key = await deps.store.getKey(keyId);
    return key?.accountId === accountId ? key : null;
  };
  /** 404 without echoing an id that could be a key (someone pasting their key into the URL). */
  const sendKeyMissing = (reply: FastifyReply, accountId: string, keyId: string) =>
    keyIdSchema.safeParse(keyId).success && !keyId.startsWith(`${KEY_SERVICE_PREFIX}_`)
      ? sendNoSuchKey(reply, accountId, keyId)
      : sendCustomerError(reply, 404, 'key_not_found', 'No such key. Keys are named by their id (key_…), never by the key itself.');
  /** A new expiry must lie ahead: an already-expired key is of no use, and revoking says that better. */
  const expiryInPast = (reply: FastifyReply, expiresAt: string | null | undefined) =>
    typeof expiresAt === 'string' && Date.parse(expiresAt) <= now()
      ? sendCustomerError(reply, 400, 'invalid_field', 'expiresAt: must be in the future (revoke a key to stop it now)', 'expiresAt')
      : undefined;
  /** Customers may only narrow their account's defaults: a key's own restrictions name nothing outside them. */
  const restrictionsWider = async (reply: FastifyReply, accountId: string, restrictions: KeyRestrictions | null | undefined) => {
    if (!restrictions) return undefined;
    const problem = wideningProblem(restrictions, (await deps.store.getAccount(accountId))?.keyRestrictions);
    return problem === undefined
      ? undefined
      : sendCustomerError(reply, 400, 'invalid_field', `restrictions: ${problem}; ask your provider to change them`, 'restrictions');
  };

  // Owners only (customer-permissions.ts): the routes the operator has under /admin/accounts/:id/webhooks.
  registerWebhookRoutes(api, {
    accountPath: '/accounts/:accountId',
    accountParam: 'accountId',
    deps: { ...deps, targets: deps.targets ?? STRICT_TARGETS },
    actorOf: (request) => memberActor(callerOf(request).identity),
    configFor: () => ({ customerAction: 'webhooks.manage' }),
    tags: ['webhooks'],
    currency: deps.currency,
  });

  api.get(
    '/me',
    {
      config: { customerAction: 'signed-in' },
      schema: describeRoute({ summary: 'Who is signed in, and their accounts', tags: ['session'] }),
    },
    async (request, reply) => {
      const identity = request.customerIdentity!;
      const memberships = await lookup.membershipsOf(identity);
      const accounts = await Promise.all(
        memberships.map(async ({ accountId, role }) => {
          const account = await deps.store.getAccount(accountId);
          return account ? [{ id: account.id, name: account.name, role }] : [];
        }),
      );
      return reply.send(meView(identity, accounts.flat()));
    },
  );

  api.get<AccountParams>(
    '/accounts/:accountId',
    {
      config: { customerAction: 'account.read' },
      schema: describeRoute({ summary: 'The account: plan, limits, key counts', tags: ['accounts'], params: accountPathParams }),
    },
    async (request, reply) => {
      const { accountId } = request.params;
      const [account, keys] = await Promise.all([deps.store.getAccount(accountId), deps.store.listKeys(accountId)]);
      if (!account || !keys) return sendNoSuchAccount(reply, accountId);
      const at = now();
      return reply.send(
        accountSummaryView(account, callerOf(request).member.role, {
          defaultPlan: deps.defaultPlan,
          defaultMaxActiveKeys: deps.defaultMaxActiveKeys,
          activeKeys: keys.filter((key) => countsTowardCap(key, at)).length,
        }),
      );
    },
  );

  api.get<AccountParams>(
    '/accounts/:accountId/keys',
    {
      config: { customerAction: 'keys.read' },
      schema: describeRoute({ summary: "The account's keys", tags: ['keys'], params: accountPathParams }),
    },
    async (request, reply) => {
      const keys = await deps.store.listKeys(request.params.accountId);
      if (!keys) return sendNoSuchAccount(reply, request.params.accountId);
      const at = now();
      return reply.send({ keys: keys.map((key) => customerKeyView(key, at)) });
    },
  );

  api.get<KeyParams>(
    '/accounts/:accountId/keys/:keyId',
    { config: { customerAction: 'keys.read' }, schema: describeRoute({ summary: 'Read a key', tags: ['keys'], params: keyPathParams }) },
    async (request, reply) => {
      const { accountId, keyId } = request.params;
      const key = await keyOfAccount(accountId, keyId);
      return key ? reply.send(customerKeyView(key, now())) : sendKeyMissing(reply, accountId, keyId);
    },
  );

  api.post<AccountParams>(
    '/accounts/:accountId/keys',
    {
      config: { customerAction: 'keys.create' },
      schema: describeRoute({
        summary: 'Create a key (the answer holds the key, once)',
        tags: ['keys'],
        params: accountPathParams,
        body: customerCreateKeyBody,
      }),
    },
    async (request, reply) => {
      const { accountId } = request.params;
      const body = customerCreateKeyBody.safeParse(request.body ?? {});
      if (!body.success) return sendInvalidField(reply, body.error);
      const expiresAt = body.data.expiresAt === undefined ? undefined : new Date(body.data.expiresAt).toISOString();
      const refused = expiryInPast(reply, expiresAt) ?? (await restrictionsWider(reply, accountId, body.data.restrictions));
      if (refused) return refused;
      const environment = body.data.environment ?? 'live';
      const outcome = await createKey(deps, memberActor(callerOf(request).identity), {
        accountId,
        name: body.data.name ?? `${environment} key`,
        environment,
        ...(expiresAt !== undefined ? { expiresAt } : {}),
        ...(body.data.restrictions !== undefined ? { restrictions: body.data.restrictions } : {}),
      });
      switch (outcome.kind) {
        case 'created':
          return reply.code(201).send(customerCreatedKeyView(outcome.record, outcome.key, now()));
        case 'account_not_found':
          return sendNoSuchAccount(reply, accountId);
        case 'active_key_cap_reached':
          return sendCustomerError(
            reply,
            409,
            'active_key_cap_reached',
            `This account already holds ${outcome.activeKeys} keys that are not revoked (expired ones included), ` +
              `and it may hold at most ${outcome.maxActiveKeys}. Revoke keys you no longer use, or ask your provider to raise the limit.`,
          );
        case 'outcome_unknown':
          return sendCustomerError(
            reply,
            503,
            'store_unavailable',
            `The service could not confirm that key '${outcome.keyId}' was created, so its secret cannot be shown. ` +
              `Reload the key list: if that key is listed, revoke it (nobody holds it), then create a key again.`,
          );
      }
    },
  );

  api.patch<KeyParams>(
    '/accounts/:accountId/keys/:keyId',
    {
      config: { customerAction: 'keys.update' },
      schema: describeRoute({
        summary: 'Rename a key, or change its expiry or restrictions',
        tags: ['keys'],
        params: keyPathParams,
        body: customerPatchKeyBody,
      }),
    },
    async (request, reply) => {
      const { accountId, keyId } = request.params;
      const body = customerPatchKeyBody.safeParse(request.body ?? {});
      if (!body.success) return sendInvalidField(reply, body.error);
      if (!(await keyOfAccount(accountId, keyId))) return sendKeyMissing(reply, accountId, keyId);
      const patch: KeyPatch = {};
      if (body.data.name !== undefined) patch.name = body.data.name;
      if (body.data.expiresAt !== undefined)
        patch.expiresAt = body.data.expiresAt === null ? null : new Date(body.data.expiresAt).toISOString();
      if (body.data.restrictions !== undefined) patch.restrictions = body.data.restrictions;
      const refused = expiryInPast(reply, patch.expiresAt) ?? (await restrictionsWider(reply, accountId, patch.restrictions));
      if (refused) return refused;
      const key = await updateKey(deps, memberActor(callerOf(request).identity), keyId, patch);
      return key ? reply.send(customerKeyView(key, now())) : sendKeyMissing(reply, accountId, keyId);
    },
  );

  api.post<KeyParams>(
    '/accounts/:accountId/keys/:keyId/regenerate',
    {
      config: { customerAction: 'keys.regenerate' },
      schema: describeRoute({
        summary: 'Regenerate a key (the answer holds the new key, once)',
        tags: ['keys'],
        params: keyPathParams,
        body: rotateKeyBody,
      }),
    },
    async (request, reply) => {
      const { accountId, keyId } = request.params;
      const body = rotateKeyBody.safeParse(request.body ?? {});
      if (!body.success) return sendInvalidField(reply, body.error);
      const old = await keyOfAccount(accountId, keyId);
      if (!old) return sendKeyMissing(reply, accountId, keyId);
      const outcome = await rotateKey(deps, memberActor(callerOf(request).identity), old, body.data.graceSeconds ?? 0);
      const refuse = (code: CustomerErrorCode, message: string) => sendCustomerError(reply, 409, code, message);
      switch (outcome.kind) {
        case 'rotated':
          return reply
            .code(201)
            .send({ ...customerCreatedKeyView(outcome.newKey, outcome.key, now()), oldKey: customerKeyView(outcome.oldKey, now()) });
        case 'key_not_found':
          return sendKeyMissing(reply, accountId, keyId);
        case 'key_revoked':
          return refuse('key_revoked', `Key '${keyId}' is revoked and cannot be regenerated. Create a new key instead.`);
        case 'key_expired':
          return refuse('key_expired', `Key '${keyId}' has expired and cannot be regenerated. Create a new key instead.`);
        case 'key_already_rotated':
          return refuse(
            'key_already_rotated',
            `Key '${keyId}' was already regenerated; its replacement is '${outcome.replacedBy}'. Regenerate that key, or revoke this one now.`,
          );
        case 'active_key_cap_reached':
          return refuse(
            'active_key_cap_reached',
            `This account holds ${outcome.activeKeys} keys that are not revoked, more than its limit of ${outcome.maxActiveKeys}, ` +
              `because an earlier regeneration's grace period is still running. Regenerate immediately (no grace period), ` +
              `or wait until that grace period ends.`,
          );
        case 'outcome_unknown':
          return sendCustomerError(
            reply,
            503,
            'store_unavailable',
            `The service could not confirm that key '${keyId}' was regenerated, so the new key cannot be shown. Reload the key list: ` +
              `if '${keyId}' was replaced by '${outcome.keyId}', revoke '${outcome.keyId}' (nobody holds it) and create a key; ` +
              `otherwise nothing changed: regenerate again.`,
          );
      }
    },
  );

  api.post<KeyParams>(
    '/accounts/:accountId/keys/:keyId/revoke',
    {
      config: { customerAction: 'keys.revoke' },
      schema: describeRoute({ summary: 'Revoke a key', tags: ['keys'], params: keyPathParams }),
    },
    async (request, reply) => {
      const { accountId, keyId } = request.params;
      if (!(await keyOfAccount(accountId, keyId))) return sendKeyMissing(reply, accountId, keyId);
      const key = await revokeKey(deps, memberActor(callerOf(request).identity), keyId);
      return key ? reply.send(customerKeyView(key, now())) : sendKeyMissing(reply, accountId, keyId);
    },
  );

  api.get<AccountParams>(
    '/accounts/:accountId/usage',
    {
      config: { customerAction: 'usage.read' },
      schema: describeRoute({
        summary: "The account's usage over a window",
        tags: ['usage'],
        params: accountPathParams,
        querystring: usageQuery,
      }),
    },
    async (request, reply) => {
      const { accountId } = request.params;
      const query = usageQuery.safeParse(request.query ?? {});
      if (!query.success) return sendInvalidField(reply, query.error);
      const window = query.data.window ?? '24h';
      const at = now();
      const starts = windowBucketStarts(window, at);
      const { granularity } = USAGE_WINDOWS[window];
      const [keys, counts, usage] = await Promise.all([
        deps.store.listKeys(accountId),
        deps.store.readRequestCounts(accountId, granularity, starts),
        // The ledger's buckets are the same UTC hours and days: one per start.
        deps.store.readUsage({ accountId, granularity, fromMs: starts[0]!, toMs: starts.at(-1)! + bucketLengthMs(granularity) }),
      ]);
      if (!keys || !usage) return sendNoSuchAccount(reply, accountId);
      return reply
        .header('cache-control', 'no-store')
        .send(usageView(window, starts, counts, usage, keys, { nowMs: at, countsDelayMs: deps.countsFlushIntervalMs }, deps.currency));
    },
  );

  api.get<AccountParams>(
    '/accounts/:accountId/members',
    {
      config: { customerAction: 'members.read' },
      schema: describeRoute({ summary: "The account's members and invitations", tags: ['members'], params: accountPathParams }),
    },
    async (request, reply) => {
      const members = await deps.store.listMembers(request.params.accountId);
      if (!members) return sendNoSuchAccount(reply, request.params.accountId);
      return reply.send({ members: members.map(memberView) });
    },
  );

  api.post<AccountParams>(
    '/accounts/:accountId/members',
    {
      config: { customerAction: 'members.manage' },
      schema: describeRoute({
        summary: 'Add a member, or invite one by email',
        tags: ['members'],
        params: accountPathParams,
        body: addMemberBodyShape,
      }),
    },
    async (request, reply) => {
      const { accountId } = request.params;
      const body = addMemberBody.safeParse(request.body ?? {});
      if (!body.success) return sendInvalidField(reply, body.error);
      const result = await addMember(deps, memberActor(callerOf(request).identity), {
        accountId,
        role: body.data.role,
        principal: principalOf(body.data),
      });
      return sendAddResult(reply, accountId, result);
    },
  );

  api.patch<MemberParams>(
    '/accounts/:accountId/members/:memberId',
    {
      config: { customerAction: 'members.manage' },
      schema: describeRoute({ summary: "Change a member's role", tags: ['members'], params: memberPathParams, body: patchMemberBody }),
    },
    async (request, reply) => {
      const { accountId, memberId } = request.params;
      const body = patchMemberBody.safeParse(request.body ?? {});
      if (!body.success) return sendInvalidField(reply, body.error);
      if (!memberIdSchema.safeParse(memberId).success) return sendNoSuchMember(reply, accountId, memberId);
      const actor = memberActor(callerOf(request).identity);
      return sendChangeResult(reply, accountId, memberId, await changeMemberRole(deps, actor, accountId, memberId, body.data.role));
    },
  );

  api.delete<MemberParams>(
    '/accounts/:accountId/members/:memberId',
    {
      config: { customerAction: 'members.manage' },
      schema: describeRoute({ summary: 'Remove a member or an invitation', tags: ['members'], params: memberPathParams }),
    },
    async (request, reply) => {
      const { accountId, memberId } = request.params;
      if (!memberIdSchema.safeParse(memberId).success) return sendNoSuchMember(reply, accountId, memberId);
      const actor = memberActor(callerOf(request).identity);
      return sendChangeResult(reply, accountId, memberId, await removeMember(deps, actor, accountId, memberId));
    },
  );

  api.get<AccountParams>(
    '/accounts/:accountId/audit',
    {
      config: { customerAction: 'audit.read' },
      schema: describeRoute({
        summary: "The account's audit trail, newest first",
        tags: ['audit'],
        params: accountPathParams,
        querystring: auditQuery,
      }),
    },
    async (request, reply) => {
      const query = auditQuery.safeParse(request.query ?? {});
      if (!query.success) return sendInvalidField(reply, query.error);
      const page = await deps.store.readAudit({
        accountId: request.params.accountId,
        limit: query.data.limit ?? 100,
        ...(query.data.before !== undefined ? { before: query.data.before } : {}),
      });
      return reply.send({ entries: page.entries.map(customerAuditEntryView), next: page.next });
    },
  );
}

function sendAddResult(reply: FastifyReply, accountId: string, result: AddMemberResult): FastifyReply {
  switch (result.kind) {
    case 'added':
      return reply.code(201).send(memberView(result.member));
    case 'account_not_found':
      return sendNoSuchAccount(reply, accountId);
    case 'already_member':
      return sendCustomerError(
        reply,
        409,
        'member_exists',
        `That person is already ${result.member.principal.kind === 'invitation' ? 'invited' : 'a member'} ` +
          `('${result.member.id}', role ${result.member.role}). Change their role instead.`,
      );
    case 'member_limit_reached':
      return sendCustomerError(
        reply,
        409,
        'member_limit_reached',
        `This account already has ${result.limit} members and invitations, the most it can have. Remove some first.`,
      );
  }
}

function sendChangeResult(reply: FastifyReply, accountId: string, memberId: string, result: MemberChangeResult): FastifyReply {
  switch (result.kind) {
    case 'changed':
      return reply.send(memberView(result.member));
    case 'member_not_found':
      return sendNoSuchMember(reply, accountId, memberId);
    case 'last_owner':
      return sendCustomerError(
        reply,
        409,
        'last_owner',
        `'${memberId}' is the last owner of this account, and an account keeps at least one owner. Make another member owner first.`,
      );
  }
}
