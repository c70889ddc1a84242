/** Waiting in tests: a pause, and polling until a condition holds or a deadline passes. */

export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** Polls `condition` every `pollMs` until it holds; throws "timed out waiting for <what>" after `ms`. */
export async function until(condition: () => boolean | Promise<boolean>, what: string, ms = 5000, pollMs = 5): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(pollMs);
  }
}
