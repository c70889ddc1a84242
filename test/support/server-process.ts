import { spawn, type ChildProcess } from 'node:child_process';
import { ensureBuiltCli } from './built-cli';
import { freePort } from './free-port';
import { captureAdminResponses, captureFinalState, recordLogLine } from './secret-scan';

export interface ServerProcess {
  child: ChildProcess;
  grpcAddress: string;
  adminUrl: string;
  /** Everything the process wrote to stdout so far. */
  output(): string;
  /** Everything the process wrote to stderr so far. */
  errors(): string;
  /**
   * A final /metrics scrape and audit log read for the secret scan (best
   * effort, short timeout), then SIGTERM and wait for the exit; resolves
   * with the exit code.
   */
  stop(): Promise<number | null>;
}

/**
 * `gateway-authz serve` as a separate OS process (a replica), on free
 * loopback ports. It must log at info or below: start-up is detected from the
 * "listening" line. Its log lines join the suite-wide secret scan.
 */
export async function startServerProcess(env: Record<string, string>, startTimeoutMs = 15000): Promise<ServerProcess> {
  // A port found free can be taken before the child binds it (another suite's outgoing connection picks its local
  // port from the same range), so a start that fails on EADDRINUSE is tried again on new ports.
  for (let attempt = 1; ; attempt += 1) {
    try {
      return await startOnFreePorts(env, startTimeoutMs);
    } catch (error) {
      if (attempt >= 3 || !/EADDRINUSE/.test((error as Error).message)) throw error;
    }
  }
}

async function startOnFreePorts(env: Record<string, string>, startTimeoutMs: number): Promise<ServerProcess> {
  const [grpcPort, adminPort, customerPort] = [await freePort(), await freePort(), await freePort()];
  const child = spawn(process.execPath, [ensureBuiltCli(), 'serve'], {
    env: {
      PATH: process.env.PATH ?? '',
      GRPC_PORT: String(grpcPort),
      ADMIN_PORT: String(adminPort),
      CUSTOMER_PORT: String(customerPort),
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  let errors = '';
  let partial = '';
  child.stdout.on('data', (chunk) => {
    output += chunk;
    const lines = (partial + String(chunk)).split('\n');
    partial = lines.pop() ?? '';
    for (const line of lines) if (line !== '') recordLogLine(line);
  });
  child.stderr.on('data', (chunk) => (errors += chunk));
  await new Promise<void>((resolve, reject) => {
    const deadline = setTimeout(() => reject(new Error(`server did not start: ${output}${errors}`)), startTimeoutMs);
    const onData = () => {
      if (output.includes('gateway-authz listening')) {
        clearTimeout(deadline);
        child.stdout.off('data', onData);
        resolve();
      }
    };
    child.stdout.on('data', onData);
    child.once('exit', (code) => {
      clearTimeout(deadline);
      reject(new Error(`server exited with ${code} before listening: ${output}${errors}`));
    });
  });
  const adminUrl = `http://127.0.0.1:${adminPort}`;
  captureAdminResponses(adminUrl);
  return {
    child,
    grpcAddress: `127.0.0.1:${grpcPort}`,
    adminUrl,
    output: () => output,
    errors: () => errors,
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return child.exitCode;
      await captureFinalState(adminUrl, env.ADMIN_TOKEN || undefined, 1000);
      if (child.exitCode !== null || child.signalCode !== null) return child.exitCode;
      const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
      child.kill('SIGTERM');
      return exited;
    },
  };
}
