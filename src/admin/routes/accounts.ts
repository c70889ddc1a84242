import type { FastifyInstance } from 'fastify';
import type { AccountPatch } from '../../store/store';
import type { Account } from '../../domain/key-records';
import { sendAccountNotFound, sendAdminError, sendInvalidBody } from '../admin-errors';
import { accountIdSchema, createAccountBody, creditBody, patchAccountBody, type PatchAccountBody } from '../admin-schemas';
import type { AdminServerDeps } from '../admin-deps';
import { recordAdminAction } from '../admin-actions';
import { accountView, type CreditView } from '../admin-views';

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
  return { patch, changes };
}

/**
 * Accounts: create, read, change (name, billing, limit overrides) and
 * prepaid credit. Answers are always the account view (admin-views.ts).
 */
export function registerAccountRoutes(app: FastifyInstance, deps: AdminServerDeps): void {
  const now = () => new Date(deps.clock.now()).toISOString();
  /** An id no account can have is answered 404 without asking the store. */
  const isAccountId = (id: string) => accountIdSchema.safeParse(id).success;

  app.post('/admin/accounts', async (request, reply) => {
    const body = createAccountBody.safeParse(request.body);
    if (!body.success) return sendInvalidBody(reply, body.error);
    const { id, name, billing, limits } = body.data;
    const account: Account = { id, name, status: billing?.status ?? 'active', createdAt: now() };
    if (billing?.creditBalance != null) account.creditBalance = billing.creditBalance;
    if (limits?.key || limits?.account) {
      account.limits = {
        ...(limits.key ? { key: limits.key } : {}),
        ...(limits.account ? { account: limits.account } : {}),
      };
    }
    if (!(await deps.store.createAccount(account))) {
      return sendAdminError(reply, 409, 'account_exists', `An account with id '${account.id}' already exists.`, 'id');
    }
    await recordAdminAction(deps, { action: 'account.create', accountId: account.id });
    return reply.code(201).send(accountView(account));
  });

  app.get('/admin/accounts', async (_request, reply) => {
    const accounts = await deps.store.listAccounts();
    return reply.send({ accounts: accounts.map(accountView) });
  });

  app.get<AccountParams>('/admin/accounts/:id', async (request, reply) => {
    const { id } = request.params;
    const account = isAccountId(id) ? await deps.store.getAccount(id) : null;
    if (!account) return sendAccountNotFound(reply, id);
    return reply.send(accountView(account));
  });

  app.patch<AccountParams>('/admin/accounts/:id', async (request, reply) => {
    const { id } = request.params;
    const body = patchAccountBody.safeParse(request.body ?? {});
    if (!body.success) return sendInvalidBody(reply, body.error);
    if (!isAccountId(id)) return sendAccountNotFound(reply, id);
    const { patch, changes } = toAccountPatch(body.data);
    const account = await deps.store.updateAccount(id, patch);
    if (!account) return sendAccountNotFound(reply, id);
    await recordAdminAction(deps, { action: 'account.update', accountId: id, detail: `changes=${changes.join(',')}` });
    return reply.send(accountView(account));
  });

  app.post<AccountParams>('/admin/accounts/:id/credit', async (request, reply) => {
    const { id } = request.params;
    const body = creditBody.safeParse(request.body ?? {});
    if (!body.success) return sendInvalidBody(reply, body.error);
    if (!isAccountId(id)) return sendAccountNotFound(reply, id);
    const { amount } = body.data;
    const result = await deps.store.adjustCredit(id, amount);
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
      case 'ok': {
        await recordAdminAction(deps, { action: 'account.credit', accountId: id, detail: `amount=${amount}` });
        const view: CreditView = { accountId: id, creditBalance: result.creditBalance };
        return reply.send(view);
      }
    }
  });
}
