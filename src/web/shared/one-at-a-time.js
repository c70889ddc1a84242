// @ts-check
/**
 * How both dashboard pages run a change: one at a time, errors handed to the page. Controls stay enabled meanwhile, so
 * keyboard focus is never dropped; a second change is ignored while one is making its writes (a double click creates
 * one key, not two), and `main` says it is busy until every change, and the reading it ends with, is done.
 *
 * A change that ends by reading the page's data again calls `run.writesDone()` first (the pages' loaders do): from
 * there on the next change is taken, not ignored, so a click just after a change is never lost while the page
 * refreshes. The loaders drop an answer older than the newest one they have shown.
 * @param {HTMLElement} main
 * @param {(error: unknown) => void} failed  shows the error (and whatever else the page does on one)
 */
export function oneAtATime(main, failed) {
  /** The change making its writes now, if any. @type {object | null} */
  let writing = null;
  let running = 0;
  /** @param {() => Promise<void>} action */
  async function run(action) {
    if (writing) return;
    const change = {};
    writing = change;
    running += 1;
    main.setAttribute('aria-busy', 'true');
    try {
      await action();
    } catch (error) {
      failed(error);
    } finally {
      if (writing === change) writing = null;
      running -= 1;
      if (running === 0) main.removeAttribute('aria-busy');
    }
  }
  /** The change running now has made its writes; what it does from here is reading. */
  run.writesDone = () => {
    writing = null;
  };
  return run;
}
