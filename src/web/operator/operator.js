// @ts-check
/**
 * The operator's "API Keys" page (/dashboard). Rules it keeps:
 * - every string from the API (account and key names, ids, error messages) goes into the page as text (../shared/dom.js);
 * - the admin token lives in sessionStorage only (this tab), never in localStorage or a cookie; "Sign out" removes it;
 * - a full key (create, regenerate) is shown once, in the key panel, until "Done" (../shared/key-panel.js).
 */
import { ApiError, fetchJson, isObject } from '../shared/api.js';
import { button, byId, el, messageRegions, replaceContent, timeElement } from '../shared/dom.js';
import { describeKey, displayPrefix, newestFirst, oldKeyFate } from '../shared/key-format.js';
import { keyPanel } from '../shared/key-panel.js';

// The admin API's answers, as declared for the CLI: one description of the wire contract for both clients.
/** @typedef {import('../../cli/api-types').ApiAccount} Account */
/** @typedef {import('../../cli/api-types').ApiKey} Key */
/** @typedef {import('../../cli/api-types').ApiCreatedKey} CreatedKey */

const TOKEN_STORAGE_KEY = 'gateway-authz.admin-token';

const ui = {
  main: byId('main', HTMLElement),
  signIn: byId('sign-in', HTMLElement),
  signInForm: byId('sign-in-form', HTMLFormElement),
  token: byId('admin-token', HTMLInputElement),
  signOut: byId('sign-out', HTMLButtonElement),
  keysSection: byId('keys-section', HTMLElement),
  accountSelect: byId('account-select', HTMLSelectElement),
  accountSummary: byId('account-summary', HTMLElement),
  refresh: byId('refresh', HTMLButtonElement),
  keysRegion: byId('keys-region', HTMLElement),
  keysCaption: byId('keys-caption', HTMLElement),
  keysBody: byId('keys-body', HTMLElement),
  noKeys: byId('no-keys', HTMLElement),
  createForm: byId('create-form', HTMLFormElement),
  keyName: byId('key-name', HTMLInputElement),
  keyEnvironment: byId('key-environment', HTMLSelectElement),
  notice: byId('notice', HTMLElement),
  rotateDialog: byId('rotate-dialog', HTMLDialogElement),
  rotateSubject: byId('rotate-subject', HTMLElement),
  rotateConfirm: byId('rotate-confirm', HTMLButtonElement),
  rotateCancel: byId('rotate-cancel', HTMLButtonElement),
  immediately: byId('grace-0', HTMLInputElement),
  revokeDialog: byId('revoke-dialog', HTMLDialogElement),
  revokeSubject: byId('revoke-subject', HTMLElement),
  revokeConfirm: byId('revoke-confirm', HTMLButtonElement),
  revokeCancel: byId('revoke-cancel', HTMLButtonElement),
};

const messages = messageRegions(byId('error', HTMLElement), ui.notice);
const newKey = keyPanel({
  panel: byId('new-key-panel', HTMLElement),
  context: byId('new-key-context', HTMLElement),
  value: byId('new-key-value', HTMLElement),
  copyButton: byId('copy-key', HTMLButtonElement),
  doneButton: byId('new-key-done', HTMLButtonElement),
  copyStatus: byId('copy-status', HTMLElement),
});

/** @type {Account[]} */
let accounts = [];
/** @type {string | null} */
let currentAccountId = null;
/** @type {Key[]} */
let keys = [];
/** Only the newest keys request may render (the account can change while one is on its way). */
let keysRequest = 0;
/** The key an open confirmation dialog is about. */
/** @type {Key | null} */
let dialogKey = null;
let busy = false;

// ---------------------------------------------------------------- token

function storedToken() {
  try {
    return window.sessionStorage.getItem(TOKEN_STORAGE_KEY);
  } catch {
    return null;
  }
}

/** @param {string} token */
function storeToken(token) {
  try {
    window.sessionStorage.setItem(TOKEN_STORAGE_KEY, token);
  } catch {
    // Storage refused (private mode): the token lasts for this page load only.
  }
}

function forgetToken() {
  try {
    window.sessionStorage.removeItem(TOKEN_STORAGE_KEY);
  } catch {
    // Nothing was stored.
  }
}

// ---------------------------------------------------------------- API

/**
 * @param {string} method
 * @param {string} path
 * @param {unknown} [body]
 * @param {string | null} [token]  defaults to the stored one
 */
function api(method, path, body, token = storedToken()) {
  return fetchJson(method, path, { body, headers: { authorization: `Bearer ${token ?? ''}` }, service: 'the admin API' });
}

/**
 * The list under `field` in an answer.
 * @param {unknown} data
 * @param {string} field
 * @returns {unknown[]}
 */
function listIn(data, field) {
  const list = isObject(data) ? data[field] : undefined;
  if (!Array.isArray(list)) throw new ApiError(0, '', `The admin API's answer has no '${field}' list.`);
  return list;
}

/**
 * @param {unknown} data
 * @returns {CreatedKey}
 */
function createdKeyIn(data) {
  if (!isObject(data) || typeof data.key !== 'string') throw new ApiError(0, '', "The admin API's answer has no new key.");
  return /** @type {CreatedKey} */ (/** @type {unknown} */ (data));
}

/**
 * Runs one change (sign-in, create, regenerate, revoke): one at a time, errors shown plainly, a refused token signs out.
 * Controls stay enabled meanwhile, so keyboard focus is never dropped; a second action is ignored until this one ends.
 * @param {() => Promise<void>} action
 */
async function run(action) {
  if (busy) return;
  busy = true;
  ui.main.setAttribute('aria-busy', 'true');
  try {
    await action();
  } catch (error) {
    failed(error);
  } finally {
    busy = false;
    ui.main.removeAttribute('aria-busy');
  }
}

/** @param {unknown} error */
function failed(error) {
  if (error instanceof ApiError && error.status === 401 && storedToken() !== null) signOut();
  messages.error(error);
}

// ---------------------------------------------------------------- formatting

function currentAccount() {
  return accounts.find((account) => account.id === currentAccountId);
}

// ---------------------------------------------------------------- views

/** @param {boolean} signedIn */
function showSignedIn(signedIn) {
  ui.signIn.hidden = signedIn;
  ui.keysSection.hidden = !signedIn;
  ui.signOut.hidden = !signedIn;
}

function renderAccounts() {
  if (accounts.length === 0) {
    replaceContent(ui.accountSelect, el('option', {}, 'No accounts yet'));
    currentAccountId = null;
    replaceContent(ui.accountSummary, 'Create an account first, e.g. with: gateway-authz accounts create --id acme --name "Acme Corp"');
    renderKeys();
    return;
  }
  if (!currentAccount()) currentAccountId = accounts[0]?.id ?? null;
  replaceContent(
    ui.accountSelect,
    ...accounts.map((account) => {
      const option = el('option', {}, `${account.name} (${account.id})`);
      option.value = account.id;
      option.selected = account.id === currentAccountId;
      return option;
    }),
  );
  renderAccountSummary();
}

function renderAccountSummary() {
  const account = currentAccount();
  if (!account) {
    replaceContent(ui.accountSummary);
    return;
  }
  const balance = account.billing.creditBalance;
  const parts = [
    `Account id ${account.id}`,
    `billing ${account.billing.status}`,
    balance === null ? 'post-paid' : `prepaid balance ${balance}`,
  ];
  replaceContent(ui.accountSummary, parts.join(' · '));
}

function renderKeys() {
  const account = currentAccount();
  replaceContent(ui.keysCaption, account ? `Keys of ${account.name}` : 'Keys');
  ui.noKeys.hidden = !(account && keys.length === 0);
  const byId = new Map(keys.map((key) => [key.id, key]));
  replaceContent(ui.keysBody, ...keys.map((key) => keyRow(key, byId)));
}

/**
 * One key's row. Each cell names its column in data-label, which the narrow layout shows in place of the header.
 * @param {Key} key
 * @param {Map<string, Key>} byId
 */
function keyRow(key, byId) {
  /** @param {Key | undefined} other @param {string} id */
  const prefixOf = (other, id) => (other ? displayPrefix(other) : id);
  /** @param {string} text */
  const note = (text) => el('span', { className: 'note' }, text);
  /**
   * @param {string} className
   * @param {string} label
   * @param {...import('../shared/dom.js').Child} children
   */
  const cell = (className, label, ...children) => el('td', { className, data: { label } }, ...children);

  const status = cell(
    'status',
    'Status',
    el('span', { className: `badge status-${key.status}` }, key.status),
    key.status === 'active' && key.revokeAt && note('in its rotation grace period'),
    key.status === 'revoked' && key.revokedAt && el('span', { className: 'note' }, 'revoked ', timeElement(key.revokedAt)),
    key.replacedBy && note(`replaced by ${prefixOf(byId.get(key.replacedBy), key.replacedBy)}`),
    key.replaces && note(`replaces ${prefixOf(byId.get(key.replaces), key.replaces)}`),
  );

  const expires = cell(
    'expires',
    'Expires',
    key.expiresAt && timeElement(key.expiresAt),
    key.expiresAt && key.revokeAt && el('br'),
    key.revokeAt && timeElement(key.revokeAt),
    key.revokeAt && note('end of grace period'),
    !key.expiresAt && !key.revokeAt && (key.status === 'active' ? 'never' : '—'),
  );

  const actions = cell(
    'actions-cell',
    '',
    key.status === 'active' &&
      !key.replacedBy &&
      button('Regenerate', { className: 'secondary small', label: `Regenerate key ${describeKey(key)}` }, () => openRotateDialog(key)),
    key.status === 'active' &&
      button('Revoke', { className: 'danger-outline small', label: `Revoke key ${describeKey(key)}` }, () => openRevokeDialog(key)),
  );

  return el(
    'tr',
    { data: { testid: 'key-row', keyId: key.id, status: key.status } },
    cell('prefix', 'Prefix', el('code', {}, displayPrefix(key))),
    cell('name', 'Name', key.name),
    cell('environment', 'Environment', el('span', { className: `badge env-${key.environment}` }, key.environment)),
    status,
    cell('created', 'Created', timeElement(key.createdAt)),
    cell('last-used', 'Last used', key.lastUsedAt ? timeElement(key.lastUsedAt) : 'never'),
    expires,
    actions,
  );
}

// ---------------------------------------------------------------- loading

/** @param {string | null} [token] */
async function loadAccounts(token) {
  accounts = /** @type {Account[]} */ (listIn(await api('GET', '/admin/accounts', undefined, token), 'accounts'));
  renderAccounts();
}

async function loadKeys() {
  const request = ++keysRequest;
  const accountId = currentAccountId;
  if (!accountId) {
    keys = [];
    renderKeys();
    return;
  }
  const data = await api('GET', `/admin/accounts/${encodeURIComponent(accountId)}/keys`);
  if (request !== keysRequest) return;
  keys = newestFirst(/** @type {Key[]} */ (listIn(data, 'keys')));
  renderKeys();
}

/** @param {string} token */
async function signIn(token) {
  await loadAccounts(token);
  storeToken(token);
  showSignedIn(true);
  await loadKeys();
}

function signOut() {
  forgetToken();
  newKey.hide();
  closeDialogs();
  accounts = [];
  keys = [];
  currentAccountId = null;
  replaceContent(ui.accountSelect);
  replaceContent(ui.accountSummary);
  replaceContent(ui.keysBody);
  showSignedIn(false);
  ui.token.value = '';
  ui.token.focus();
}

// ---------------------------------------------------------------- dialogs

function closeDialogs() {
  for (const dialog of [ui.rotateDialog, ui.revokeDialog]) if (dialog.open) dialog.close();
  dialogKey = null;
}

/** @param {Key} key */
function openRotateDialog(key) {
  dialogKey = key;
  replaceContent(ui.rotateSubject, `Key ${describeKey(key)} gets a new secret value; its name and environment stay the same.`);
  ui.immediately.checked = true;
  ui.rotateDialog.showModal();
  ui.immediately.focus();
}

/** @param {Key} key */
function openRevokeDialog(key) {
  dialogKey = key;
  replaceContent(ui.revokeSubject, `Revoke key ${describeKey(key)}?`);
  ui.revokeDialog.showModal();
  // The safe choice has the focus: Enter right away cancels.
  ui.revokeCancel.focus();
}

function selectedGraceSeconds() {
  const checked = ui.rotateDialog.querySelector('input[name="grace"]:checked');
  return checked instanceof HTMLInputElement ? Number(checked.value) : 0;
}

async function confirmRotate() {
  const key = dialogKey;
  const graceSeconds = selectedGraceSeconds();
  closeDialogs();
  if (!key) return;
  const created = createdKeyIn(await api('POST', `/admin/keys/${encodeURIComponent(key.id)}/rotate`, { graceSeconds }));
  newKey.show(created.key, `New key for ${describeKey(key)} in ${created.environment}. ${oldKeyFate(key, graceSeconds)}`, ui.keysRegion);
  await loadKeys();
}

async function confirmRevoke() {
  const key = dialogKey;
  closeDialogs();
  if (!key) return;
  await api('POST', `/admin/keys/${encodeURIComponent(key.id)}/revoke`);
  await loadKeys();
  messages.notice(`Key ${describeKey(key)} was revoked.`);
  // The row's buttons are gone: the notice saying what happened takes the focus.
  ui.notice.focus();
}

// ---------------------------------------------------------------- wiring

ui.signInForm.addEventListener('submit', (event) => {
  event.preventDefault();
  const token = ui.token.value.trim();
  if (!token) {
    messages.error(new ApiError(0, '', 'Enter the admin token.'));
    return;
  }
  if (/[^\x21-\x7e]/.test(token)) {
    messages.error(
      new ApiError(0, '', 'The admin token has characters an HTTP header cannot carry (spaces or non-ASCII). Check what you pasted.'),
    );
    return;
  }
  void run(async () => {
    messages.clear();
    await signIn(token);
    ui.token.value = '';
  });
});

ui.signOut.addEventListener('click', () => {
  signOut();
  messages.notice('Signed out. The admin token was removed from this tab.');
});

ui.accountSelect.addEventListener('change', () => {
  currentAccountId = ui.accountSelect.value || null;
  newKey.hide();
  renderAccountSummary();
  keys = [];
  renderKeys();
  messages.clear();
  // A read: not queued behind a change, and an older answer never overwrites a newer one (keysRequest).
  loadKeys().catch(failed);
});

ui.refresh.addEventListener('click', () => {
  void run(async () => {
    messages.clear();
    await loadAccounts();
    await loadKeys();
  });
});

ui.createForm.addEventListener('submit', (event) => {
  event.preventDefault();
  const name = ui.keyName.value.trim();
  const environment = ui.keyEnvironment.value;
  const accountId = currentAccountId;
  if (!accountId) {
    messages.error(new ApiError(0, '', 'Choose an account first.'));
    return;
  }
  void run(async () => {
    messages.clear();
    const body = name ? { environment, name } : { environment };
    const created = createdKeyIn(await api('POST', `/admin/accounts/${encodeURIComponent(accountId)}/keys`, body));
    ui.keyName.value = '';
    newKey.show(created.key, `Created key “${created.name}” (${created.environment}) for account ${accountId}.`, ui.keyName);
    await loadKeys();
  });
});

ui.rotateConfirm.addEventListener('click', () => void run(confirmRotate));
ui.rotateCancel.addEventListener('click', closeDialogs);
ui.revokeConfirm.addEventListener('click', () => void run(confirmRevoke));
ui.revokeCancel.addEventListener('click', closeDialogs);
for (const dialog of [ui.rotateDialog, ui.revokeDialog]) {
  // Escape closes a modal dialog without a click: forget its key then too.
  dialog.addEventListener('close', () => {
    if (!ui.rotateDialog.open && !ui.revokeDialog.open) dialogKey = null;
  });
}

const token = storedToken();
if (token) {
  void run(async () => {
    try {
      await signIn(token);
    } catch (error) {
      forgetToken();
      showSignedIn(false);
      throw error;
    }
  });
} else {
  showSignedIn(false);
  ui.token.focus();
}
