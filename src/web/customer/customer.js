// @ts-check
/**
 * The customer's "API Keys" page (/keys). Rules it keeps:
 * - it talks only to the customer API (/api) and /auth, with the session cookie and, on every change, the session's
 *   CSRF token (from /auth/session) in the x-csrf-token header;
 * - every string from the API (names, ids, emails, messages) goes into the page as text (../shared/dom.js);
 * - a full key (create, regenerate) is shown once, in the key panel, until "Done" (../shared/key-panel.js);
 * - controls the member's role may not use are hidden (the account summary lists what the role may do); the server
 *   refuses them anyway.
 */
import { ApiError, fetchJson, isObject } from '../shared/api.js';
import { button, byId, el, messageRegions, replaceContent, timeElement } from '../shared/dom.js';
import { auditSentence } from './audit-words.js';
import { keyDialog, keyDialogs } from '../shared/key-dialogs.js';
import { describeKey, newestFirst } from '../shared/key-format.js';
import { keyPanel } from '../shared/key-panel.js';
import { keyCell, keyTable } from '../shared/key-table.js';
import { formatMoney } from './money.js';
import { oneAtATime } from '../shared/one-at-a-time.js';
import { restrictionFields } from '../shared/restriction-fields.js';
import { usageChart } from './usage-chart.js';
import { webhooksPanel } from './webhooks-panel.js';

// The customer API's answers, as the server declares them: one description of the wire contract.
/** @typedef {import('../../customer/customer-views').MeView} Me */
/** @typedef {import('../../customer/customer-views').AccountSummaryView} Summary */
/** @typedef {import('../../customer/customer-views').CustomerKeyView} Key */
/** @typedef {import('../../customer/customer-views').UsageView} Usage */
/** @typedef {import('../../customer/customer-views').CustomerAuditEntryView} AuditEntry */
/** @typedef {import('../../http/api-views').MemberView} Member */
/** @typedef {import('../../http/api-views').ActorView} Actor */
/** @typedef {Key & { key: string }} CreatedKey */
/** @typedef {'24h' | '30d'} UsageWindow */
/** @typedef {'requests' | 'tokens' | 'costMinorUnits'} ChartedMetric */

const ui = {
  main: byId('main', HTMLElement),
  signedInAs: byId('signed-in-as', HTMLElement),
  signOut: byId('sign-out', HTMLButtonElement),
  accountSelect: byId('account-select', HTMLSelectElement),
  accountSummary: byId('account-summary', HTMLElement),
  refresh: byId('refresh', HTMLButtonElement),
  createCard: byId('create-card', HTMLElement),
  createForm: byId('create-form', HTMLFormElement),
  keyName: byId('key-name', HTMLInputElement),
  keyEnvironment: byId('key-environment', HTMLSelectElement),
  keyExpiry: byId('key-expiry', HTMLInputElement),
  notice: byId('notice', HTMLElement),
  window24h: byId('window-24h', HTMLButtonElement),
  window30d: byId('window-30d', HTMLButtonElement),
  usageSummary: byId('usage-summary', HTMLElement),
  usageBody: byId('usage-body', HTMLElement),
  usageMetered: byId('usage-metered', HTMLElement),
  usageChartCaption: byId('usage-chart-caption', HTMLElement),
  metricButtons: ['metric-requests', 'metric-tokens', 'metric-spend'].map((id) => byId(id, HTMLButtonElement)),
  limits: byId('limits', HTMLElement),
  membersSection: byId('members-section', HTMLElement),
  membersBody: byId('members-body', HTMLElement),
  inviteForm: byId('invite-form', HTMLFormElement),
  inviteEmail: byId('invite-email', HTMLInputElement),
  inviteRole: byId('invite-role', HTMLSelectElement),
  auditSection: byId('audit-section', HTMLElement),
  auditList: byId('audit-list', HTMLElement),
  hideInactive: byId('hide-inactive', HTMLInputElement),
  editDialog: byId('edit-dialog', HTMLDialogElement),
  editSubject: byId('edit-subject', HTMLElement),
  editForm: byId('edit-form', HTMLFormElement),
  editName: byId('edit-name', HTMLInputElement),
  editExpiry: byId('edit-expiry', HTMLInputElement),
  editCancel: byId('edit-cancel', HTMLButtonElement),
};

const messages = messageRegions(byId('error', HTMLElement), ui.notice);
/** Errors of "Create key", shown beside it; its successes go to the key panel. */
const createMessages = messageRegions(byId('create-error', HTMLElement), byId('create-error', HTMLElement));
const newKey = keyPanel();
const chart = usageChart(byId('usage-chart', HTMLElement));

/** The session's CSRF token, sent with every change. */
let csrfToken = '';
/** @type {Me['accounts']} */
let accounts = [];
/** @type {string | null} */
let currentAccountId = null;
/** @type {Summary | null} */
let summary = null;
/** @type {Key[]} */
let keys = [];
/** @type {UsageWindow} */
let usageWindow = '24h';
/** What the usage chart draws; switching redraws the usage already shown. */
/** @type {ChartedMetric} */
let usageMetric = 'requests';
/** @type {Usage | null} */
let shownUsage = null;
/** Only the newest account load may render (the account can change while one is on its way). */
let loadSerial = 0;

// ---------------------------------------------------------------- API

/**
 * @param {string} method
 * @param {string} path
 * @param {unknown} [body]
 */
function api(method, path, body) {
  /** @type {Record<string, string>} */
  const headers = method === 'GET' ? {} : { 'x-csrf-token': csrfToken };
  return fetchJson(method, path, { body, headers, credentials: 'same-origin', service: 'the dashboard' });
}

/** @param {string} [rest] */
function accountPath(rest = '') {
  return `/api/accounts/${encodeURIComponent(currentAccountId ?? '')}${rest}`;
}

/**
 * @template T
 * @param {unknown} data
 * @param {string} field  a field the answer must have
 * @returns {T}
 */
function answer(data, field) {
  if (!isObject(data) || !(field in data)) throw new ApiError(0, '', `The dashboard's answer has no '${field}'.`);
  return /** @type {T} */ (data);
}

/** @param {string} action */
function may(action) {
  return summary?.permissions.includes(/** @type {Summary['permissions'][number]} */ (action)) ?? false;
}

/** @param {unknown} error */
function failed(error) {
  // The session ended (idle, maximum age, signed out elsewhere): the start page says why and offers to sign in.
  if (error instanceof ApiError && error.status === 401) {
    window.location.assign('/');
    return;
  }
  messages.error(error);
}

/** Runs one change. */
const run = oneAtATime(ui.main, failed);
const webhooks = webhooksPanel({ api, accountPath, run, messages });

const dialogs = keyDialogs({
  run,
  messages,
  newKey,
  notice: ui.notice,
  regenerate: async (key, graceSeconds) =>
    /** @type {CreatedKey} */ (
      answer(await api('POST', accountPath(`/keys/${encodeURIComponent(key.id)}/regenerate`), { graceSeconds }), 'key')
    ),
  revoke: async (key) => {
    await api('POST', accountPath(`/keys/${encodeURIComponent(key.id)}/revoke`));
  },
  reload: loadAccount,
  inRow: (key, change) => table.inRow(key, change),
});
/** @type {ReturnType<typeof keyDialog<Key>>} */
const edit = keyDialog(ui.editDialog);
const editRestrictions = restrictionFields();

/** @type {ReturnType<typeof keyTable<Key>>} */
const table = keyTable({
  graceNote: 'in its regeneration grace period',
  extraCells: (key) => [keyCell('created-by', 'Created by', actorText(key.createdBy))],
  actions: (key) => [
    may('keys.regenerate') && dialogs.regenerateButton(key),
    key.status !== 'revoked' &&
      may('keys.update') &&
      button('Edit', { className: 'secondary small', label: `Rename, set the expiry or restrict key ${describeKey(key)}` }, () =>
        openEditDialog(key),
      ),
    may('keys.revoke') && dialogs.revokeButton(key),
  ],
});

// ---------------------------------------------------------------- formatting

/** @param {Actor | null} actor */
function actorText(actor) {
  if (!actor) return '—';
  return actor.kind === 'operator' ? 'your provider (operator)' : actor.subject;
}

/** A date input's day (UTC) → the end of that day, as the API's ISO time. */
/** @param {string} day  YYYY-MM-DD */
function endOfDay(day) {
  return `${day}T23:59:59.999Z`;
}

function currentAccount() {
  return accounts.find((account) => account.id === currentAccountId);
}

// ---------------------------------------------------------------- rendering

function renderAccounts() {
  replaceContent(
    ui.accountSelect,
    ...accounts.map((account) => {
      const option = el('option', {}, `${account.name} (${account.id}) · ${account.role}`);
      option.value = account.id;
      option.selected = account.id === currentAccountId;
      return option;
    }),
  );
}

function renderSummary() {
  const account = currentAccount();
  if (!summary || !account) {
    replaceContent(ui.accountSummary);
    replaceContent(ui.limits);
    return;
  }
  replaceContent(
    ui.accountSummary,
    `Account id ${summary.id} · your role: ${summary.role} · ${summary.keys.active} of at most ${summary.keys.maxActiveKeys} keys in use`,
  );
  ui.createCard.hidden = !may('keys.create');
  ui.membersSection.hidden = !may('members.read');
  ui.inviteForm.hidden = !may('members.manage');
  ui.auditSection.hidden = !may('audit.read');

  /** @param {string} scope @param {{ limit: number, window: string }[]} limits */
  const limitLine = (scope, limits) =>
    el(
      'li',
      {},
      limits.length === 0
        ? `${scope}: no limit`
        : `${scope}: ${limits.map((entry) => `${count(entry.limit)} requests per ${entry.window}`).join(', ')}`,
    );
  const billing = summary.billing;
  replaceContent(
    ui.limits,
    limitLine('Each key', summary.limits.key),
    limitLine('The whole account', summary.limits.account),
    el(
      'li',
      { data: { testid: 'credit' } },
      billing.prepaid
        ? `Prepaid: credit remains: ${billing.creditRemains ? 'yes' : 'no (requests are refused until topped up)'}`
        : 'Billed after use',
    ),
    billing.status === 'suspended' && el('li', { className: 'note' }, 'This account is suspended: every request is refused.'),
  );
}

/**
 * The keys shown: all, or with "Hide revoked and replaced keys" only those that still work and are not on their way
 * out, so on a narrow screen the Create form is not below every card of a key that is gone.
 */
function renderKeys() {
  const shown = ui.hideInactive.checked ? keys.filter((key) => key.status === 'active' && !key.replacedBy) : keys;
  table.render(currentAccount()?.name, shown);
}

/**
 * How the chart's axis names each series it can draw; spend names the currency its axis counts in.
 * @param {ChartedMetric} metric
 * @param {Usage} usage
 */
function chartAxis(metric, usage) {
  return metric === 'costMinorUnits' ? `Spend (${usage.currency.code})` : metric === 'tokens' ? 'Tokens' : 'Requests';
}

/** @param {number} n */
function count(n) {
  return n.toLocaleString('en-US');
}

/**
 * What the chart draws for a series. Spend is drawn in whole currency units (a float is fine for a line's height) and
 * its legend shows the server's exact text per bucket; the other metrics are counts.
 * @param {ChartedMetric} metric
 * @param {Usage} usage
 * @param {string} label
 * @param {Record<import('../../customer/customer-views').UsageMetric, number[]>} series
 * @param {import('../../customer/customer-views').SpendFormatted} spend
 * @returns {import('./usage-chart.js').UsageSeries}
 */
function chartSeries(metric, usage, label, series, spend) {
  if (metric !== 'costMinorUnits') return { label, values: series[metric] };
  const scale = 10 ** usage.currency.exponent;
  return { label, values: series.costMinorUnits.map((units) => units / scale), shownValues: spend.buckets };
}

/** @param {Usage} usage */
function renderUsage(usage) {
  shownUsage = usage;
  for (const control of [ui.window24h, ui.window30d]) control.setAttribute('aria-pressed', String(control.dataset.window === usage.window));
  for (const control of ui.metricButtons) control.setAttribute('aria-pressed', String(control.dataset.metric === usageMetric));
  const sum = (/** @type {number[]} */ values) => values.reduce((total, n) => total + n, 0);
  const total = sum(usage.totals.requests);
  const span = usage.window === '24h' ? 'the last 24 hours (by hour, UTC)' : 'the last 30 days (by day, UTC)';
  replaceContent(
    ui.usageSummary,
    `${count(total)} ${total === 1 ? 'request' : 'requests'} allowed in ${span}. New requests show up within about ${Math.max(1, Math.ceil(usage.countsDelayMs / 1000))} second${usage.countsDelayMs > 1000 ? 's' : ''}.`,
  );
  const summed = (/** @type {import('../../customer/customer-views').UsageMetric} */ metric) => count(sum(usage.totals[metric]));
  replaceContent(
    ui.usageMetered,
    `Tokens: ${summed('tokens')} (${summed('inputTokens')} input, ${summed('outputTokens')} output, ${summed('cachedInputTokens')} cached input, ` +
      `${summed('cacheCreationTokens')} cache writes). Spend: ${usage.spendFormatted.total}.`,
  );
  const byUse = usage.keys
    .map((key) => ({ key, requests: sum(key.series.requests), charted: sum(key.series[usageMetric]) }))
    .sort((a, b) => b.charted - a.charted || b.requests - a.requests);
  replaceContent(
    ui.usageBody,
    ...byUse.map(({ key, requests }) =>
      el(
        'tr',
        { data: { testid: 'usage-row', keyId: key.id } },
        el('td', { data: { label: 'Key' } }, `${key.name} (${key.prefix}…)`),
        el('td', { data: { label: 'Requests' } }, count(requests)),
        el('td', { data: { label: 'Tokens' } }, count(sum(key.series.tokens))),
        el('td', { data: { label: 'Spend' } }, key.spendFormatted.total),
      ),
    ),
  );
  const axis = chartAxis(usageMetric, usage);
  const charted = usageMetric === 'costMinorUnits' ? `spend in ${usage.currency.code}` : axis.toLowerCase();
  replaceContent(ui.usageChartCaption, `Chart: ${charted} per ${usage.granularity}, all keys and the busiest keys.`);
  chart.draw(
    usage.bucketStarts,
    usage.granularity,
    chartSeries(usageMetric, usage, 'All keys', usage.totals, usage.spendFormatted),
    byUse
      .filter(({ charted }) => charted > 0)
      .map(({ key }) => chartSeries(usageMetric, usage, `${key.name} (${key.prefix}…)`, key.series, key.spendFormatted)),
    axis,
  );
}

/** @param {Member[]} members */
function renderMembers(members) {
  const manage = may('members.manage');
  replaceContent(
    ui.membersBody,
    ...members.map((member) => {
      const who = member.email ?? `${member.subject ?? ''} (${member.issuer ?? ''})`;
      /** @type {import('../shared/dom.js').Child} */
      let role = member.role;
      if (manage) {
        const select = el('select', { label: `Role of ${who}` });
        for (const value of ['viewer', 'developer', 'owner']) {
          const option = el('option', {}, value);
          option.value = value;
          option.selected = value === member.role;
          select.append(option);
        }
        select.addEventListener(
          'change',
          () =>
            void run(async () => {
              messages.clear();
              await api('PATCH', accountPath(`/members/${encodeURIComponent(member.id)}`), { role: select.value });
              await loadAccount();
              messages.notice(`${who} is now ${select.value}.`);
            }),
        );
        role = select;
      }
      return el(
        'tr',
        { data: { testid: 'member-row', memberId: member.id } },
        el('td', { className: 'name', data: { label: 'Who' } }, who),
        el('td', { data: { label: 'Role' } }, role),
        el('td', { data: { label: 'Status' } }, member.status),
        el(
          'td',
          { className: 'actions-cell', data: { label: '' } },
          manage &&
            button(
              'Remove',
              { className: 'danger-outline small', label: `Remove ${who}` },
              () =>
                void run(async () => {
                  messages.clear();
                  await api('DELETE', accountPath(`/members/${encodeURIComponent(member.id)}`));
                  await loadAccount();
                  messages.notice(`${who} was removed.`);
                  ui.notice.focus();
                }),
            ),
        ),
      );
    }),
  );
}

/** @param {AuditEntry[]} entries */
function renderAudit(entries) {
  // The usage answer, read with the audit trail, names the currency the amounts count.
  const currency = shownUsage?.currency;
  const money = (/** @type {number} */ units) => (currency ? formatMoney(units, currency) : `${count(units)} units`);
  replaceContent(
    ui.auditList,
    ...entries.map((entry) =>
      el(
        'li',
        { data: { testid: 'audit-entry' } },
        timeElement(entry.time),
        ` ${auditSentence(entry, money)}, by ${actorText(entry.actor)}`,
      ),
    ),
  );
  if (entries.length === 0) replaceContent(ui.auditList, el('li', { className: 'muted' }, 'No changes recorded yet.'));
}

// ---------------------------------------------------------------- loading

async function loadSession() {
  /** @type {{ csrfToken: string }} */
  const session = answer(await api('GET', '/auth/session'), 'csrfToken');
  csrfToken = session.csrfToken;
  /** @type {Me} */
  const me = answer(await api('GET', '/api/me'), 'accounts');
  accounts = me.accounts;
  replaceContent(ui.signedInAs, `Signed in as ${me.identity.name ?? me.identity.email ?? me.identity.subject}`);
  if (accounts.length === 0) {
    // No membership (any more): the start page explains who can add this person.
    window.location.assign('/');
    return;
  }
  const wanted = new URLSearchParams(window.location.search).get('account');
  currentAccountId = accounts.some((account) => account.id === wanted) ? wanted : (accounts[0]?.id ?? null);
  renderAccounts();
}

/** Everything shown about the current account: summary, keys, usage, and for owners members and the audit trail. */
async function loadAccount() {
  // After a change this is its reading: the next change is taken from here on, not ignored.
  run.writesDone();
  const serial = ++loadSerial;
  const [summaryData, keysData] = await Promise.all([api('GET', accountPath()), api('GET', accountPath('/keys'))]);
  if (serial !== loadSerial) return;
  summary = answer(summaryData, 'permissions');
  /** @type {{ keys: Key[] }} */
  const list = answer(keysData, 'keys');
  keys = newestFirst(list.keys);
  renderSummary();
  renderKeys();
  const [usage, members, audit] = await Promise.all([
    api('GET', accountPath(`/usage?window=${usageWindow}`)),
    may('members.read') ? api('GET', accountPath('/members')) : null,
    may('audit.read') ? api('GET', accountPath('/audit?limit=50')) : null,
  ]);
  if (serial !== loadSerial) return;
  renderUsage(answer(usage, 'totals'));
  /** @type {{ members: Member[] }} */
  const memberList = members ? answer(members, 'members') : { members: [] };
  /** @type {{ entries: AuditEntry[] }} */
  const auditPage = audit ? answer(audit, 'entries') : { entries: [] };
  renderMembers(memberList.members);
  renderAudit(auditPage.entries);
  await webhooks.load(may('webhooks.manage'));
}

async function signOut() {
  // The server ends the session and clears the cookie; its answer is a redirect to the signed-out page.
  try {
    await fetch('/auth/logout', { method: 'POST', headers: { 'x-csrf-token': csrfToken }, credentials: 'same-origin', redirect: 'manual' });
  } finally {
    window.location.assign('/?ended=signed_out');
  }
}

// ---------------------------------------------------------------- dialogs

/** @param {Key} key */
function openEditDialog(key) {
  replaceContent(ui.editSubject, `Key ${describeKey(key)}`);
  ui.editName.value = key.name;
  ui.editExpiry.value = key.expiresAt ? key.expiresAt.slice(0, 10) : '';
  editRestrictions.fill(key.restrictions);
  edit.open(key, ui.editName);
}

async function saveEdit() {
  // The inputs keep their values once the dialog is closed.
  const key = edit.take();
  if (!key) return;
  messages.clear();
  const name = ui.editName.value.trim();
  const day = ui.editExpiry.value;
  /** @type {{ name?: string, expiresAt?: string | null, restrictions?: Key['restrictions'] }} */
  const patch = {};
  if (name && name !== key.name) patch.name = name;
  const expiresAt = day ? endOfDay(day) : null;
  if (expiresAt !== (key.expiresAt ?? null) && !(day && key.expiresAt?.startsWith(day))) patch.expiresAt = expiresAt;
  const restrictions = editRestrictions.read();
  if (JSON.stringify(restrictions) !== JSON.stringify(key.restrictions ?? null)) patch.restrictions = restrictions;
  if (Object.keys(patch).length === 0) {
    messages.notice('Nothing changed.');
    return;
  }
  if (!(await table.inRow(key, () => api('PATCH', accountPath(`/keys/${encodeURIComponent(key.id)}`), patch)))) return;
  await loadAccount();
  messages.notice(`Key ${describeKey({ ...key, name: patch.name ?? key.name })} was saved.`);
  ui.notice.focus();
}

// ---------------------------------------------------------------- wiring

ui.signOut.addEventListener('click', () => void signOut());
ui.hideInactive.addEventListener('change', renderKeys);

ui.accountSelect.addEventListener('change', () => {
  currentAccountId = ui.accountSelect.value || null;
  const url = new URL(window.location.href);
  url.searchParams.set('account', currentAccountId ?? '');
  window.history.replaceState(null, '', url);
  newKey.hide();
  summary = null;
  keys = [];
  renderKeys();
  messages.clear();
  // A read: not queued behind a change, and an older answer never overwrites a newer one (loadSerial).
  loadAccount().catch(failed);
});

ui.refresh.addEventListener('click', () => {
  void run(async () => {
    messages.clear();
    await loadAccount();
  });
});

for (const control of ui.metricButtons) {
  control.addEventListener('click', () => {
    const metric = control.dataset.metric;
    usageMetric = metric === 'tokens' || metric === 'costMinorUnits' ? metric : 'requests';
    if (shownUsage) renderUsage(shownUsage);
  });
}

for (const control of [ui.window24h, ui.window30d]) {
  control.addEventListener('click', () => {
    usageWindow = control.dataset.window === '30d' ? '30d' : '24h';
    void run(async () => {
      renderUsage(answer(await api('GET', accountPath(`/usage?window=${usageWindow}`)), 'totals'));
    });
  });
}

ui.createForm.addEventListener('submit', (event) => {
  event.preventDefault();
  const name = ui.keyName.value.trim();
  const environment = ui.keyEnvironment.value;
  const day = ui.keyExpiry.value;
  void run(async () => {
    messages.clear();
    createMessages.clear();
    /** @type {CreatedKey} */
    let created;
    try {
      created = answer(
        await api('POST', accountPath('/keys'), { environment, ...(name ? { name } : {}), ...(day ? { expiresAt: endOfDay(day) } : {}) }),
        'key',
      );
    } catch (error) {
      // Beside the Create button, where the eye is (and announced: role=alert), not at the top of a long page. A session
      // that ended still goes to the start page.
      if (error instanceof ApiError && error.status !== 401) {
        createMessages.error(error);
        return;
      }
      throw error;
    }
    ui.keyName.value = '';
    ui.keyExpiry.value = '';
    newKey.show(
      created.key,
      `Created key “${created.name}” (${created.environment}) for ${currentAccount()?.name ?? 'this account'}.`,
      ui.keyName,
    );
    await loadAccount();
  });
});

ui.inviteForm.addEventListener('submit', (event) => {
  event.preventDefault();
  const email = ui.inviteEmail.value.trim();
  const role = ui.inviteRole.value;
  void run(async () => {
    messages.clear();
    await api('POST', accountPath('/members'), { email, role });
    ui.inviteEmail.value = '';
    await loadAccount();
    messages.notice(`${email} was added as ${role}. They get access when they sign in with that verified email address.`);
  });
});

ui.editForm.addEventListener('submit', (event) => {
  event.preventDefault();
  void run(saveEdit);
});
ui.editCancel.addEventListener('click', () => edit.take());

// The first load is a read, as the account picker's is, not a change taken one at a time: a Create or an Add clicked
// while usage, members or webhooks are still loading is done, not ignored (loadSerial keeps the newest answer).
loadSession()
  .then(() => (currentAccountId ? loadAccount() : undefined))
  .catch(failed);
