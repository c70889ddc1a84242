import { execFileSync } from 'node:child_process';
import { copyFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { decimalText, formatMoney, type Currency } from '../../../src/accounts/money';

/**
 * The customer page's money (src/web/customer/money.js, a browser module) against the server's
 * (src/accounts/money.ts): the same text for the same amount, and what a person types read back to the same units.
 * The browser module runs in a Node child process as the ES module it is.
 */
const PAGE_MONEY = join(__dirname, '..', '..', '..', 'src', 'web', 'customer', 'money.js');

const CURRENCIES: Currency[] = [
  { code: 'USD', exponent: 6 },
  { code: 'USD', exponent: 2 },
  { code: 'EUR', exponent: 4 },
  { code: 'JPY', exponent: 0 },
  { code: 'JPY', exponent: 3 },
  { code: 'KWD', exponent: 9 },
];
const AMOUNTS = [0, 1, 9, 10, 99, 4_200, 25_000_000, 1_000_002_500, 123_456_789_012, 1_000_000_000_000_000, Number.MAX_SAFE_INTEGER];

/** Runs `expression` over the page module (bound as `money`) for each case; its answers, in order. */
function inPage<T>(cases: unknown[], expression: string): T[] {
  const program = `
    const money = await import(${JSON.stringify(pageMoneyModule)});
    const cases = JSON.parse(process.argv[1]);
    process.stdout.write(JSON.stringify(cases.map((c) => ${expression})));
  `;
  const out = execFileSync(process.execPath, ['--input-type=module', '-e', program, JSON.stringify(cases)], { encoding: 'utf8' });
  return JSON.parse(out) as T[];
}

// As a .mjs file, which Node loads as the ES module it is (the repository's package.json declares no module type).
let pageMoneyModule: string;
let copyDir: string;
beforeAll(() => {
  copyDir = mkdtempSync(join(tmpdir(), 'page-money-'));
  pageMoneyModule = join(copyDir, 'money.mjs');
  copyFileSync(PAGE_MONEY, pageMoneyModule);
});
afterAll(() => rmSync(copyDir, { recursive: true, force: true }));

describe("the customer page's money", () => {
  const cases = CURRENCIES.flatMap((currency) => AMOUNTS.map((units) => ({ units, currency })));

  it("shows every amount as the server's formatMoney does, and its decimal text as decimalText does", () => {
    const shown = inPage<[string, string]>(
      cases,
      '[money.formatMoney(c.units, c.currency), money.decimalText(c.units, c.currency.exponent)]',
    );
    expect(shown).toEqual(cases.map(({ units, currency }) => [formatMoney(units, currency), decimalText(units, currency.exponent)]));
    expect(shown[cases.findIndex((c) => c.units === 4_200 && c.currency.exponent === 6)]).toEqual(['$0.0042', '0.0042']);
  });

  it('reads the decimal text of every amount back to its units, with or without grouping commas', () => {
    const typed = cases.map(({ units, currency }) => ({ text: decimalText(units, currency.exponent), currency }));
    expect(inPage<unknown>(typed, 'money.parseMoney(c.text, c.currency)')).toEqual(cases.map(({ units }) => ({ units })));
    const grouped = [
      { text: '1,000.0025', currency: { code: 'USD', exponent: 6 } },
      { text: ' 25 ', currency: { code: 'USD', exponent: 6 } },
      { text: '0.5', currency: { code: 'EUR', exponent: 4 } },
    ];
    expect(inPage<unknown>(grouped, 'money.parseMoney(c.text, c.currency)')).toEqual([
      { units: 1_000_002_500 },
      { units: 25_000_000 },
      { units: 5_000 },
    ]);
  });

  it('says why a typed text is not an amount: not a number, too many digits after the point, too large to count', () => {
    const usd = { code: 'USD', exponent: 6 };
    const refused = [
      { text: 'twenty', currency: usd },
      { text: '-5', currency: usd },
      { text: '1e3', currency: usd },
      { text: '1.', currency: usd },
      { text: '0.0000001', currency: usd },
      { text: '5.5', currency: { code: 'JPY', exponent: 0 } },
      { text: '9007199254.740992', currency: usd },
    ];
    expect(inPage<unknown>(refused, 'money.parseMoney(c.text, c.currency)')).toEqual([
      { problem: 'Enter an amount in USD, such as 25 or 0.50.' },
      { problem: 'Enter an amount in USD, such as 25 or 0.50.' },
      { problem: 'Enter an amount in USD, such as 25 or 0.50.' },
      { problem: 'Enter an amount in USD, such as 25 or 0.50.' },
      { problem: 'USD amounts here have at most 6 digits after the point.' },
      { problem: 'JPY amounts here are whole numbers.' },
      { problem: 'That amount is too large.' },
    ]);
  });
});
