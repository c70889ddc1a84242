import { execFileSync, spawn } from 'node:child_process';
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';

const ROOT = join(__dirname, '..', '..');
export const CLI_PATH = join(ROOT, 'dist', 'cli', 'main.js');

function newestSource(dir: string): number {
  return readdirSync(dir, { withFileTypes: true }).reduce((newest, entry) => {
    const path = join(dir, entry.name);
    return Math.max(newest, entry.isDirectory() ? newestSource(path) : statSync(path).mtimeMs);
  }, 0);
}

/**
 * The compiled CLI, rebuilt with `npm run build` (TypeScript, then the dashboard's browser files into dist/web/) when
 * any source is newer (npm test builds first anyway).
 */
export function ensureBuiltCli(): string {
  let built = 0;
  try {
    built = statSync(CLI_PATH).mtimeMs;
  } catch {
    built = 0;
  }
  if (built < newestSource(join(ROOT, 'src'))) {
    execFileSync('npm', ['run', 'build', '--silent'], { cwd: ROOT, stdio: ['ignore', 'ignore', 'pipe'] });
  }
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
