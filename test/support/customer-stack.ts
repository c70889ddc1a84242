import { fork, spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { ensureBuiltCli } from './built-cli';
import { recordLogLine, registerSecrets } from './secret-scan';
import { freePort } from './free-port';

/**
 * The customer sign-in tests' moving parts, each a real process: an OpenID
 * provider (oidc-provider) and the built service. Both are ES-module users
 * (oidc-provider, openid-client), which jest's module registry cannot load.
 */

const SUPPORT = __dirname;

export interface TestProviderClient {
  client_id: string;
  client_secret?: string;
  token_endpoint_auth_method: 'none' | 'client_secret_basic';
  redirect_uris: string[];
}

export interface OidcTestProvider {
  issuer: string;
  /** Every code and token the provider issued so far (also registered with the secret scan). */
  issued: string[];
  /** Everything the provider wrote to stderr. */
  errors(): string;
  /**
   * Makes the provider change parameters once: of the next authorization
   * request as it arrives (`request`), or of the next authorization response's
   * redirect back to the client (`response`).
   */
  tamperNext(changes: { request?: Record<string, string>; response?: Record<string, string> }): Promise<void>;
  stop(): Promise<void>;
}

/** Splits a child's stdout into lines as they come. */
function onLines(child: ChildProcess, handle: (line: string) => void): void {
  let partial = '';
  child.stdout!.on('data', (chunk: Buffer) => {
    const lines = (partial + chunk.toString()).split('\n');
    partial = lines.pop() ?? '';
    for (const line of lines) if (line !== '') handle(line);
  });
}

function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill('SIGTERM');
  const forced = setTimeout(() => child.kill('SIGKILL'), 5_000);
  return exited.finally(() => clearTimeout(forced));
}

export async function startOidcProvider(config: {
  clients: TestProviderClient[];
  users: Record<string, { email?: string; email_verified?: boolean; name?: string; groups?: string[] }>;
}): Promise<OidcTestProvider> {
  for (const client of config.clients) if (client.client_secret) registerSecrets(client.client_secret);
  const child = spawn(process.execPath, [join(SUPPORT, 'oidc-provider-process.mjs')], {
    env: { PATH: process.env.PATH ?? '', OIDC_TEST_PROVIDER: JSON.stringify(config) },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let errors = '';
  child.stderr.on('data', (chunk: Buffer) => (errors += chunk.toString()));
  const issued: string[] = [];
  const issuer = await new Promise<string>((resolve, reject) => {
    const deadline = setTimeout(() => reject(new Error(`the OpenID provider did not start: ${errors}`)), 20_000);
    child.once('exit', (code) => reject(new Error(`the OpenID provider exited with ${code}: ${errors}`)));
    onLines(child, (line) => {
      // oidc-provider itself prints a few warnings (development adapter and interactions) as plain text.
      if (!line.startsWith('{')) return;
      const message = JSON.parse(line) as { ready?: boolean; issuer?: string; secret?: string };
      if (message.secret) {
        issued.push(message.secret);
        registerSecrets(message.secret);
      }
      if (message.ready && message.issuer) {
        clearTimeout(deadline);
        resolve(message.issuer);
      }
    });
  });
  return {
    issuer,
    issued,
    errors: () => errors,
    async tamperNext(changes) {
      const response = await fetch(`${issuer}/__test/tamper`, { method: 'POST', body: JSON.stringify(changes) });
      if (response.status !== 204) throw new Error(`the provider refused the tamper request: ${response.status}`);
    },
    stop: () => stopChild(child),
  };
}

export interface CustomerAppProcess {
  customerUrl: string;
  adminUrl: string;
  /** host:port of the Check service. */
  grpcAddress: string;
  /** Every log line so far. */
  logs(): string[];
  /** Moves the service's clock forward (sessions expire on it). */
  advanceClock(ms: number): Promise<void>;
  stop(): Promise<void>;
}

/**
 * The settings of a dashboard signed in through `issuer` on a loopback origin, at `port`, over plain HTTP (the
 * browser tests' setup): a public client `dashboard`, its session secret, Redis within the tests' deadline.
 */
export function loopbackDashboardEnv(options: {
  redisUrl: string;
  issuer: string;
  port: number;
  sessionSecret: string;
}): Record<string, string> {
  return {
    REDIS_URL: options.redisUrl,
    REDIS_TIMEOUT_MS: '1000',
    OIDC_ISSUER_URL: options.issuer,
    OIDC_CLIENT_ID: 'dashboard',
    OIDC_REDIRECT_URL: `http://127.0.0.1:${options.port}/auth/callback`,
    CUSTOMER_SESSION_SECRET: options.sessionSecret,
    CUSTOMER_PLAIN_HTTP_LOCALHOST: 'true',
    CUSTOMER_PORT: String(options.port),
    LOG_LEVEL: 'info',
  };
}

/**
 * The built service with the given environment (plus free loopback ports),
 * run by customer-app-process.mjs; `memberships` maps a subject to its
 * accounts, with a probe API in place of the customer API ('store': the
 * service's own members and customer API). Its log lines join the
 * suite-wide secret scan.
 */
export async function startCustomerApp(
  env: Record<string, string>,
  memberships: Record<string, { accountId: string; role: 'owner' | 'developer' | 'viewer' }[]> | 'store' = {},
): Promise<CustomerAppProcess> {
  ensureBuiltCli();
  const customerPort = env.CUSTOMER_PORT ?? String(await freePort());
  const child = fork(join(SUPPORT, 'customer-app-process.mjs'), [], {
    env: {
      PATH: process.env.PATH ?? '',
      GRPC_PORT: '0',
      ADMIN_PORT: '0',
      ...env,
      CUSTOMER_PORT: customerPort,
      ...(memberships === 'store' ? {} : { TEST_MEMBERSHIPS: JSON.stringify(memberships) }),
    },
    stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
  });
  const lines: string[] = [];
  let errors = '';
  child.stderr!.on('data', (chunk: Buffer) => (errors += chunk.toString()));
  const listening = await new Promise<{ grpcPort: number; adminPort: number; customerPort: number }>((resolve, reject) => {
    const deadline = setTimeout(() => reject(new Error(`the service did not start:\n${lines.join('\n')}\n${errors}`)), 30_000);
    child.once('exit', (code) => reject(new Error(`the service exited with ${code}:\n${lines.join('\n')}\n${errors}`)));
    onLines(child, (line) => {
      lines.push(line);
      recordLogLine(line);
      if (line.includes('gateway-authz listening')) {
        clearTimeout(deadline);
        resolve(JSON.parse(line) as { grpcPort: number; adminPort: number; customerPort: number });
      }
    });
  });
  return {
    customerUrl: `http://127.0.0.1:${listening.customerPort}`,
    adminUrl: `http://127.0.0.1:${listening.adminPort}`,
    grpcAddress: `127.0.0.1:${listening.grpcPort}`,
    logs: () => [...lines],
    advanceClock: (ms) =>
      new Promise((resolve) => {
        const onMessage = (message: { clockAdvancedMs?: number }) => {
          if (typeof message?.clockAdvancedMs !== 'number') return;
          child.off('message', onMessage);
          resolve();
        };
        child.on('message', onMessage);
        child.send({ advanceClockMs: ms });
      }),
    stop: () => stopChild(child),
  };
}
