import type { CliSettings } from '../settings/settings';

/**
 * Calls the admin API and prints its JSON answer on stdout. A non-2xx answer
 * is printed on stderr and ends the process with exit code 1.
 */
export async function adminRequest(settings: CliSettings, method: string, path: string, body?: object): Promise<void> {
  if (!settings.adminToken) throw new Error('ADMIN_TOKEN is not set; the admin API needs it');
  let response: Response;
  try {
    response = await fetch(new URL(path, settings.adminUrl), {
      method,
      headers: { authorization: `Bearer ${settings.adminToken}`, 'content-type': 'application/json' },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
  } catch (error) {
    throw new Error(`cannot reach the admin API at ${settings.adminUrl}: ${(error as Error).message}`);
  }
  const text = await response.text();
  if (!response.ok) {
    process.stderr.write(`${text}\n`);
    process.exitCode = 1;
    return;
  }
  process.stdout.write(`${text}\n`);
}
