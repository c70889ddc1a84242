import type { FastifyInstance, FastifyReply } from 'fastify';
import { CREDIT_LIMIT_MINOR_UNITS } from '../../domain/credit';
import type { Account } from '../../domain/key-records';
import { CorruptRecordError, type AccountPatch, type CreditResult } from '../../store/store';
import { sendAccountNotFound, sendAdminError } from '../admin-errors';
import { sendInvalidField } from '../../http/api-errors';
import { accountIdSchema, createAccountBody, creditBody, patchAccountBody, type PatchAccountBody } from '../admin-schemas';
import type { AdminServerDeps } from '../admin-deps';
import { recordChange } from '../../actions/audit-trail';
import { OPERATOR } from '../../domain/customer-identity';
import { accountListView, accountView, type CreditView } from '../admin-views';

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
  return { patch, changes };
}

/**
 * Accounts: create, read, change (name, billing and spend cap, limit and
 * token budget overrides) and prepaid credit. Answers are always the account view (admin-views.ts).
 */
export function registerAccountRoutes(app: FastifyInstance, deps: AdminServerDeps): void {
  const now = () => new Date(deps.clock.now()).toISOString();
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

  app.post('/admin/accounts', async (request, reply) => {
    const body = createAccountBody.safeParse(request.body);
    if (!body.success) return sendInvalidField(reply, body.error);
    const { id, name, billing, limits, maxActiveKeys, tokenBudgets } = body.data;
    const account: Account = { id, name, status: billing?.status ?? 'active', createdAt: now() };
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
    await recordChange(deps, { action: 'account.create', actor: OPERATOR, accountId: account.id });
    return reply.code(201).send(accountView(account, deps.clock.now()));
  });

  app.get('/admin/accounts', async (_request, reply) => {
    const listing = await deps.store.listAccounts();
    for (const { id, problem } of listing.unreadable) {
      deps.logger.error({ event: 'admin', accountId: id, detail: problem }, 'account record unreadable: left out of the listing');
    }
    return reply.send(accountListView(listing, deps.clock.now()));
  });

  app.get<AccountParams>('/admin/accounts/:id', async (request, reply) => {
    const { id } = request.params;
    let account: Account | null = null;
    try {
      account = isAccountId(id) ? await deps.store.getAccount(id) : null;
    } catch (error) {
      return sendAccountUnreadable(reply, id, error);
    }
    if (!account) return sendAccountNotFound(reply, id);
    return reply.send(accountView(account, deps.clock.now()));
  });

  app.patch<AccountParams>('/admin/accounts/:id', async (request, reply) => {
    const { id } = request.params;
    const body = patchAccountBody.safeParse(request.body ?? {});
    if (!body.success) return sendInvalidField(reply, body.error);
    if (!isAccountId(id)) return sendAccountNotFound(reply, id);
    const { patch, changes } = toAccountPatch(body.data);
    const account = await deps.store.updateAccount(id, patch);
    if (!account) return sendAccountNotFound(reply, id);
    await recordChange(deps, { action: 'account.update', actor: OPERATOR, accountId: id, detail: `changes=${changes.join(',')}` });
    return reply.send(accountView(account, deps.clock.now()));
  });

  app.post<AccountParams>('/admin/accounts/:id/credit', async (request, reply) => {
    const { id } = request.params;
    const body = creditBody.safeParse(request.body ?? {});
    if (!body.success) return sendInvalidField(reply, body.error);
    if (!isAccountId(id)) return sendAccountNotFound(reply, id);
    const { amount } = body.data;
    let result: CreditResult;
    try {
      result = await deps.store.adjustCredit(id, amount);
    } catch (error) {
      return sendAccountUnreadable(reply, id, error, ' Nothing was changed.');
    }
    switch (result.kind) {
      case 'account_not_found':
        return sendAccountNotFound(reply, id);
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
          `Account '${id}' has a balance of ${result.creditBalance}; adding ${amount} would leave the allowed range ` +
            `of ±${CREDIT_LIMIT_MINOR_UNITS} minor units. Nothing was changed.`,
          'amount',
        );
      case 'ok': {
        await recordChange(deps, { action: 'account.credit', actor: OPERATOR, accountId: id, detail: `amount=${amount}` });
        const view: CreditView = { accountId: id, creditBalance: result.creditBalance };
        return reply.send(view);
      }
    }
  });
}
