/**
 * The dashboard's script, served at /dashboard/app.js (CSP: script-src 'self').
 *
 * Plain browser JavaScript, no framework and no build step. Rules it keeps:
 * - every string from the API (account and key names, ids, error messages)
 *   goes into the page with textContent / createElement, never as HTML;
 * - the admin token lives in sessionStorage only (this tab), never in
 *   localStorage or a cookie; "Sign out" removes it;
 * - a full key (create, rotate) is held in one variable and one DOM text node
 *   until "Done", which empties both.
 *
 * Written inside String.raw so backslashes stay as written; it must contain
 * no backtick and no dollar-brace sequence (a unit test checks it parses).
 */
export const DASHBOARD_SCRIPT = String.raw`(function () {
  'use strict';

  var TOKEN_STORAGE_KEY = 'gateway-authz.admin-token';
  var GRACE_LABELS = { 0: 'immediately', 3600: '1 hour', 86400: '24 hours', 604800: '7 days' };

  var accounts = [];
  var currentAccountId = null;
  var keys = [];
  var keysRequest = 0;
  /** The full key shown in the new-key panel, until "Done". */
  var shownKey = null;
  /** The key an open confirmation dialog is about. */
  var dialogKey = null;
  var busy = false;

  function $(id) { return document.getElementById(id); }

  // ---------------------------------------------------------------- token

  function storedToken() {
    try { return window.sessionStorage.getItem(TOKEN_STORAGE_KEY); } catch { return null; }
  }
  function storeToken(token) {
    try { window.sessionStorage.setItem(TOKEN_STORAGE_KEY, token); } catch { /* private mode: this page load only */ }
  }
  function forgetToken() {
    try { window.sessionStorage.removeItem(TOKEN_STORAGE_KEY); } catch { /* nothing stored */ }
  }

  // ---------------------------------------------------------------- API

  function ApiError(status, code, message, field) {
    this.status = status;
    this.code = code;
    this.message = message;
    this.field = field;
  }

  async function api(method, path, body, token) {
    var bearer = token === undefined ? storedToken() : token;
    var headers = { authorization: 'Bearer ' + (bearer || '') };
    var init = { method: method, headers: headers, cache: 'no-store', credentials: 'omit', redirect: 'error' };
    if (body !== undefined) {
      headers['content-type'] = 'application/json';
      init.body = JSON.stringify(body);
    }
    var response;
    try {
      response = await fetch(path, init);
    } catch (e) {
      throw new ApiError(0, 'network_error', 'Could not reach the admin API (' + String(e && e.message || e) + ').');
    }
    var text = await response.text();
    var data = null;
    if (text) {
      try { data = JSON.parse(text); } catch { data = null; }
    }
    if (!response.ok) {
      var error = data && data.error;
      if (error && typeof error.message === 'string') {
        throw new ApiError(response.status, String(error.code || ''), error.message, typeof error.field === 'string' ? error.field : undefined);
      }
      throw new ApiError(response.status, '', 'The admin API answered HTTP ' + response.status + ' without an error body.');
    }
    return data;
  }

  // ---------------------------------------------------------------- messages

  function clearMessages() {
    $('error').textContent = '';
    $('notice').textContent = '';
  }

  function showError(error) {
    var region = $('error');
    region.textContent = '';
    $('notice').textContent = '';
    var message = error instanceof ApiError ? error.message : 'Unexpected error: ' + String(error && error.message || error);
    region.appendChild(document.createTextNode(message));
    if (error instanceof ApiError && (error.code || error.status || error.field)) {
      var parts = [];
      if (error.status) parts.push('HTTP ' + error.status);
      if (error.code) parts.push(error.code);
      if (error.field) parts.push('field: ' + error.field);
      var detail = document.createElement('span');
      detail.className = 'detail';
      detail.textContent = ' (' + parts.join(', ') + ')';
      region.appendChild(detail);
    }
  }

  function showNotice(text) {
    $('error').textContent = '';
    $('notice').textContent = text;
  }

  /** Runs one user action: one at a time, errors shown plainly, a refused token signs out. */
  async function run(action) {
    if (busy) return;
    setBusy(true);
    try {
      await action();
    } catch (error) {
      if (error instanceof ApiError && error.status === 401 && storedToken() !== null) {
        signOut();
      }
      showError(error);
    } finally {
      setBusy(false);
    }
  }

  function setBusy(value) {
    busy = value;
    var buttons = document.querySelectorAll('main button, dialog button');
    for (var i = 0; i < buttons.length; i++) buttons[i].disabled = value;
    $('account-select').disabled = value;
  }

  // ---------------------------------------------------------------- formatting

  function displayPrefix(key) { return key.prefix + '\u2026'; }

  function timeElement(iso) {
    var element = document.createElement('time');
    var date = new Date(iso);
    if (isNaN(date.getTime())) {
      element.textContent = String(iso);
      return element;
    }
    element.dateTime = date.toISOString();
    element.title = date.toISOString();
    element.textContent = date.toISOString().slice(0, 16).replace('T', ' ') + ' UTC';
    return element;
  }

  function cell(row, className) {
    var td = document.createElement('td');
    if (className) td.className = className;
    row.appendChild(td);
    return td;
  }

  function note(parent, text) {
    var span = document.createElement('span');
    span.className = 'note';
    span.textContent = text;
    parent.appendChild(span);
    return span;
  }

  function badge(text, className) {
    var span = document.createElement('span');
    span.className = 'badge ' + className;
    span.textContent = text;
    return span;
  }

  function describeKey(key) {
    return '\u201c' + key.name + '\u201d (' + displayPrefix(key) + ')';
  }

  // ---------------------------------------------------------------- views

  function showSignedIn(signedIn) {
    $('sign-in').hidden = signedIn;
    $('keys-section').hidden = !signedIn;
    $('sign-out').hidden = !signedIn;
  }

  function renderAccounts() {
    var select = $('account-select');
    select.textContent = '';
    if (accounts.length === 0) {
      var empty = document.createElement('option');
      empty.value = '';
      empty.textContent = 'No accounts yet';
      select.appendChild(empty);
      currentAccountId = null;
      $('account-summary').textContent = 'Create an account first, e.g. with: gateway-authz accounts create --id acme --name "Acme Corp"';
      renderKeys();
      return;
    }
    var keep = accounts.some(function (account) { return account.id === currentAccountId; });
    if (!keep) currentAccountId = accounts[0].id;
    accounts.forEach(function (account) {
      var option = document.createElement('option');
      option.value = account.id;
      option.textContent = account.name + ' (' + account.id + ')';
      option.selected = account.id === currentAccountId;
      select.appendChild(option);
    });
    renderAccountSummary();
  }

  function renderAccountSummary() {
    var account = accounts.filter(function (a) { return a.id === currentAccountId; })[0];
    var summary = $('account-summary');
    summary.textContent = '';
    if (!account) return;
    var billing = account.billing || {};
    var parts = ['Account id ' + account.id, 'billing ' + (billing.status || 'unknown')];
    parts.push(billing.creditBalance === null || billing.creditBalance === undefined ? 'post-paid' : 'prepaid balance ' + billing.creditBalance);
    summary.textContent = parts.join(' \u00b7 ');
  }

  function renderKeys() {
    var body = $('keys-body');
    body.textContent = '';
    var account = accounts.filter(function (a) { return a.id === currentAccountId; })[0];
    $('keys-caption').textContent = account ? 'Keys of ' + account.name : 'Keys';
    $('no-keys').hidden = !(account && keys.length === 0);
    var byId = {};
    keys.forEach(function (key) { byId[key.id] = key; });
    keys.forEach(function (key) { body.appendChild(keyRow(key, byId)); });
  }

  function keyRow(key, byId) {
    var row = document.createElement('tr');
    row.dataset.testid = 'key-row';
    row.dataset.keyId = key.id;
    row.dataset.status = key.status;

    var prefix = document.createElement('code');
    prefix.textContent = displayPrefix(key);
    cell(row, 'prefix').appendChild(prefix);

    cell(row, 'name').textContent = key.name;

    cell(row, 'environment').appendChild(badge(key.environment, 'env-' + key.environment));

    var status = cell(row, 'status');
    status.appendChild(badge(key.status, 'status-' + key.status));
    if (key.status === 'active' && key.revokeAt) {
      note(status, 'in its rotation grace period');
    }
    if (key.status === 'revoked' && key.revokedAt) {
      var when = note(status, 'revoked ');
      when.appendChild(timeElement(key.revokedAt));
    }
    if (key.replacedBy) {
      var successor = byId[key.replacedBy];
      note(status, 'replaced by ' + (successor ? displayPrefix(successor) : key.replacedBy));
    }
    if (key.replaces) {
      var predecessor = byId[key.replaces];
      note(status, 'replaces ' + (predecessor ? displayPrefix(predecessor) : key.replaces));
    }

    cell(row, 'created').appendChild(timeElement(key.createdAt));

    var lastUsed = cell(row, 'last-used');
    if (key.lastUsedAt) lastUsed.appendChild(timeElement(key.lastUsedAt));
    else lastUsed.textContent = 'never';

    var expires = cell(row, 'expires');
    if (key.expiresAt) expires.appendChild(timeElement(key.expiresAt));
    if (key.revokeAt) {
      if (key.expiresAt) expires.appendChild(document.createElement('br'));
      expires.appendChild(timeElement(key.revokeAt));
      note(expires, 'end of grace period');
    }
    if (!key.expiresAt && !key.revokeAt) expires.textContent = key.status === 'active' ? 'never' : '\u2014';

    var actions = cell(row, 'actions-cell');
    if (key.status === 'active') {
      if (!key.replacedBy) {
        var rotate = document.createElement('button');
        rotate.type = 'button';
        rotate.className = 'secondary small';
        rotate.textContent = 'Regenerate';
        rotate.setAttribute('aria-label', 'Regenerate key ' + describeKey(key));
        rotate.addEventListener('click', function () { openRotateDialog(key); });
        actions.appendChild(rotate);
      }
      var revoke = document.createElement('button');
      revoke.type = 'button';
      revoke.className = 'danger-outline small';
      revoke.textContent = 'Revoke';
      revoke.setAttribute('aria-label', 'Revoke key ' + describeKey(key));
      revoke.addEventListener('click', function () { openRevokeDialog(key); });
      actions.appendChild(revoke);
    }
    return row;
  }

  // ---------------------------------------------------------------- the full key, once

  function showNewKey(fullKey, context) {
    hideNewKey();
    shownKey = fullKey;
    $('new-key-context').textContent = context;
    $('new-key-value').textContent = fullKey;
    $('new-key-panel').hidden = false;
    $('new-key-panel').scrollIntoView({ block: 'nearest' });
    $('copy-key').focus();
  }

  function hideNewKey() {
    shownKey = null;
    var value = $('new-key-value');
    value.textContent = '';
    $('new-key-context').textContent = '';
    $('copy-status').textContent = '';
    $('new-key-panel').hidden = true;
    var selection = window.getSelection && window.getSelection();
    if (selection) selection.removeAllRanges();
  }

  function selectKeyText() {
    var selection = window.getSelection && window.getSelection();
    if (!selection) return;
    var range = document.createRange();
    range.selectNodeContents($('new-key-value'));
    selection.removeAllRanges();
    selection.addRange(range);
  }

  async function copyKey() {
    if (shownKey === null) return;
    var status = $('copy-status');
    try {
      if (!navigator.clipboard || !navigator.clipboard.writeText) throw new Error('no clipboard API');
      await navigator.clipboard.writeText(shownKey);
      status.textContent = 'Copied to the clipboard.';
    } catch {
      selectKeyText();
      var copied = false;
      try { copied = document.execCommand('copy'); } catch { copied = false; }
      status.textContent = copied ? 'Copied to the clipboard.' : 'The key is selected: press Ctrl+C (\u2318C on a Mac) to copy it.';
    }
  }

  // ---------------------------------------------------------------- loading

  async function loadAccounts(token) {
    var data = await api('GET', '/admin/accounts', undefined, token);
    accounts = data && Array.isArray(data.accounts) ? data.accounts : [];
    renderAccounts();
  }

  async function loadKeys() {
    var request = ++keysRequest;
    if (!currentAccountId) {
      keys = [];
      renderKeys();
      return;
    }
    var data = await api('GET', '/admin/accounts/' + encodeURIComponent(currentAccountId) + '/keys');
    if (request !== keysRequest) return;
    keys = data && Array.isArray(data.keys) ? data.keys.slice() : [];
    keys.sort(function (a, b) { return a.createdAt < b.createdAt ? 1 : a.createdAt > b.createdAt ? -1 : 0; });
    renderKeys();
  }

  async function signIn(token) {
    await loadAccounts(token);
    storeToken(token);
    showSignedIn(true);
    await loadKeys();
  }

  function signOut() {
    forgetToken();
    hideNewKey();
    closeDialogs();
    accounts = [];
    keys = [];
    currentAccountId = null;
    $('account-select').textContent = '';
    $('account-summary').textContent = '';
    $('keys-body').textContent = '';
    showSignedIn(false);
    $('admin-token').value = '';
    $('admin-token').focus();
  }

  // ---------------------------------------------------------------- dialogs

  function closeDialogs() {
    ['rotate-dialog', 'revoke-dialog'].forEach(function (id) {
      var dialog = $(id);
      if (dialog.open) dialog.close();
    });
    dialogKey = null;
  }

  function openRotateDialog(key) {
    dialogKey = key;
    $('rotate-subject').textContent = 'Key ' + describeKey(key) + ' gets a new secret value; its name and environment stay the same.';
    $('grace-0').checked = true;
    $('rotate-dialog').showModal();
    $('grace-0').focus();
  }

  function openRevokeDialog(key) {
    dialogKey = key;
    $('revoke-subject').textContent = 'Revoke key ' + describeKey(key) + '?';
    $('revoke-dialog').showModal();
    $('revoke-cancel').focus();
  }

  function selectedGraceSeconds() {
    var checked = document.querySelector('input[name="grace"]:checked');
    return checked ? Number(checked.value) : 0;
  }

  async function confirmRotate() {
    var key = dialogKey;
    var graceSeconds = selectedGraceSeconds();
    closeDialogs();
    if (!key) return;
    var created = await api('POST', '/admin/keys/' + encodeURIComponent(key.id) + '/rotate', { graceSeconds: graceSeconds });
    var context = 'New key for ' + describeKey(key) + ' in ' + created.environment + '. ';
    context += graceSeconds === 0
      ? 'The old key ' + displayPrefix(key) + ' was revoked.'
      : 'The old key ' + displayPrefix(key) + ' keeps working for ' + GRACE_LABELS[graceSeconds] + '.';
    showNewKey(created.key, context);
    created = null;
    await loadKeys();
  }

  async function confirmRevoke() {
    var key = dialogKey;
    closeDialogs();
    if (!key) return;
    await api('POST', '/admin/keys/' + encodeURIComponent(key.id) + '/revoke');
    await loadKeys();
    showNotice('Key ' + describeKey(key) + ' was revoked.');
  }

  // ---------------------------------------------------------------- wiring

  function start() {
    $('sign-in-form').addEventListener('submit', function (event) {
      event.preventDefault();
      var token = $('admin-token').value.trim();
      if (!token) {
        showError(new ApiError(0, '', 'Enter the admin token.'));
        return;
      }
      if (/[^\x21-\x7e]/.test(token)) {
        showError(new ApiError(0, '', 'The admin token has characters an HTTP header cannot carry (spaces or non-ASCII). Check what you pasted.'));
        return;
      }
      run(async function () {
        clearMessages();
        await signIn(token);
        $('admin-token').value = '';
      });
    });

    $('sign-out').addEventListener('click', function () {
      signOut();
      showNotice('Signed out. The admin token was removed from this tab.');
    });

    $('account-select').addEventListener('change', function () {
      currentAccountId = $('account-select').value || null;
      hideNewKey();
      renderAccountSummary();
      keys = [];
      renderKeys();
      run(function () { clearMessages(); return loadKeys(); });
    });

    $('refresh').addEventListener('click', function () {
      run(async function () {
        clearMessages();
        await loadAccounts();
        await loadKeys();
      });
    });

    $('create-form').addEventListener('submit', function (event) {
      event.preventDefault();
      var name = $('key-name').value.trim();
      var environment = $('key-environment').value;
      var accountId = currentAccountId;
      if (!accountId) {
        showError(new ApiError(0, '', 'Choose an account first.'));
        return;
      }
      run(async function () {
        clearMessages();
        var body = { environment: environment };
        if (name) body.name = name;
        var created = await api('POST', '/admin/accounts/' + encodeURIComponent(accountId) + '/keys', body);
        $('key-name').value = '';
        showNewKey(created.key, 'Created key \u201c' + created.name + '\u201d (' + created.environment + ') for account ' + accountId + '.');
        created = null;
        await loadKeys();
      });
    });

    $('copy-key').addEventListener('click', function () { copyKey(); });
    $('new-key-done').addEventListener('click', function () { hideNewKey(); });

    $('rotate-confirm').addEventListener('click', function () { run(confirmRotate); });
    $('rotate-cancel').addEventListener('click', closeDialogs);
    $('revoke-confirm').addEventListener('click', function () { run(confirmRevoke); });
    $('revoke-cancel').addEventListener('click', closeDialogs);
    ['rotate-dialog', 'revoke-dialog'].forEach(function (id) {
      $(id).addEventListener('close', function () { if (!$('rotate-dialog').open && !$('revoke-dialog').open) dialogKey = null; });
    });

    var token = storedToken();
    if (token) {
      run(async function () {
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
      $('admin-token').focus();
    }
  }

  start();
})();
`;
