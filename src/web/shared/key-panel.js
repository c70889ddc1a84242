// @ts-check
/**
 * The "copy once" panel for a full API key, after creation or regeneration. The key lives in one variable and one text
 * node until "Done", which empties both and clears any selection, so it is gone from the page afterwards.
 */
import { byId, replaceContent } from './dom.js';

/**
 * @typedef {object} KeyPanelParts
 * @property {HTMLElement} panel  shown while a key is
 * @property {HTMLElement} context  what the key is (which account, what happened to the old one)
 * @property {HTMLElement} value  the full key, as text
 * @property {HTMLButtonElement} copyButton
 * @property {HTMLButtonElement} doneButton
 * @property {HTMLElement} copyStatus  role="status": whether the copy worked
 */

/**
 * The parts in the page's markup (both pages' #new-key-panel has the same ids).
 * @returns {KeyPanelParts}
 */
function partsInPage() {
  return {
    panel: byId('new-key-panel', HTMLElement),
    context: byId('new-key-context', HTMLElement),
    value: byId('new-key-value', HTMLElement),
    copyButton: byId('copy-key', HTMLButtonElement),
    doneButton: byId('new-key-done', HTMLButtonElement),
    copyStatus: byId('copy-status', HTMLElement),
  };
}

/**
 * Wires the panel's buttons; `show` and `hide` are for the page.
 * @param {KeyPanelParts} [parts]  the page's #new-key-panel unless given
 */
export function keyPanel(parts = partsInPage()) {
  /** @type {string | null} */
  let shownKey = null;
  /** Where keyboard focus goes after "Done": the panel's buttons disappear with it. */
  /** @type {HTMLElement | null} */
  let focusAfterDone = null;

  function hide() {
    shownKey = null;
    focusAfterDone = null;
    replaceContent(parts.value);
    replaceContent(parts.context);
    replaceContent(parts.copyStatus);
    parts.panel.hidden = true;
    window.getSelection()?.removeAllRanges();
  }

  /**
   * @param {string} fullKey
   * @param {string} context
   * @param {HTMLElement} returnFocusTo  focused after "Done"
   */
  function show(fullKey, context, returnFocusTo) {
    hide();
    shownKey = fullKey;
    focusAfterDone = returnFocusTo;
    replaceContent(parts.context, context);
    replaceContent(parts.value, fullKey);
    parts.panel.hidden = false;
    parts.panel.scrollIntoView({ block: 'nearest' });
    parts.copyButton.focus();
  }

  function selectKeyText() {
    const selection = window.getSelection();
    if (!selection) return;
    const range = document.createRange();
    range.selectNodeContents(parts.value);
    selection.removeAllRanges();
    selection.addRange(range);
  }

  async function copy() {
    if (shownKey === null) return;
    try {
      await navigator.clipboard.writeText(shownKey);
      replaceContent(parts.copyStatus, 'Copied to the clipboard.');
    } catch {
      // No Clipboard API on a plain-HTTP admin host (not a secure context), or no permission: the older copy command
      // still works on a click there; failing that, the key is left selected for the person to copy.
      selectKeyText();
      let copied = false;
      try {
        copied = document.execCommand('copy');
      } catch {
        copied = false;
      }
      replaceContent(parts.copyStatus, copied ? 'Copied to the clipboard.' : 'The key is selected: press Ctrl+C (⌘C on a Mac) to copy it.');
    }
  }

  parts.copyButton.addEventListener('click', () => void copy());
  parts.doneButton.addEventListener('click', () => {
    const target = focusAfterDone;
    hide();
    target?.focus();
  });

  return { show, hide };
}
