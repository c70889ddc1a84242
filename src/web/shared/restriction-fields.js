// @ts-check
/**
 * The restriction fields of both dashboard pages' key dialogs (the customer's Edit dialog, the operator's Restrict
 * dialog), wired to the page's own markup: #restrict-endpoints, #restrict-models, #restrict-addresses and
 * #restrict-read-only, the same ids on both. They show a key's restrictions and read them back as both APIs take them
 * (docs/concepts/key-restrictions.md).
 */
import { byId } from './dom.js';

/**
 * A key's restrictions, as both APIs show and take them.
 * @typedef {object} Restrictions
 * @property {readonly string[]} [endpoints]
 * @property {boolean} [readOnly]
 * @property {readonly string[]} [models]
 * @property {readonly string[]} [sourceAddresses]
 */

/** `a, b` → ['a', 'b']; empty → undefined (the part restricts nothing). */
function listOf(/** @type {string} */ text) {
  const entries = text
    .split(',')
    .map((entry) => entry.trim())
    .filter((entry) => entry !== '');
  return entries.length === 0 ? undefined : entries;
}

export function restrictionFields() {
  const endpoints = byId('restrict-endpoints', HTMLInputElement);
  const models = byId('restrict-models', HTMLInputElement);
  const addresses = byId('restrict-addresses', HTMLInputElement);
  const readOnly = byId('restrict-read-only', HTMLInputElement);
  return {
    /** The first field, for a dialog that opens on them. */
    first: endpoints,
    /** @param {Restrictions | null | undefined} restrictions  none: every field empty */
    fill(restrictions) {
      endpoints.value = restrictions?.endpoints?.join(', ') ?? '';
      models.value = restrictions?.models?.join(', ') ?? '';
      addresses.value = restrictions?.sourceAddresses?.join(', ') ?? '';
      readOnly.checked = restrictions?.readOnly === true;
    },
    /**
     * The fields' restrictions, in the order the APIs list them; null when every field is empty (none of the key's own).
     * @returns {{ endpoints?: string[], readOnly?: boolean, models?: string[], sourceAddresses?: string[] } | null}
     */
    read() {
      /** @type {{ endpoints?: string[], readOnly?: boolean, models?: string[], sourceAddresses?: string[] }} */
      const restrictions = {};
      const endpointList = listOf(endpoints.value);
      const modelList = listOf(models.value);
      const addressList = listOf(addresses.value);
      if (endpointList) restrictions.endpoints = endpointList;
      if (readOnly.checked) restrictions.readOnly = true;
      if (modelList) restrictions.models = modelList;
      if (addressList) restrictions.sourceAddresses = addressList;
      return Object.keys(restrictions).length === 0 ? null : restrictions;
    },
  };
}
