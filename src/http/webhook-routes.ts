import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import type { AuditActor } from '../accounts/customer-identity';
import { sendApiError, sendInvalidField } from './api-errors';
import { describeRoute } from './openapi';
import { accountIdSchema } from './api-schemas';
import {
  createEndpoint,
  deleteEndpoint,
  readDeliveryLog,
  rotateEndpointSecret,
  setCreditLowThreshold,
  sendTestEvent,
  updateEndpoint,
  type WebhookActionDeps,
} from '../webhooks/endpoint-actions';
import { WEBHOOK_EVENT_TYPES } from '../webhooks/webhook-events';
import { CREDIT_LIMIT_MINOR_UNITS } from '../accounts/credit';
import { currencyView, DEFAULT_CURRENCY, formatMoney, type Currency } from '../accounts/money';

/**
 * The webhook endpoint routes, the same for the operator (admin API, under
 * `/admin/accounts/:id`) and for owners (customer API, under
 * `/accounts/:accountId`): each API mounts them under its own account path,
 * with its own access check and who the change is recorded as.
 */

const endpointIdSchema = z.string().regex(/^whe_[A-Za-z0-9]{1,64}$/);
const urlSchema = z.string().min(1).max(2048);
const eventsSchema = z.array(z.enum(WEBHOOK_EVENT_TYPES)).min(1).max(WEBHOOK_EVENT_TYPES.length);
const descriptionSchema = z.string().max(200);

export const createEndpointBody = z.strictObject({ url: urlSchema, events: eventsSchema, description: descriptionSchema.optional() });
const PATCH_FIELDS = ['url', 'events', 'description', 'enabled'] as const;
export const patchEndpointBody = z
  .strictObject({
    url: urlSchema.optional(),
    events: eventsSchema.optional(),
    /** null removes it. */
    description: descriptionSchema.nullable().optional(),
    /** true enables (and clears the failure count), false disables. */
    enabled: z.boolean().optional(),
  })
  .refine((body) => PATCH_FIELDS.some((field) => body[field] !== undefined), {
    message: `must set at least one of: ${PATCH_FIELDS.join(', ')}`,
  });

/** The account's webhook settings: the prepaid balance (integer minor units) below which `credit.low` is sent; null: never. */
export const webhookSettingsBody = z.strictObject({
  creditLowThreshold: z.number().int().min(1).max(CREDIT_LIMIT_MINOR_UNITS).nullable(),
});

export interface WebhookRouteOptions {
  /** `/admin/accounts/:id` or `/accounts/:accountId`. */
  accountPath: string;
  /** The account path's parameter name. */
  accountParam: string;
  deps: WebhookActionDeps;
  actorOf(request: FastifyRequest): AuditActor;
  /** Per-route config (the customer API's access check, the admin API's permission), by the route's method. */
  configFor?: (method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE') => Record<string, unknown>;
  tags: string[];
  /** What the threshold counts, for its money text; absent: DEFAULT_CURRENCY. */
  currency?: Currency;
}

/**
 * The webhook settings as the APIs answer them: the credit.low threshold in the currency's units (10^-exponent), the
 * same as money ("$25.00", null when there is none), and the currency the units count.
 */
export function webhookSettingsView(creditLowThreshold: number | null, currency: Currency = DEFAULT_CURRENCY) {
  return {
    creditLowThreshold,
    creditLowThresholdFormatted: creditLowThreshold === null ? null : formatMoney(creditLowThreshold, currency),
    currency: currencyView(currency),
  };
}

export function registerWebhookRoutes(app: FastifyInstance, options: WebhookRouteOptions): void {
  const { deps, tags } = options;
  const configFor = options.configFor ?? (() => ({}));
  const base = `${options.accountPath}/webhooks`;
  const accountOf = (request: FastifyRequest) => (request.params as Record<string, string>)[options.accountParam]!;
  const endpointOf = (request: FastifyRequest) => (request.params as { endpointId: string }).endpointId;
  const noAccount = (reply: FastifyReply, accountId: string) => sendApiError(reply, 404, 'account_not_found', `No account '${accountId}'.`);
  const noEndpoint = (reply: FastifyReply, accountId: string, endpointId: string) =>
    sendApiError(reply, 404, 'endpoint_not_found', `Account '${accountId}' has no webhook endpoint '${endpointId}'.`);
  /** The account and endpoint ids of the path when both are well formed; otherwise the 404 was sent. */
  const ids = (request: FastifyRequest, reply: FastifyReply) => {
    const accountId = accountOf(request);
    const endpointId = endpointOf(request);
    if (!accountIdSchema.safeParse(accountId).success) return void noAccount(reply, accountId);
    if (!endpointIdSchema.safeParse(endpointId).success) return void noEndpoint(reply, accountId, endpointId);
    return { accountId, endpointId };
  };

  app.get(
    base,
    { config: configFor('GET'), schema: describeRoute({ summary: "The account's webhook endpoints (never their secrets)", tags }) },
    async (request, reply) => {
      const accountId = accountOf(request);
      if (!accountIdSchema.safeParse(accountId).success || !(await deps.store.getAccount(accountId))) return noAccount(reply, accountId);
      const endpoints = await deps.store.webhooks.listEndpoints(accountId);
      return reply.send({ endpoints: endpoints.map(({ secret: _secret, ...view }) => view), eventTypes: WEBHOOK_EVENT_TYPES });
    },
  );

  app.get(
    `${base}/settings`,
    { config: configFor('GET'), schema: describeRoute({ summary: "The account's webhook settings (the credit.low threshold)", tags }) },
    async (request, reply) => {
      const accountId = accountOf(request);
      if (!accountIdSchema.safeParse(accountId).success || !(await deps.store.getAccount(accountId))) return noAccount(reply, accountId);
      return reply.send(webhookSettingsView(await deps.store.webhooks.getCreditLowThreshold(accountId), options.currency));
    },
  );

  app.put(
    `${base}/settings`,
    {
      config: configFor('PUT'),
      schema: describeRoute({
        summary: "Set the credit.low threshold (an integer count of the currency setting's units; null: never)",
        tags,
        body: webhookSettingsBody,
      }),
    },
    async (request, reply) => {
      const accountId = accountOf(request);
      if (!accountIdSchema.safeParse(accountId).success) return noAccount(reply, accountId);
      const body = webhookSettingsBody.safeParse(request.body ?? {});
      if (!body.success) return sendInvalidField(reply, body.error);
      const saved = await setCreditLowThreshold(deps, options.actorOf(request), accountId, body.data.creditLowThreshold);
      return saved ? reply.send(webhookSettingsView(saved.creditLowThreshold, options.currency)) : noAccount(reply, accountId);
    },
  );

  app.post(
    base,
    {
      config: configFor('POST'),
      schema: describeRoute({ summary: 'Add a webhook endpoint (the answer holds its secret, once)', tags, body: createEndpointBody }),
    },
    async (request, reply) => {
      const accountId = accountOf(request);
      if (!accountIdSchema.safeParse(accountId).success) return noAccount(reply, accountId);
      const body = createEndpointBody.safeParse(request.body ?? {});
      if (!body.success) return sendInvalidField(reply, body.error);
      const outcome = await createEndpoint(deps, options.actorOf(request), accountId, {
        url: body.data.url,
        events: body.data.events,
        ...(body.data.description !== undefined ? { description: body.data.description } : {}),
      });
      switch (outcome.kind) {
        case 'created':
          return reply.code(201).send({ ...outcome.endpoint, secret: outcome.secret });
        case 'invalid':
          return sendApiError(reply, 400, 'invalid_field', outcome.problem, outcome.problem.split(':')[0]);
        case 'account_not_found':
          return noAccount(reply, accountId);
        case 'endpoint_limit_reached':
          return sendApiError(reply, 409, 'endpoint_limit_reached', `An account may have at most ${outcome.limit} webhook endpoints.`);
      }
    },
  );

  app.patch(
    `${base}/:endpointId`,
    {
      config: configFor('PATCH'),
      schema: describeRoute({ summary: 'Change, enable or disable a webhook endpoint', tags, body: patchEndpointBody }),
    },
    async (request, reply) => {
      const target = ids(request, reply);
      if (!target) return reply;
      const body = patchEndpointBody.safeParse(request.body ?? {});
      if (!body.success) return sendInvalidField(reply, body.error);
      const change: Parameters<typeof updateEndpoint>[4] = {};
      if (body.data.url !== undefined) change.url = body.data.url;
      if (body.data.events !== undefined) change.events = body.data.events;
      if (body.data.description !== undefined) change.description = body.data.description;
      if (body.data.enabled !== undefined) change.enabled = body.data.enabled;
      const outcome = await updateEndpoint(deps, options.actorOf(request), target.accountId, target.endpointId, change);
      if (outcome.kind === 'invalid') return sendApiError(reply, 400, 'invalid_field', outcome.problem, outcome.problem.split(':')[0]);
      if (outcome.kind === 'not_found') return noEndpoint(reply, target.accountId, target.endpointId);
      return reply.send(outcome.endpoint);
    },
  );

  app.delete(
    `${base}/:endpointId`,
    { config: configFor('DELETE'), schema: describeRoute({ summary: 'Delete a webhook endpoint', tags }) },
    async (request, reply) => {
      const target = ids(request, reply);
      if (!target) return reply;
      if (!(await deleteEndpoint(deps, options.actorOf(request), target.accountId, target.endpointId)))
        return noEndpoint(reply, target.accountId, target.endpointId);
      return reply.send({ deleted: target.endpointId });
    },
  );

  app.post(
    `${base}/:endpointId/rotate-secret`,
    {
      config: configFor('POST'),
      schema: describeRoute({ summary: "Replace an endpoint's signing secret (the answer holds it, once)", tags }),
    },
    async (request, reply) => {
      const target = ids(request, reply);
      if (!target) return reply;
      const outcome = await rotateEndpointSecret(deps, options.actorOf(request), target.accountId, target.endpointId);
      if (outcome.kind === 'not_found') return noEndpoint(reply, target.accountId, target.endpointId);
      return reply.send({ ...outcome.endpoint, secret: outcome.secret });
    },
  );

  app.post(
    `${base}/:endpointId/test`,
    { config: configFor('POST'), schema: describeRoute({ summary: 'Send a webhook.test event to this endpoint', tags }) },
    async (request, reply) => {
      const target = ids(request, reply);
      if (!target) return reply;
      const outcome = await sendTestEvent(deps, target.accountId, target.endpointId);
      if (outcome.kind === 'not_found') return noEndpoint(reply, target.accountId, target.endpointId);
      if (outcome.kind === 'disabled')
        return sendApiError(reply, 409, 'endpoint_disabled', 'The endpoint is disabled: enable it to send it events.');
      return reply.code(202).send({ eventId: outcome.eventId });
    },
  );

  app.get(
    `${base}/:endpointId/deliveries`,
    { config: configFor('GET'), schema: describeRoute({ summary: "An endpoint's delivery log, newest first", tags }) },
    async (request, reply) => {
      const target = ids(request, reply);
      if (!target) return reply;
      const attempts = await readDeliveryLog(deps, target.accountId, target.endpointId);
      if (!attempts) return noEndpoint(reply, target.accountId, target.endpointId);
      return reply.send({ deliveries: attempts });
    },
  );
}
