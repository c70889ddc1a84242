// @ts-check
/**
 * The "Webhooks" section of the customer dashboard, for owners: the account's endpoints, adding one (its signing
 * secret shown once), enabling and disabling, rotating the secret, test-send, and each endpoint's delivery log. The
 * page hands it the API call, the account path and how to run a change (customer.js).
 */
import { ApiError } from '../shared/api.js';
import { button, byId, el, messageRegions, replaceContent, timeElement } from '../shared/dom.js';
import { decimalText, parseMoney } from './money.js';

/** @typedef {Omit<import('../../ports/webhook-store').WebhookEndpoint, 'secret'>} Endpoint */
/** @typedef {import('../../ports/webhook-store').DeliveryAttempt} Attempt */
/** @typedef {ReturnType<typeof import('../../http/webhook-routes').webhookSettingsView>} WebhookSettings */

/**
 * @param {object} deps
 * @param {(method: string, path: string, body?: unknown) => Promise<unknown>} deps.api
 * @param {(rest?: string) => string} deps.accountPath
 * @param {{ (action: () => Promise<void>): Promise<void>, writesDone: () => void }} deps.run
 * @param {{ clear(): void, notice(text: string): void }} deps.messages
 */
export function webhooksPanel({ api, accountPath, run, messages }) {
  const section = byId('webhooks-section', HTMLElement);
  const body = byId('webhooks-body', HTMLElement);
  const form = byId('webhook-form', HTMLFormElement);
  const url = byId('webhook-url', HTMLInputElement);
  const events = byId('webhook-events', HTMLElement);
  const secretPanel = byId('webhook-secret-panel', HTMLElement);
  const secretText = byId('webhook-secret', HTMLElement);
  const secretSubject = byId('webhook-secret-subject', HTMLElement);
  const log = byId('webhook-log', HTMLElement);
  const thresholdForm = byId('credit-low-form', HTMLFormElement);
  const threshold = byId('credit-low-threshold', HTMLInputElement);
  const thresholdError = byId('credit-low-error', HTMLElement);
  const thresholdMessages = messageRegions(thresholdError, thresholdError);
  const thresholdHint = byId('credit-low-hint', HTMLElement);
  /** @type {string[]} */
  let eventTypes = [];
  /** What the threshold counts, from the settings' answer (the section is hidden until then). @type {import('./money.js').Currency | null} */
  let currency = null;

  /**
   * The threshold as the input shows it: the amount in the currency ("25", "0.0025"), or empty for none.
   * @param {number | null} units
   * @param {import('./money.js').Currency} of
   */
  const thresholdText = (units, of) => (units === null ? '' : decimalText(units, of.exponent));

  /** @param {string} [rest] */
  const endpointsPath = (rest = '') => accountPath(`/webhooks${rest}`);

  /** @param {string} subject @param {string} secret */
  function showSecret(subject, secret) {
    replaceContent(secretSubject, subject);
    replaceContent(secretText, secret);
    secretPanel.hidden = false;
  }

  function renderEventChoices() {
    replaceContent(
      events,
      ...eventTypes.map((type) => {
        const box = el('input');
        box.type = 'checkbox';
        box.name = 'webhook-event';
        box.value = type;
        box.checked = type.startsWith('key.');
        const label = el('label', { className: 'choice' }, box, ` ${type}`);
        return label;
      }),
    );
  }

  /** @param {Endpoint} endpoint */
  async function showLog(endpoint) {
    /** @type {{ deliveries: Attempt[] }} */
    const answer = /** @type {any} */ (await api('GET', endpointsPath(`/${encodeURIComponent(endpoint.id)}/deliveries`)));
    replaceContent(
      log,
      el('h3', {}, `Deliveries to ${endpoint.url}`),
      answer.deliveries.length === 0
        ? el('p', { className: 'muted' }, 'No attempts yet.')
        : el(
            'ol',
            { className: 'audit-list', data: { testid: 'webhook-log-list' } },
            ...answer.deliveries.map((attempt) =>
              el(
                'li',
                { data: { testid: 'webhook-attempt' } },
                timeElement(attempt.at),
                ` ${attempt.eventType} (attempt ${attempt.attempt}): ${attempt.outcome}`,
                attempt.status !== undefined ? `, HTTP ${attempt.status}` : '',
                attempt.error ? ` (${attempt.error})` : '',
              ),
            ),
          ),
    );
    log.hidden = false;
  }

  /** @param {Endpoint[]} endpoints */
  function render(endpoints) {
    if (endpoints.length === 0) {
      replaceContent(body, el('tr', {}, el('td', { className: 'muted' }, 'No endpoints yet.')));
      return;
    }
    replaceContent(
      body,
      ...endpoints.map((endpoint) => {
        const path = (/** @type {string} */ rest) => endpointsPath(`/${encodeURIComponent(endpoint.id)}${rest}`);
        const change = (/** @type {() => Promise<void>} */ action) => () =>
          void run(async () => {
            messages.clear();
            await action();
            await load(true);
          });
        return el(
          'tr',
          { data: { testid: 'webhook-row', endpoint: endpoint.id } },
          el('td', {}, endpoint.url),
          el('td', {}, endpoint.events.join(', ')),
          el('td', { data: { testid: 'webhook-state' } }, endpoint.enabled ? 'enabled' : `disabled: ${endpoint.disabledReason ?? ''}`),
          el(
            'td',
            { className: 'actions' },
            button(
              endpoint.enabled ? 'Disable' : 'Enable',
              { label: `${endpoint.enabled ? 'Disable' : 'Enable'} ${endpoint.url}` },
              change(async () => {
                await api('PATCH', path(''), { enabled: !endpoint.enabled });
              }),
            ),
            button(
              'Send test',
              { label: `Send a test event to ${endpoint.url}` },
              change(async () => {
                await api('POST', path('/test'));
                messages.notice(`A test event is on its way to ${endpoint.url}; see its deliveries.`);
              }),
            ),
            button(
              'Rotate secret',
              { label: `Rotate the signing secret of ${endpoint.url}` },
              change(async () => {
                /** @type {{ secret: string }} */
                const rotated = /** @type {any} */ (await api('POST', path('/rotate-secret')));
                showSecret(`New signing secret for ${endpoint.url}; the old one no longer signs.`, rotated.secret);
              }),
            ),
            button('Deliveries', { label: `Deliveries to ${endpoint.url}` }, () => void run(() => showLog(endpoint))),
            button(
              'Delete',
              { label: `Delete ${endpoint.url}` },
              change(async () => {
                await api('DELETE', path(''));
              }),
            ),
          ),
        );
      }),
    );
  }

  let loadSerial = 0;

  /** Shows the section to those who may manage webhooks (owners), with the account's endpoints. @param {boolean} allowed */
  async function load(allowed) {
    run.writesDone();
    const serial = ++loadSerial;
    if (!allowed) {
      section.hidden = true;
      return;
    }
    /** @type {[{ endpoints: Endpoint[], eventTypes: string[] }, WebhookSettings]} */
    const [answer, settings] = /** @type {any} */ (
      await Promise.all([api('GET', endpointsPath()), api('GET', endpointsPath('/settings'))])
    );
    // An older load (the page's first, or another account's) can answer after a newer one: its answer is dropped.
    if (serial !== loadSerial) return;
    if (eventTypes.length === 0) {
      eventTypes = answer.eventTypes;
      renderEventChoices();
    }
    render(answer.endpoints);
    currency = settings.currency;
    replaceContent(thresholdHint, `In ${currency.code}, e.g. 25 or 0.50. Leave it empty to send no credit.low.`);
    threshold.value = thresholdText(settings.creditLowThreshold, currency);
    // Shown once the list and the event choices are there: an Add before then would subscribe to no event.
    section.hidden = false;
  }

  thresholdForm.addEventListener('submit', (event) => {
    event.preventDefault();
    const text = threshold.value.trim();
    const shownIn = currency;
    if (!shownIn) return;
    void run(async () => {
      messages.clear();
      thresholdMessages.clear();
      const parsed = text === '' ? { units: null } : parseMoney(text, shownIn);
      if ('problem' in parsed || parsed.units === 0) {
        const problem = 'problem' in parsed ? parsed.problem : 'Enter an amount above zero.';
        replaceContent(thresholdError, `${problem} Leave it empty for no credit.low events.`);
        return;
      }
      // The API checks the upper bound (the credit limit, declared once on the server), and says so in its words.
      /** @type {WebhookSettings} */
      let saved;
      try {
        saved = /** @type {any} */ (await api('PUT', endpointsPath('/settings'), { creditLowThreshold: parsed.units }));
      } catch (error) {
        // Beside the control (and announced: role=alert), as the key form's errors are. A session that ended still
        // goes to the start page.
        if (error instanceof ApiError && error.status !== 401) {
          thresholdMessages.error(error);
          return;
        }
        throw error;
      }
      threshold.value = thresholdText(saved.creditLowThreshold, saved.currency);
      messages.notice(
        saved.creditLowThresholdFormatted === null
          ? 'No credit.low events will be sent.'
          : `credit.low will be sent when the prepaid balance falls below ${saved.creditLowThresholdFormatted}.`,
      );
    });
  });

  form.addEventListener('submit', (event) => {
    event.preventDefault();
    const chosen = [...events.querySelectorAll('input[name="webhook-event"]')]
      .filter((box) => box instanceof HTMLInputElement && box.checked)
      .map((box) => /** @type {HTMLInputElement} */ (box).value);
    void run(async () => {
      messages.clear();
      /** @type {{ url: string, secret: string }} */
      const created = /** @type {any} */ (await api('POST', endpointsPath(), { url: url.value.trim(), events: chosen }));
      url.value = '';
      showSecret(`Signing secret for ${created.url}. It is shown only now: copy it to your receiver.`, created.secret);
      await load(true);
    });
  });

  return { load };
}
