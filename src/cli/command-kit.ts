import type { Command } from 'commander';
import { adminExchange, type AdminAnswer } from './admin-client';

/**
 * The settings module is imported when a command runs, not when the CLI loads: its schema library (zod) and the
 * whole configuration tree would otherwise be loaded for `--help` and for a usage error too.
 */
const settingsModule = () => import('../platform/settings');

/**
 * What every admin command shares. Settings (ADMIN_URL, ADMIN_TOKEN) are read
 * only when a command runs, after commander has accepted its options, so a
 * bad option is refused before anything else happens.
 */
export function callApi<T>(method: 'GET' | 'POST' | 'PATCH' | 'DELETE', path: string, body?: object): Promise<T> {
  return exchangeWithApi<T>(method, path, body).then((answer) => answer.body);
}

/** callApi with request headers of the command's own, answering the response's headers too. */
export function exchangeWithApi<T>(
  method: 'GET' | 'POST' | 'PATCH' | 'DELETE',
  path: string,
  body?: object,
  headers: Readonly<Record<string, string>> = {},
): Promise<AdminAnswer<T>> {
  return settingsModule().then(({ loadCliSettings }) => adminExchange<T>(loadCliSettings(process.env), method, path, body, headers));
}

/** Where `check` sends its Check without --grpc-url: 127.0.0.1 and GRPC_PORT, read when the command runs. */
export async function defaultCheckTarget(): Promise<string> {
  return (await settingsModule()).loadCheckTarget(process.env);
}

export const accountPath = (id: string) => `/admin/accounts/${encodeURIComponent(id)}`;
export const keyPath = (id: string) => `/admin/keys/${encodeURIComponent(id)}`;

export interface JsonFlag {
  json?: true;
}

/** Adds `--json`: print the admin API's answer as one JSON document instead of text. */
export function withJson(command: Command): Command {
  return command.option('--json', "print the admin API's answer as JSON instead of text");
}
