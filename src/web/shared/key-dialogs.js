// @ts-check
/**
 * The confirmations both dashboard pages ask before regenerating or revoking a key, wired to the page's own markup
 * (#rotate-dialog, #revoke-dialog, #keys-region: the same ids on both), and the row buttons that open them. What a change calls is the page's: each talks
 * to its own API.
 */
import { button, byId, replaceContent } from './dom.js';
import { describeKey, oldKeyFate } from './key-format.js';

/** @typedef {import('./key-table.js').ShownKey} ShownKey */

/**
 * A modal dialog about one key: the key is kept while it is open and forgotten however it closes (Escape included).
 * @template {ShownKey} K
 * @param {HTMLDialogElement} dialog
 */
export function keyDialog(dialog) {
  /** @type {K | null} */
  let subject = null;
  dialog.addEventListener('close', () => {
    // The close event is a queued task: it can arrive after the dialog was opened again (Escape, then Enter on the row's
    // button at once), and must not forget the key it is open about now.
    if (!dialog.open) subject = null;
  });
  return {
    /**
     * @param {K} key
     * @param {HTMLElement} focus  the control that gets the focus
     */
    open(key, focus) {
      subject = key;
      dialog.showModal();
      focus.focus();
    },
    /** Closes the dialog; the key it was about, null when it was not open. */
    take() {
      const key = subject;
      subject = null;
      if (dialog.open) dialog.close();
      return key;
    },
  };
}

/**
 * @template {ShownKey} K
 * @typedef {object} KeyChanges
 * @property {(action: () => Promise<void>) => Promise<void>} run  the page's one-at-a-time runner
 * @property {{ notice(text: string): void }} messages
 * @property {{ show(fullKey: string, context: string, returnFocusTo: HTMLElement): void }} newKey  the key panel
 * @property {HTMLElement} notice  the notice region, focused when a row's buttons disappear
 * @property {(key: K, graceSeconds: number) => Promise<{ key: string, environment: string }>} regenerate
 * @property {(key: K) => Promise<void>} revoke
 * @property {(key: K, change: () => Promise<unknown>) => Promise<boolean>} inRow  the key table's: a change whose error
 *   shows in the key's row
 * @property {() => Promise<void>} reload  shows the keys again after a change
 */

/**
 * @template {ShownKey} K
 * @param {KeyChanges<K>} page
 */
export function keyDialogs(page) {
  const rotateDialog = byId('rotate-dialog', HTMLDialogElement);
  const revokeDialog = byId('revoke-dialog', HTMLDialogElement);
  const rotateSubject = byId('rotate-subject', HTMLElement);
  const revokeSubject = byId('revoke-subject', HTMLElement);
  const immediately = byId('grace-0', HTMLInputElement);
  const revokeCancel = byId('revoke-cancel', HTMLButtonElement);
  /** Focused after the key panel's "Done": the row's buttons were replaced. */
  const keysRegion = byId('keys-region', HTMLElement);
  /** @type {ReturnType<typeof keyDialog<K>>} */
  const rotate = keyDialog(rotateDialog);
  /** @type {ReturnType<typeof keyDialog<K>>} */
  const revoke = keyDialog(revokeDialog);

  /** @param {K} key */
  function openRotate(key) {
    replaceContent(rotateSubject, `Key ${describeKey(key)} gets a new secret value; its name and environment stay the same.`);
    immediately.checked = true;
    rotate.open(key, immediately);
  }

  /** @param {K} key */
  function openRevoke(key) {
    replaceContent(revokeSubject, `Revoke key ${describeKey(key)}?`);
    // The safe choice has the focus: Enter right away cancels.
    revoke.open(key, revokeCancel);
  }

  function selectedGraceSeconds() {
    const checked = rotateDialog.querySelector('input[name="grace"]:checked');
    return checked instanceof HTMLInputElement ? Number(checked.value) : 0;
  }

  async function confirmRotate() {
    const graceSeconds = selectedGraceSeconds();
    const key = rotate.take();
    if (!key) return;
    const regenerated = await page.inRow(key, async () => {
      const created = await page.regenerate(key, graceSeconds);
      page.newKey.show(
        created.key,
        `New key for ${describeKey(key)} in ${created.environment}. ${oldKeyFate(key, graceSeconds)}`,
        keysRegion,
      );
    });
    if (regenerated) await page.reload();
  }

  async function confirmRevoke() {
    const key = revoke.take();
    if (!key) return;
    if (!(await page.inRow(key, () => page.revoke(key)))) return;
    await page.reload();
    page.messages.notice(`Key ${describeKey(key)} was revoked.`);
    // The row's buttons are gone: the notice saying what happened takes the focus.
    page.notice.focus();
  }

  byId('rotate-confirm', HTMLButtonElement).addEventListener('click', () => void page.run(confirmRotate));
  byId('rotate-cancel', HTMLButtonElement).addEventListener('click', () => rotate.take());
  byId('revoke-confirm', HTMLButtonElement).addEventListener('click', () => void page.run(confirmRevoke));
  revokeCancel.addEventListener('click', () => revoke.take());

  return {
    /**
     * The row's "Regenerate" button; false for a key that cannot be regenerated (not active, or already replaced).
     * @param {K} key
     */
    regenerateButton(key) {
      return (
        key.status === 'active' &&
        !key.replacedBy &&
        button('Regenerate', { className: 'secondary small', label: `Regenerate key ${describeKey(key)}` }, () => openRotate(key))
      );
    },
    /**
     * The row's "Revoke" button; false for a key that is not active.
     * @param {K} key
     */
    revokeButton(key) {
      return (
        key.status === 'active' &&
        button('Revoke', { className: 'danger-outline small', label: `Revoke key ${describeKey(key)}` }, () => openRevoke(key))
      );
    },
    closeAll() {
      rotate.take();
      revoke.take();
    },
  };
}
