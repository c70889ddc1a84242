import { Command } from 'commander';
import { accountPath, callApi, withJson, type JsonFlag } from '../command-kit';
import { cell, emit, renderKeyValue, renderTable, shortTime, type Column } from '../output';

/** An endpoint as the admin API answers it (docs/concepts/webhooks.md); `secret` only when added or rotated. */
interface ApiEndpoint {
  id: string;
  accountId: string;
  url: string;
  events: string[];
  description?: string;
  createdAt: string;
  enabled: boolean;
  disabledReason?: string;
  consecutiveFailures: number;
  secret?: string;
}
interface ApiDeliveryAttempt {
  eventId: string;
  eventType: string;
  attempt: number;
  at: string;
  outcome: 'delivered' | 'failed';
  status?: number;
  error?: string;
  durationMs: number;
  nextAttemptAt?: string;
}

const webhooksPath = (accountId: string) => `${accountPath(accountId)}/webhooks`;
const endpointPath = (accountId: string, endpointId: string) => `${webhooksPath(accountId)}/${encodeURIComponent(endpointId)}`;

const ENDPOINT_COLUMNS: readonly Column<ApiEndpoint>[] = [
  { header: 'ID', value: (endpoint) => endpoint.id },
  { header: 'URL', value: (endpoint) => endpoint.url },
  { header: 'EVENTS', value: (endpoint) => endpoint.events.join(',') },
  { header: 'STATE', value: (endpoint) => (endpoint.enabled ? 'enabled' : 'disabled') },
  { header: 'FAILURES', value: (endpoint) => endpoint.consecutiveFailures },
];

const DELIVERY_COLUMNS: readonly Column<ApiDeliveryAttempt>[] = [
  { header: 'AT', value: (attempt) => shortTime(attempt.at) },
  { header: 'EVENT', value: (attempt) => `${attempt.eventType} ${attempt.eventId}` },
  { header: 'ATTEMPT', value: (attempt) => attempt.attempt },
  { header: 'OUTCOME', value: (attempt) => attempt.outcome },
  { header: 'STATUS', value: (attempt) => attempt.status ?? '-' },
  { header: 'ERROR', value: (attempt) => attempt.error ?? '' },
  { header: 'NEXT', value: (attempt) => shortTime(attempt.nextAttemptAt) },
];

function renderEndpoint(endpoint: ApiEndpoint): string {
  return renderKeyValue([
    ['id', endpoint.id],
    ['account', endpoint.accountId],
    ['url', endpoint.url],
    ['events', endpoint.events.join(', ')],
    ['description', endpoint.description],
    ['state', endpoint.enabled ? 'enabled' : `disabled: ${endpoint.disabledReason ?? ''}`],
    ['failures in a row', endpoint.consecutiveFailures],
    ['created', endpoint.createdAt],
  ]);
}

/** The secret, shown once: said so, so it is copied now. */
function renderWithSecret(endpoint: ApiEndpoint, what: string): string {
  return `${what}\n\n${renderEndpoint(endpoint)}\nsigning secret (shown once, keep it like a password): ${endpoint.secret ?? ''}\n`;
}

const eventsOption = (value: string) =>
  value
    .split(',')
    .map((type) => type.trim())
    .filter(Boolean);

export function webhooksCommand(): Command {
  const webhooks = new Command('webhooks').description("manage an account's webhook endpoints (signed events: keys, members)");
  const endpointCommand = (name: string, description: string) =>
    withJson(
      webhooks
        .command(name)
        .description(description)
        .requiredOption('--account <id>', 'account id')
        .requiredOption('--id <endpoint-id>', 'endpoint id (whe_…, see webhooks list)'),
    );

  withJson(webhooks.command('list').description("list an account's endpoints").requiredOption('--account <id>', 'account id')).action(
    async (options: JsonFlag & { account: string }) => {
      const list = await callApi<{ endpoints: ApiEndpoint[] }>('GET', webhooksPath(options.account));
      emit(options, list, (answer) =>
        answer.endpoints.length === 0
          ? `Account ${cell(options.account)} has no webhook endpoints.\n`
          : renderTable(ENDPOINT_COLUMNS, answer.endpoints),
      );
    },
  );

  withJson(
    webhooks
      .command('add')
      .description('add an endpoint (https; its signing secret is shown once)')
      .requiredOption('--account <id>', 'account id')
      .requiredOption('--url <url>', 'where events are posted')
      .requiredOption('--events <types>', 'comma-separated event types, e.g. key.revoked,key.exposed', eventsOption)
      .option('--description <text>', 'what it is for'),
  ).action(async (options: JsonFlag & { account: string; url: string; events: string[]; description?: string }) => {
    const body = { url: options.url, events: options.events, ...(options.description ? { description: options.description } : {}) };
    const endpoint = await callApi<ApiEndpoint>('POST', webhooksPath(options.account), body);
    emit(options, endpoint, (answer) => renderWithSecret(answer, `Added endpoint ${cell(answer.id)}.`));
  });

  for (const [name, enabled] of [
    ['enable', true],
    ['disable', false],
  ] as const) {
    endpointCommand(name, `${name} an endpoint${enabled ? ' (clears its failure count)' : ''}`).action(
      async (options: JsonFlag & { account: string; id: string }) => {
        emit(options, await callApi<ApiEndpoint>('PATCH', endpointPath(options.account, options.id), { enabled }), renderEndpoint);
      },
    );
  }

  endpointCommand('rotate-secret', "replace an endpoint's signing secret (the new one is shown once)").action(
    async (options: JsonFlag & { account: string; id: string }) => {
      const endpoint = await callApi<ApiEndpoint>('POST', `${endpointPath(options.account, options.id)}/rotate-secret`);
      emit(options, endpoint, (answer) => renderWithSecret(answer, `New secret for ${cell(answer.id)}; the old one no longer signs.`));
    },
  );

  endpointCommand('test', 'send a webhook.test event to an endpoint').action(
    async (options: JsonFlag & { account: string; id: string }) => {
      const queued = await callApi<{ eventId: string }>('POST', `${endpointPath(options.account, options.id)}/test`);
      emit(options, queued, (answer) => `Queued test event ${cell(answer.eventId)}; see webhooks deliveries.\n`);
    },
  );

  endpointCommand('deliveries', "an endpoint's delivery log, newest first").action(
    async (options: JsonFlag & { account: string; id: string }) => {
      const log = await callApi<{ deliveries: ApiDeliveryAttempt[] }>('GET', `${endpointPath(options.account, options.id)}/deliveries`);
      emit(options, log, (answer) =>
        answer.deliveries.length === 0 ? 'No attempts yet.\n' : renderTable(DELIVERY_COLUMNS, answer.deliveries),
      );
    },
  );

  endpointCommand('delete', 'delete an endpoint (its pending deliveries and log go with it)').action(
    async (options: JsonFlag & { account: string; id: string }) => {
      const deleted = await callApi<{ deleted: string }>('DELETE', endpointPath(options.account, options.id));
      emit(options, deleted, (answer) => `Deleted endpoint ${cell(answer.deleted)}.\n`);
    },
  );

  return webhooks;
}
