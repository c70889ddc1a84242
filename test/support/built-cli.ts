import { execFileSync, spawn } from 'node:child_process';
import { join } from 'node:path';

const ROOT = join(__dirname, '..', '..');
export const CLI_PATH = join(ROOT, 'dist', 'cli', 'main.js');

/**
 * The compiled CLI, built first if any source is newer than the last build (tools/build-if-stale.js, as `npm start`
 * does; npm test builds first anyway).
 */
export function ensureBuiltCli(): string {
  execFileSync(process.execPath, [join(ROOT, 'tools', 'build-if-stale.js')], { cwd: ROOT, stdio: ['ignore', 'ignore', 'pipe'] });
  return CLI_PATH;
}

export interface CliRun {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs the CLI to completion with exactly the given environment (plus PATH). */
export function runCli(args: string[], env: Record<string, string>, timeoutMs = 15000): Promise<CliRun> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [ensureBuiltCli(), ...args], {
      env: { PATH: process.env.PATH ?? '', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk) => (stdout += chunk));
    child.stderr.on('data', (chunk) => (stderr += chunk));
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`CLI ${args.join(' ')} did not finish in ${timeoutMs} ms; stderr: ${stderr}`));
    }, timeoutMs);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}
