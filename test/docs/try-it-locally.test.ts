import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from '../support/free-port';
import { readDoc, REPO_ROOT, sectionOf } from './markdown';

/**
 * The README's "Try it locally", run as a newcomer runs it: its shell blocks, line by line, in one bash, from the
 * repository root (`npm start` builds first, so this is slow: minutes on a busy machine). Two things are moved so the
 * test can run beside others: the ports (free ones, through GRPC_PORT, ADMIN_PORT and CUSTOMER_PORT, which the service
 * and the CLI read) and the log file (a temporary directory). `fg` is left out: the test stops the service itself.
 */
const RUN_TIMEOUT_MS = 600_000;
const DEFAULT_PORTS = { grpc: 9191, admin: 9192, customer: 9193 };

interface ShownCommand {
  command: string;
  /** The output the README shows under the command (its `# ` lines), or none. */
  shown: string[];
}

function shownCommands(): ShownCommand[] {
  const section = sectionOf(readDoc('README.md'), '## Try it locally');
  const blocks = [...section.matchAll(/^```sh\n([\s\S]*?)^```/gm)].map((match) => match[1]!);
  const commands: ShownCommand[] = [];
  for (const line of blocks.flatMap((block) => block.split('\n'))) {
    if (/^#( |$)/.test(line)) commands.at(-1)!.shown.push(line.replace(/^# ?/, ''));
    else if (line.trim() !== '') commands.push({ command: line, shown: [] });
  }
  return commands;
}

/** What differs from run to run: ids, keys, request ids, seconds to wait. */
function masked(text: string): string {
  return text
    .replace(/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g, '<uuid>')
    .replace(/\bkey_[A-Za-z0-9]{16}\b/g, 'key_<id>')
    .replace(/\bgk_(live|test)_[A-Za-z0-9]{4}/g, 'gk_$1_<prefix>')
    .replace(/(retry-after: )\d+/g, '$1<seconds>')
    .replace(/("retryAfter": ")\d+/g, '$1<seconds>');
}

/** The shown output as a pattern: `…` stands for anything (a trimmed part), and a line break may be any whitespace or none. */
function shownPattern(shown: string[]): RegExp {
  const escaped = masked(shown.join('\n'))
    .split('…')
    .map((part) => part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&').replace(/\n\s*/g, '\\s*'))
    .join('[\\s\\S]*?');
  return new RegExp(`^${escaped}$`);
}

it(
  'the README\'s "Try it locally" commands print what the README shows (ids, keys and waits masked)',
  async () => {
    const commands = shownCommands();
    expect(commands.filter((command) => command.shown.length > 0).length).toBeGreaterThanOrEqual(4);
    const ports = { grpc: await freePort(), admin: await freePort(), customer: await freePort() };
    const scratch = mkdtempSync(join(tmpdir(), 'try-it-locally-'));
    const script = commands
      .map(({ command, shown }, index) => {
        const moved = command
          .replace(/^fg\b.*$/, ':')
          .replace(/\b9192\b/g, String(ports.admin))
          .replace(/\bgateway-authz\.log\b/g, join(scratch, 'gateway-authz.log'));
        return shown.length > 0 ? `printf '\\n@@BEGIN ${index}\\n'\n${moved}\nprintf '\\n@@END ${index}\\n'` : moved;
      })
      .join('\n');
    const env: Record<string, string> = {
      PATH: process.env.PATH ?? '',
      HOME: process.env.HOME ?? scratch,
      GRPC_PORT: String(ports.grpc),
      ADMIN_PORT: String(ports.admin),
      CUSTOMER_PORT: String(ports.customer),
    };
    // Its own process group, so the service `npm start` left in the background is stopped with the shell.
    const shell = spawn('bash', ['-c', script], { cwd: REPO_ROOT, env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    shell.stdout.on('data', (chunk) => (stdout += chunk));
    shell.stderr.on('data', (chunk) => (stderr += chunk));
    try {
      await new Promise<void>((resolve) => shell.once('exit', () => resolve()));
    } finally {
      try {
        process.kill(-shell.pid!, 'SIGTERM');
      } catch {
        // already gone
      }
    }
    const log = (() => {
      try {
        return readFileSync(join(scratch, 'gateway-authz.log'), 'utf8');
      } catch {
        return '(no log)';
      }
    })();
    rmSync(scratch, { recursive: true, force: true });
    const context = `stderr:\n${stderr}\nservice log:\n${log.slice(-2000)}`;

    commands.forEach(({ command, shown }, index) => {
      if (shown.length === 0) return;
      const start = stdout.indexOf(`@@BEGIN ${index}\n`);
      const end = stdout.indexOf(`\n@@END ${index}\n`);
      if (start < 0 || end < 0) throw new Error(`'${command}' did not run to its end.\n${context}`);
      const printed = stdout
        .slice(start + `@@BEGIN ${index}\n`.length, end)
        .trim()
        .split(`127.0.0.1:${ports.grpc}`)
        .join(`127.0.0.1:${DEFAULT_PORTS.grpc}`);
      const matches = shownPattern(shown).test(masked(printed));
      // A command that printed otherwise usually says why on stderr (a deadline, a refused option), so the failure shows it.
      const seen = matches ? { command, printed: 'as shown' } : { command, printed: masked(printed), stderr: stderr.slice(-2000) };
      expect(seen).toEqual({ command, printed: 'as shown' });
    });
  },
  RUN_TIMEOUT_MS,
);
