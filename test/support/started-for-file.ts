/**
 * Things a test file starts once (servers, clients): started in the file's
 * beforeAll, stopped in its afterAll, so call it at the top level of the
 * file. Its fields are read inside tests; one read before the start throws,
 * naming it, rather than handing the test an undefined.
 */
export function startedForFile<T extends object>(name: string, start: () => Promise<T>, stop: (started: T) => Promise<void>): T {
  let started: T | undefined;
  beforeAll(async () => {
    started = await start();
  });
  afterAll(async () => {
    if (started) await stop(started);
  });
  return new Proxy({} as T, {
    get(_target, field) {
      if (started === undefined) throw new Error(`${name}: ${String(field)} is read before beforeAll started it`);
      return started[field as keyof T];
    },
  });
}
