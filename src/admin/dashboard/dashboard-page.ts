/**
 * The dashboard page: static markup only, no data. Everything shown about
 * accounts and keys is fetched by the script (dashboard-script.ts) from the
 * admin API with the operator's token, and inserted with textContent.
 *
 * Kept as a TS string constant (not a .html file) so it ships in dist/ with
 * `tsc` and is found the same way from src/ under ts-jest.
 */
export const DASHBOARD_HTML = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>API Keys · gateway-authz admin</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="/dashboard/app.css">
<script src="/dashboard/app.js" defer></script>
</head>
<body>
<header class="topbar">
  <span class="brand">gateway-authz <span class="brand-sub">admin</span></span>
  <button type="button" id="sign-out" class="secondary" data-testid="sign-out" hidden>Sign out</button>
</header>
<main>
  <div id="error" class="alert" role="alert" data-testid="error"></div>
  <div id="notice" class="notice" role="status" data-testid="notice"></div>

  <section id="sign-in" class="card narrow" aria-labelledby="sign-in-title" data-testid="sign-in">
    <h1 id="sign-in-title">Sign in</h1>
    <p>Enter the admin token (the server's <code>ADMIN_TOKEN</code>). It is kept for this browser tab only and sent with each call to the admin API.</p>
    <form id="sign-in-form" novalidate>
      <label for="admin-token">Admin token</label>
      <input id="admin-token" name="admin-token" type="password" autocomplete="current-password" spellcheck="false">
      <button type="submit" id="sign-in-button">Sign in</button>
    </form>
  </section>

  <section id="keys-section" aria-labelledby="keys-title" data-testid="keys-section" hidden>
    <h1 id="keys-title">API Keys</h1>
    <p class="hint" data-testid="hint">Use one key per environment or integration (e.g. 'prod backend', 'staging', 'CI'), so you can rotate one without touching the others. Rotate a key immediately if it was exposed in a client, a screenshot or a repository.</p>

    <div class="toolbar">
      <label for="account-select">Account</label>
      <select id="account-select" data-testid="account-select"></select>
      <button type="button" id="refresh" class="secondary">Refresh</button>
    </div>
    <p id="account-summary" class="muted" data-testid="account-summary"></p>

    <section id="new-key-panel" class="new-key" aria-labelledby="new-key-title" data-testid="new-key-panel" hidden>
      <h2 id="new-key-title">Your new API key</h2>
      <p id="new-key-context" data-testid="new-key-context"></p>
      <p class="warning" data-testid="new-key-warning">This key will not be shown again. Store it now.</p>
      <div class="key-box"><code id="new-key-value" data-testid="new-key-value"></code></div>
      <div class="actions">
        <button type="button" id="copy-key">Copy</button>
        <button type="button" id="new-key-done" class="secondary">Done</button>
        <span id="copy-status" class="muted" role="status" data-testid="copy-status"></span>
      </div>
    </section>

    <div class="table-wrap">
      <table id="keys-table" data-testid="keys-table">
        <caption id="keys-caption">Keys</caption>
        <thead>
          <tr>
            <th scope="col">Prefix</th>
            <th scope="col">Name</th>
            <th scope="col">Environment</th>
            <th scope="col">Status</th>
            <th scope="col">Created</th>
            <th scope="col">Last used</th>
            <th scope="col">Expires</th>
            <th scope="col"><span class="visually-hidden">Actions</span></th>
          </tr>
        </thead>
        <tbody id="keys-body"></tbody>
      </table>
    </div>
    <p id="no-keys" class="muted" data-testid="no-keys" hidden>This account has no keys yet.</p>

    <section class="card" aria-labelledby="create-title">
      <h2 id="create-title">Create a key</h2>
      <form id="create-form" class="create-form" novalidate>
        <div class="field">
          <label for="key-name">Name</label>
          <input id="key-name" name="key-name" maxlength="200" placeholder="e.g. prod backend" autocomplete="off">
        </div>
        <div class="field">
          <label for="key-environment">Environment</label>
          <select id="key-environment" name="key-environment">
            <option value="live">live</option>
            <option value="test">test</option>
          </select>
        </div>
        <button type="submit" id="create-key">Create key</button>
      </form>
    </section>
  </section>
</main>

<dialog id="rotate-dialog" aria-labelledby="rotate-title" data-testid="rotate-dialog">
  <h2 id="rotate-title">Regenerate key</h2>
  <p id="rotate-subject"></p>
  <fieldset>
    <legend>When should the old key stop working?</legend>
    <div class="choice"><input type="radio" name="grace" id="grace-0" value="0" checked><label for="grace-0">Immediately (recommended if the key was exposed)</label></div>
    <div class="choice"><input type="radio" name="grace" id="grace-3600" value="3600"><label for="grace-3600">Keep the old key working for 1 hour</label></div>
    <div class="choice"><input type="radio" name="grace" id="grace-86400" value="86400"><label for="grace-86400">Keep the old key working for 24 hours</label></div>
    <div class="choice"><input type="radio" name="grace" id="grace-604800" value="604800"><label for="grace-604800">Keep the old key working for 7 days</label></div>
  </fieldset>
  <p class="muted">The new key is shown once. Update every client that uses the old key.</p>
  <div class="actions">
    <button type="button" id="rotate-confirm">Regenerate key</button>
    <button type="button" id="rotate-cancel" class="secondary">Cancel</button>
  </div>
</dialog>

<dialog id="revoke-dialog" aria-labelledby="revoke-title" data-testid="revoke-dialog">
  <h2 id="revoke-title">Revoke key</h2>
  <p id="revoke-subject"></p>
  <p>Every request with it is refused from now on. This cannot be undone.</p>
  <div class="actions">
    <button type="button" id="revoke-confirm" class="danger">Revoke key</button>
    <button type="button" id="revoke-cancel" class="secondary">Cancel</button>
  </div>
</dialog>
</body>
</html>
`;
