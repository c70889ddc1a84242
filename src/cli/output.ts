/**
 * What the CLI prints: tables, key-value blocks and JSON. Small on purpose;
 * every cell goes through `cell()`, so text from the API (account and key
 * names) can never move the cursor, clear the screen or break a row.
 */

/** What a table cell or a key-value line can show. */
export type CellValue = string | number | boolean | null | undefined;

/** Control characters (C0, DEL, C1) written as visible escapes: `\n`, `\t`, `\x1b`. */
export function cell(value: CellValue): string {
  const text = value === null || value === undefined ? '' : String(value);
  // eslint-disable-next-line no-control-regex -- matching control characters is the point: they are escaped here
  return text.replace(/[\u0000-\u001f\u007f-\u009f]/g, (char) => {
    if (char === '\n') return '\\n';
    if (char === '\r') return '\\r';
    if (char === '\t') return '\\t';
    return `\\x${char.charCodeAt(0).toString(16).padStart(2, '0')}`;
  });
}

/** Code point ranges that take no column (combining marks, zero-width characters, variation selectors). */
const ZERO_WIDTH: readonly (readonly [number, number])[] = [
  [0x0300, 0x036f],
  [0x200b, 0x200f],
  [0xfe00, 0xfe0f],
];
/** Code point ranges that take two columns (CJK, Hangul, full-width forms, most emoji). */
const DOUBLE_WIDTH: readonly (readonly [number, number])[] = [
  [0x1100, 0x115f],
  [0x2e80, 0xa4cf],
  [0xac00, 0xd7a3],
  [0xf900, 0xfaff],
  [0xfe30, 0xfe4f],
  [0xff00, 0xff60],
  [0xffe0, 0xffe6],
  [0x1f300, 0x1faff],
  [0x20000, 0x3fffd],
];
const within = (code: number, ranges: readonly (readonly [number, number])[]) => ranges.some(([low, high]) => code >= low && code <= high);

/** Width in terminal columns, close enough for names: `…` counts 1, `漢` 2, a combining accent 0. */
export function displayWidth(text: string): number {
  let width = 0;
  for (const char of text) {
    const code = char.codePointAt(0)!;
    if (within(code, ZERO_WIDTH)) continue;
    width += within(code, DOUBLE_WIDTH) ? 2 : 1;
  }
  return width;
}

function pad(text: string, width: number, align: 'left' | 'right'): string {
  const fill = ' '.repeat(Math.max(0, width - displayWidth(text)));
  return align === 'right' ? fill + text : text + fill;
}

export interface Column<Row> {
  header: string;
  value: (row: Row) => CellValue;
  align?: 'left' | 'right';
}

/**
 * A plain-text table: a header row, then one line per row; columns are as
 * wide as their widest cell and two spaces apart; no trailing spaces. Ends
 * with a newline.
 */
export function renderTable<Row>(columns: readonly Column<Row>[], rows: readonly Row[]): string {
  const cells = rows.map((row) => columns.map((column) => cell(column.value(row))));
  const widths = columns.map((column, index) => Math.max(displayWidth(column.header), ...cells.map((line) => displayWidth(line[index]!))));
  const line = (values: readonly string[]) =>
    values
      .map((value, index) => pad(value, widths[index]!, columns[index]!.align ?? 'left'))
      .join('  ')
      .trimEnd();
  return [line(columns.map((column) => column.header)), ...cells.map(line)].map((text) => `${text}\n`).join('');
}

/** `label  value` lines with the values aligned; undefined values are left out. Ends with a newline. */
export function renderKeyValue(pairs: readonly (readonly [string, CellValue])[]): string {
  const shown = pairs.filter(([, value]) => value !== undefined);
  const width = Math.max(0, ...shown.map(([label]) => displayWidth(label)));
  return shown.map(([label, value]) => `${pad(label, width, 'left')}  ${cell(value)}`.trimEnd() + '\n').join('');
}

/** One JSON document, pretty-printed, ending with a newline. */
export function renderJson(document: unknown): string {
  return `${JSON.stringify(document, null, 2)}\n`;
}

/** `2025-03-04T05:06:07.890Z` → `2025-03-04 05:06Z` for tables; anything unparseable is shown as given. */
export function shortTime(iso: string | null | undefined, none = '-'): string {
  if (!iso) return none;
  const time = new Date(iso);
  if (Number.isNaN(time.getTime())) return iso;
  return `${time.toISOString().slice(0, 16).replace('T', ' ')}Z`;
}

/** `[{limit:100,window:"1m"}]` → `100/1m, 10000/1d`; null (not overridden) → the given word. */
export function formatLimits(limits: readonly { limit: number; window: string }[] | null | undefined, none: string): string {
  if (!limits) return none;
  return limits.length === 0 ? 'none' : limits.map((entry) => `${entry.limit}/${entry.window}`).join(', ');
}

/** `[{tokens:100000,window:"1m"}]` → `100000 tokens/1m`; null (not overridden) → the given word. */
export function formatTokenBudgets(budgets: readonly { tokens: number; window: string }[] | null | undefined, none: string): string {
  if (!budgets) return none;
  return budgets.length === 0 ? 'none' : budgets.map((entry) => `${entry.tokens} tokens/${entry.window}`).join(', ');
}

/**
 * An amount as money: the server's formatted text ("$0.0042", `…Formatted` fields). A server older than issue 35 sends
 * only the integer, which is then named as a count of the operator's unit rather than guessed at.
 */
export function moneyText(amount: number, formatted: string | null | undefined): string {
  return formatted ?? `${amount} (units of the operator's currency)`;
}

/**
 * Prints an API answer on stdout: with `--json` the answer itself as one JSON
 * document, otherwise the text `render` makes of it.
 */
export function emit<T>(options: { json?: boolean }, answer: T, render: (answer: T) => string): void {
  process.stdout.write(options.json ? renderJson(answer) : render(answer));
}

/** `endpoints /v1/embeddings; models gpt-4o*; read-only` or `none`. */
export function formatRestrictions(
  restrictions: { endpoints?: string[]; readOnly?: boolean; models?: string[]; sourceAddresses?: string[] } | null | undefined,
  none: string,
): string {
  if (!restrictions) return none;
  const parts = [
    restrictions.endpoints && `endpoints ${restrictions.endpoints.join(', ')}`,
    restrictions.readOnly && 'read-only',
    restrictions.models && `models ${restrictions.models.join(', ')}`,
    restrictions.sourceAddresses && `source addresses ${restrictions.sourceAddresses.join(', ')}`,
  ].filter((part): part is string => typeof part === 'string');
  return parts.length === 0 ? none : parts.join('; ');
}
