// @ts-check
/**
 * The operator's "API Keys" page (/dashboard). Rules it keeps:
 * - every string from the API (account and key names, ids, error messages) goes into the page as text (../shared/dom.js);
 * - an operator token lives in sessionStorage only (this tab), never in localStorage or a cookie; "Sign out" removes it;
 * - or the operator signs in with single sign-on: the session is a cookie the page never reads, and every change carries
 *   the session's CSRF token;
 * - controls an operator's permissions do not include are hidden (a courtesy: the admin API checks every call);
 * - a full key (create, regenerate) is shown once, in the key panel, until "Done" (../shared/key-panel.js).
 */
import { ApiError, fetchJson, isObject } from '../shared/api.js';
import { button, byId, el, messageRegions, replaceContent } from '../shared/dom.js';
import { keyDialog, keyDialogs } from '../shared/key-dialogs.js';
import { describeKey, newestFirst } from '../shared/key-format.js';
import { keyPanel } from '../shared/key-panel.js';
import { keyTable } from '../shared/key-table.js';
import { oneAtATime } from '../shared/one-at-a-time.js';
import { restrictionFields } from '../shared/restriction-fields.js';
import { auditSection } from './operator-audit.js';

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
  createForm: byId('create-form', HTMLFormElement),
  keyName: byId('key-name', HTMLInputElement),
  keyEnvironment: byId('key-environment', HTMLSelectElement),
  notice: byId('notice', HTMLElement),
  sso: byId('sso', HTMLElement),
  who: byId('operator-who', HTMLElement),
  keysRegion: byId('keys-region', HTMLElement),
  keysNotAllowed: byId('keys-not-allowed', HTMLElement),
  createSection: byId('create-section', HTMLElement),
};

const messages = messageRegions(byId('error', HTMLElement), ui.notice);
const newKey = keyPanel();

/** @type {Account[]} */
let accounts = [];
/** @type {string | null} */
let currentAccountId = null;
/** @type {Key[]} */
let keys = [];
/** Only the newest keys request may render (the account can change while one is on its way). */
let keysRequest = 0;
/** Signed in with single sign-on: calls carry the session cookie (and the CSRF token on changes) instead of a token. */
let session = /** @type {{ csrfToken: string } | null} */ (null);
/** Set when a token is submitted: the single sign-on session the page looks for at load no longer signs it in. */
let tokenSignInStarted = false;
/** What the signed-in operator may do (GET /admin/operator/me). */
let permissions = /** @type {string[]} */ ([]);

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
  if (session) {
    /** @type {Record<string, string>} */
    const headers = method === 'GET' ? {} : { 'x-csrf-token': session.csrfToken };
    return fetchJson(method, path, { body, headers, credentials: 'same-origin', service: 'the admin API' });
  }
  return fetchJson(method, path, { body, headers: { authorization: `Bearer ${token ?? ''}` }, service: 'the admin API' });
}

/** @param {string} permission */
const may = (permission) => permissions.includes(permission);

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

/** @param {unknown} error */
function failed(error) {
  if (error instanceof ApiError && error.status === 401 && (storedToken() !== null || session !== null)) signOut();
  messages.error(error);
}

/** Runs one change (sign-in, create, regenerate, revoke); a refused token signs out. */
const run = oneAtATime(ui.main, failed);

const dialogs = keyDialogs({
  run,
  messages,
  newKey,
  notice: ui.notice,
  regenerate: async (key, graceSeconds) =>
    createdKeyIn(await api('POST', `/admin/keys/${encodeURIComponent(key.id)}/rotate`, { graceSeconds })),
  revoke: async (key) => {
    await api('POST', `/admin/keys/${encodeURIComponent(key.id)}/revoke`);
  },
  reload: loadKeys,
  inRow: (key, change) => table.inRow(key, change),
});

/** @type {ReturnType<typeof keyTable<Key>>} */
const table = keyTable({
  graceNote: 'in its rotation grace period',
  extraCells: () => [],
  actions: (key) =>
    !may('keys:write')
      ? []
      : [
          dialogs.regenerateButton(key),
          // As Regenerate: a key already replaced is on its way out, and its successor carries the restrictions on.
          key.status === 'active' &&
            !key.replacedBy &&
            button('Restrict', { className: 'secondary small', label: `Restrict key ${describeKey(key)}` }, () => openRestrict(key)),
          dialogs.revokeButton(key),
        ],
});

// ---------------------------------------------------------------- restrictions

const restrictSubject = byId('restrict-subject', HTMLElement);
const restrictFields = restrictionFields();
/** @type {ReturnType<typeof keyDialog<Key>>} */
const restrict = keyDialog(byId('restrict-dialog', HTMLDialogElement));

/** @param {Key} key */
function openRestrict(key) {
  replaceContent(restrictSubject, `What key ${describeKey(key)} may do; empty fields restrict nothing.`);
  restrictFields.fill(key.restrictions);
  restrict.open(key, restrictFields.first);
}

async function saveRestrictions() {
  const key = restrict.take();
  if (!key) return;
  messages.clear();
  const body = { restrictions: restrictFields.read() };
  if (!(await table.inRow(key, () => api('PATCH', `/admin/keys/${encodeURIComponent(key.id)}`, body)))) return;
  await loadKeys();
  messages.notice(`The restrictions of key ${describeKey(key)} were saved.`);
  ui.notice.focus();
}

byId('restrict-form', HTMLFormElement).addEventListener('submit', (event) => {
  event.preventDefault();
  void run(saveRestrictions);
});
byId('restrict-cancel', HTMLButtonElement).addEventListener('click', () => restrict.take());

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
    balance === null ? 'post-paid' : `prepaid balance ${account.billing.creditBalanceFormatted ?? balance}`,
  ];
  replaceContent(ui.accountSummary, parts.join(' · '));
}

function renderKeys() {
  table.render(currentAccount()?.name, keys);
}

// ---------------------------------------------------------------- loading

/** @param {string | null} [token] */
async function loadAccounts(token) {
  accounts = /** @type {Account[]} */ (listIn(await api('GET', '/admin/accounts', undefined, token), 'accounts'));
  renderAccounts();
}

async function loadKeys() {
  // After a change this is its reading: the next change is taken from here on, not ignored.
  run.writesDone();
  const request = ++keysRequest;
  const accountId = currentAccountId;
  if (!accountId || !may('keys:read')) {
    keys = [];
    renderKeys();
    return;
  }
  const data = await api('GET', `/admin/accounts/${encodeURIComponent(accountId)}/keys`);
  if (request !== keysRequest) return;
  keys = newestFirst(/** @type {Key[]} */ (listIn(data, 'keys')));
  renderKeys();
}

const audit = auditSection({ get: (method, path) => api(method, path), failed });

/**
 * Who is signed in and what they may do; the controls follow.
 * @param {string | null} [token]
 */
async function loadPermissions(token) {
  const me = await api('GET', '/admin/operator/me', undefined, token);
  if (!isObject(me) || !Array.isArray(me.permissions) || !isObject(me.operator)) {
    throw new ApiError(0, '', "The admin API's answer says nothing of who is signed in.");
  }
  permissions = me.permissions.filter((permission) => typeof permission === 'string');
  const operator = me.operator;
  const roles = Array.isArray(me.roles) ? ` (${me.roles.join(', ')})` : '';
  const who =
    operator.kind === 'person'
      ? `${String(me.displayName ?? operator.subject)}${roles}`
      : operator.kind === 'token'
        ? `token “${String(operator.name)}”`
        : 'break-glass ADMIN_TOKEN';
  replaceContent(ui.who, `Signed in as ${who}`);
  ui.keysRegion.hidden = !may('keys:read');
  ui.keysNotAllowed.hidden = may('keys:read');
  ui.createSection.hidden = !may('keys:write');
}

/** @param {string | null} token  null: the single sign-on session */
async function signIn(token) {
  await loadPermissions(token);
  await loadAccounts(token);
  if (token !== null) storeToken(token);
  showSignedIn(true);
  await loadKeys();
  await audit.show(may('audit:read'));
}

function signOut() {
  forgetToken();
  session = null;
  permissions = [];
  replaceContent(ui.who);
  void audit.show(false);
  newKey.hide();
  dialogs.closeAll();
  accounts = [];
  keys = [];
  currentAccountId = null;
  replaceContent(ui.accountSelect);
  replaceContent(ui.accountSummary);
  renderKeys();
  showSignedIn(false);
  ui.token.value = '';
  ui.token.focus();
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
  tokenSignInStarted = true;
  void run(async () => {
    messages.clear();
    await signIn(token);
    ui.token.value = '';
  });
});

ui.signOut.addEventListener('click', () => {
  const ending = session;
  if (!ending) {
    signOut();
    messages.notice('Signed out. The token was removed from this tab.');
    return;
  }
  // Not one of the page's changes taken one at a time: a sign-out is never ignored, whatever the page is loading.
  void (async () => {
    // The server ends the session first; then the page forgets it.
    await fetchJson('POST', '/dashboard/auth/logout', {
      headers: { 'x-csrf-token': ending.csrfToken },
      credentials: 'same-origin',
      service: 'the admin API',
    });
    signOut();
    messages.notice('Signed out.');
  })().catch(failed);
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

/** Why a single sign-on came back without a session (the server's `?sign_in=` reasons). */
const SIGN_IN_OUTCOMES = /** @type {Record<string, string>} */ ({
  no_operator_role: 'You signed in, but none of your groups is mapped to an operator role. Ask an admin to map one.',
  needs_https: 'Single sign-on needs this page over HTTPS.',
  provider_unreachable: 'The identity provider could not be reached. Try again shortly.',
});

/**
 * The single sign-on session, if there is one (its CSRF token); otherwise shows its button when it is offered.
 * @returns {Promise<{ csrfToken: string } | null>}
 */
async function resumeSession() {
  const outcome = new URLSearchParams(window.location.search).get('sign_in');
  if (outcome) {
    messages.error(new ApiError(0, outcome, SIGN_IN_OUTCOMES[outcome] ?? `Single sign-on did not complete (${outcome}).`));
    window.history.replaceState(null, '', '/dashboard');
  }
  const data = await fetchJson('GET', '/dashboard/auth/session', { credentials: 'same-origin', service: 'the admin API' });
  if (isObject(data) && data.signedIn === true && typeof data.csrfToken === 'string') return { csrfToken: data.csrfToken };
  ui.sso.hidden = !(isObject(data) && data.signInOffered === true);
  return null;
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
  void run(async () => {
    // Only a read until it finds a session: a token submitted meanwhile is not ignored (one at a time drops a change
    // made while another writes), and a sign-in with a token, once started, is not taken over by the session found.
    run.writesDone();
    const resumed = await resumeSession();
    if (tokenSignInStarted) return;
    if (resumed) {
      session = resumed;
      await signIn(null);
    } else ui.token.focus();
  });
}
