// @ts-check
/**
 * How both dashboard pages run a change: one at a time, errors handed to the page. Controls stay enabled meanwhile, so
 * keyboard focus is never dropped; a second action is ignored until this one ends, and `main` says it is busy.
 * @param {HTMLElement} main
 * @param {(error: unknown) => void} failed  shows the error (and whatever else the page does on one)
 */
export function oneAtATime(main, failed) {
  let busy = false;
  /** @param {() => Promise<void>} action */
  return async function run(action) {
    if (busy) return;
    busy = true;
    main.setAttribute('aria-busy', 'true');
    try {
      await action();
    } catch (error) {
      failed(error);
    } finally {
      busy = false;
      main.removeAttribute('aria-busy');
    }
  };
}
