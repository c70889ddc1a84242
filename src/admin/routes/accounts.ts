import type { FastifyInstance, FastifyReply } from 'fastify';
import { restrictionsDetail } from '../../keys/key-actions';
import {
  CREDIT_LIMIT_MINOR_UNITS,
  IDEMPOTENCY_KEY_HEADER,
  IDEMPOTENCY_KEY_MAX_LENGTH,
  IDEMPOTENT_REPLAYED_HEADER,
  idempotencyKeyProblem,
} from '../../accounts/credit';
import type { Account } from '../../keys/key-records';
import {
  CREDIT_IDEMPOTENCY_TTL_MS,
  CorruptRecordError,
  StoreUnavailableError,
  type AccountPatch,
  type CreditResult,
} from '../../ports/store';
import { sendAccountNotFound, sendAdminError } from '../admin-errors';
import { sendInvalidField } from '../../http/api-errors';
import {
  accountIdSchema,
  accountPathParams,
  createAccountBody,
  creditBody,
  creditHeaders,
  patchAccountBody,
  type PatchAccountBody,
} from '../admin-schemas';
import { describeRoute } from '../../http/openapi';

import type { AdminServerDeps } from '../admin-deps';
import { accountPatchPermissions } from '../../operators/operator-permissions';
import { actorOf } from '../admin-authorization';
import { recordChange } from '../../accounts/audit-trail';
import { DEFAULT_CURRENCY } from '../../accounts/money';
import { accountListView, accountView, creditView, type CreditView } from '../admin-views';

type AccountParams = { Params: { id: string } };

/** The store patch for a validated PATCH body, and the dotted names of what it changes (for the log line). */
function toAccountPatch(body: PatchAccountBody): { patch: AccountPatch; changes: string[] } {
  const patch: AccountPatch = {};
  const changes: string[] = [];
  if (body.name !== undefined) {
    patch.name = body.name;
    changes.push('name');
  }
  if (body.billing?.status !== undefined) {
    patch.status = body.billing.status;
    changes.push('billing.status');
  }
  if (body.billing?.creditBalance !== undefined) {
    patch.creditBalance = body.billing.creditBalance;
    changes.push('billing.creditBalance');
  }
  if (body.billing?.monthlySpendCap !== undefined) {
    patch.monthlySpendCap = body.billing.monthlySpendCap;
    changes.push('billing.monthlySpendCap');
  }
  if (body.limits) {
    const limits: NonNullable<AccountPatch['limits']> = {};
    if (body.limits.key !== undefined) {
      limits.key = body.limits.key;
      changes.push('limits.key');
    }
    if (body.limits.account !== undefined) {
      limits.account = body.limits.account;
      changes.push('limits.account');
    }
    patch.limits = limits;
  }
  if (body.maxActiveKeys !== undefined) {
    patch.maxActiveKeys = body.maxActiveKeys;
    changes.push('maxActiveKeys');
  }
  if (body.tokenBudgets) {
    const budgets: NonNullable<AccountPatch['tokenBudgets']> = {};
    for (const scope of ['key', 'account'] as const) {
      if (body.tokenBudgets[scope] !== undefined) {
        budgets[scope] = body.tokenBudgets[scope];
        changes.push(`tokenBudgets.${scope}`);
      }
    }
    patch.tokenBudgets = budgets;
  }
  if (body.keyRestrictions !== undefined) {
    patch.keyRestrictions = body.keyRestrictions;
    changes.push('keyRestrictions');
  }
  if (body.exposedKeyAction !== undefined) {
    patch.exposedKeyAction = body.exposedKeyAction;
    changes.push('exposedKeyAction');
  }
  return { patch, changes };
}

/**
 * Whether this call writes the audit entry of an applied credit: always
 * without an idempotency key; with one, the call the store lets claim it
 * (Store.claimCreditAudit), which is the repeat when the first call lost
 * every reply. A claim that fails counts as this call's: an entry written
 * twice is better than an applied adjustment missing from the trail.
 */
async function ownsCreditAudit(deps: AdminServerDeps, accountId: string, idempotencyKey: string | undefined): Promise<boolean> {
  if (idempotencyKey === undefined) return true;
  try {
    return await deps.store.claimCreditAudit(accountId, idempotencyKey);
  } catch (error) {
    deps.logger.error({ event: 'audit', accountId, detail: (error as Error).message }, 'could not claim the credit audit entry');
    return true;
  }
}

/**
 * Accounts: create, read, change (name, billing and spend cap, limit and
 * token budget overrides) and prepaid credit. Answers are always the account view (admin-views.ts).
 */
export function registerAccountRoutes(app: FastifyInstance, deps: AdminServerDeps): void {
  const now = () => new Date(deps.clock.now()).toISOString();
  const tags = ['accounts'];
  /** An id no account can have is answered 404 without asking the store. */
  const isAccountId = (id: string) => accountIdSchema.safeParse(id).success;

  /** 503 naming the one account whose record cannot be read; any other error goes on to the error handler. */
  const sendAccountUnreadable = (reply: FastifyReply, id: string, error: unknown, outcome = '') => {
    if (!(error instanceof CorruptRecordError)) throw error;
    deps.logger.error({ event: 'admin', accountId: id, detail: error.problem }, 'account record unreadable');
    return sendAdminError(
      reply,
      503,
      'account_unreadable',
      `Account '${id}' is stored in a form this service cannot read (${error.problem}).${outcome} Other accounts are not affected. ` +
        `Repair the record in the store; a bad balance can be replaced with PATCH /admin/accounts/${id} {"billing":{"creditBalance":N}}.`,
    );
  };

  app.post(
    '/admin/accounts',
    { config: { permission: 'accounts:write' }, schema: describeRoute({ summary: 'Create an account', tags, body: createAccountBody }) },
    async (request, reply) => {
      const body = createAccountBody.safeParse(request.body);
      if (!body.success) return sendInvalidField(reply, body.error);
      const { id, name, billing, limits, maxActiveKeys, tokenBudgets, keyRestrictions, exposedKeyAction } = body.data;
      const account: Account = { id, name, status: billing?.status ?? 'active', createdAt: now() };
      if (exposedKeyAction !== undefined) account.exposedKeyAction = exposedKeyAction;
      if (keyRestrictions !== undefined) account.keyRestrictions = keyRestrictions;
      if (maxActiveKeys !== undefined) account.maxActiveKeys = maxActiveKeys;
      if (billing?.creditBalance != null) account.creditBalance = billing.creditBalance;
      if (billing?.monthlySpendCap != null) account.monthlySpendCap = billing.monthlySpendCap;
      if (tokenBudgets?.key || tokenBudgets?.account) {
        account.tokenBudgets = {
          ...(tokenBudgets.key ? { key: tokenBudgets.key } : {}),
          ...(tokenBudgets.account ? { account: tokenBudgets.account } : {}),
        };
      }
      if (limits?.key || limits?.account) {
        account.limits = {
          ...(limits.key ? { key: limits.key } : {}),
          ...(limits.account ? { account: limits.account } : {}),
        };
      }
      if (!(await deps.store.createAccount(account))) {
        return sendAdminError(reply, 409, 'account_exists', `An account with id '${account.id}' already exists.`, 'id');
      }
      await recordChange(deps, { action: 'account.create', actor: actorOf(request), accountId: account.id });
      return reply.code(201).send(accountView(account, deps.clock.now(), deps.currency ?? DEFAULT_CURRENCY));
    },
  );

  app.get(
    '/admin/accounts',
    { config: { permission: 'accounts:read' }, schema: describeRoute({ summary: 'List the accounts', tags }) },
    async (_request, reply) => {
      const listing = await deps.store.listAccounts();
      for (const { id, problem } of listing.unreadable) {
        deps.logger.error({ event: 'admin', accountId: id, detail: problem }, 'account record unreadable: left out of the listing');
      }
      return reply.send(accountListView(listing, deps.clock.now(), deps.currency ?? DEFAULT_CURRENCY));
    },
  );

  app.get<AccountParams>(
    '/admin/accounts/:id',
    { config: { permission: 'accounts:read' }, schema: describeRoute({ summary: 'Read an account', tags, params: accountPathParams }) },
    async (request, reply) => {
      const { id } = request.params;
      let account: Account | null = null;
      try {
        account = isAccountId(id) ? await deps.store.getAccount(id) : null;
      } catch (error) {
        return sendAccountUnreadable(reply, id, error);
      }
      if (!account) return sendAccountNotFound(reply, id);
      return reply.send(accountView(account, deps.clock.now(), deps.currency ?? DEFAULT_CURRENCY));
    },
  );

  app.patch<AccountParams>(
    '/admin/accounts/:id',
    {
      config: { permission: (request) => accountPatchPermissions(request.body) },
      schema: describeRoute({ summary: 'Change an account', tags, params: accountPathParams, body: patchAccountBody }),
    },
    async (request, reply) => {
      const { id } = request.params;
      const body = patchAccountBody.safeParse(request.body ?? {});
      if (!body.success) return sendInvalidField(reply, body.error);
      if (!isAccountId(id)) return sendAccountNotFound(reply, id);
      const { patch, changes } = toAccountPatch(body.data);
      const account = await deps.store.updateAccount(id, patch);
      if (!account) return sendAccountNotFound(reply, id);
      await recordChange(deps, {
        action: 'account.update',
        actor: actorOf(request),
        accountId: id,
        detail: `changes=${changes.join(',')}${restrictionsDetail(patch.keyRestrictions)}`,
      });
      return reply.send(accountView(account, deps.clock.now(), deps.currency ?? DEFAULT_CURRENCY));
    },
  );

  /**
   * With an Idempotency-Key (optional; docs/concepts/billing-and-limits.md,
   * Retries) the adjustment is applied at most once per key and account for
   * CREDIT_IDEMPOTENCY_TTL_MS: a repeat answers the first status and body
   * again, with `Idempotent-Replayed: true`, and writes no second audit entry
   * (but the first, when the call that applied it lost every reply: see
   * ownsCreditAudit).
   */
  app.post<AccountParams>(
    '/admin/accounts/:id/credit',
    {
      config: { permission: 'billing:write' },
      schema: describeRoute({
        summary: 'Add to or take from the prepaid credit',
        tags,
        params: accountPathParams,
        headers: creditHeaders,
        body: creditBody,
      }),
    },
    async (request, reply) => {
      const { id } = request.params;
      const header = request.headers[IDEMPOTENCY_KEY_HEADER];
      // A repeated header, joined as Node joins it for any other header: the same repeat gets the same key.
      const idempotencyKey = Array.isArray(header) ? header.join(', ') : header;
      const keyProblem = idempotencyKey === undefined ? undefined : idempotencyKeyProblem(idempotencyKey);
      if (keyProblem !== undefined) {
        return sendAdminError(
          reply,
          400,
          'invalid_idempotency_key',
          `The Idempotency-Key header ${keyProblem}. Send 1 to ${IDEMPOTENCY_KEY_MAX_LENGTH} printable ASCII characters ` +
            '(a UUID, say), or no header at all. Nothing was changed.',
        );
      }
      const body = creditBody.safeParse(request.body ?? {});
      if (!body.success) return sendInvalidField(reply, body.error);
      if (!isAccountId(id)) return sendAccountNotFound(reply, id);
      const { amount } = body.data;
      let result: CreditResult;
      try {
        result = await deps.store.adjustCredit(id, amount, idempotencyKey);
      } catch (error) {
        if (idempotencyKey !== undefined && error instanceof StoreUnavailableError && !(error instanceof CorruptRecordError)) {
          deps.logger.error({ event: 'admin', accountId: id, detail: error.message }, 'admin call failed: store unavailable');
          // Unlike a credit without a key, this one is safe to send again: the key applies it at most once.
          return sendAdminError(
            reply,
            503,
            'store_unavailable',
            'The key store is unavailable; the adjustment may or may not have been applied. ' +
              'Send it again with the same Idempotency-Key: it is applied at most once.',
          );
        }
        return sendAccountUnreadable(reply, id, error, ' Nothing was changed.');
      }
      if (result.kind === 'account_not_found') return sendAccountNotFound(reply, id);
      if (result.kind === 'idempotency_key_reused') {
        return sendAdminError(
          reply,
          409,
          'idempotency_key_reused',
          `This Idempotency-Key was already used on account '${id}' within the last ${CREDIT_IDEMPOTENCY_TTL_MS / 3_600_000} hours for another request ` +
            `(an amount of ${result.amount}, not ${amount}). Nothing was changed. Send a new key for a new adjustment.`,
        );
      }
      const replayed = result.kind === 'replayed';
      const outcome = result.kind === 'replayed' ? result.first : result;
      if (replayed) reply.header(IDEMPOTENT_REPLAYED_HEADER, 'true');
      switch (outcome.kind) {
        case 'not_prepaid':
          return sendAdminError(
            reply,
            409,
            'not_prepaid',
            `Account '${id}' is post-paid, so it has no credit balance to adjust. ` +
              `Make it prepaid first by setting billing.creditBalance (PATCH /admin/accounts/${id}).`,
          );
        case 'balance_out_of_range':
          return sendAdminError(
            reply,
            409,
            'credit_balance_out_of_range',
            `Account '${id}' has a balance of ${outcome.creditBalance}; adding ${amount} would leave the allowed range ` +
              `of ±${CREDIT_LIMIT_MINOR_UNITS} units. Nothing was changed.`,
            'amount',
          );
        case 'ok': {
          if (await ownsCreditAudit(deps, id, idempotencyKey)) {
            await recordChange(deps, { action: 'account.credit', actor: actorOf(request), accountId: id, detail: `amount=${amount}` });
          }
          const view: CreditView = creditView(id, outcome.creditBalance, deps.currency ?? DEFAULT_CURRENCY);
          return reply.send(view);
        }
      }
    },
  );
}
