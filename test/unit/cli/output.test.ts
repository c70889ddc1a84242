import { cell, displayWidth, formatLimits, renderJson, renderKeyValue, renderTable, shortTime, type Column } from '../../../src/cli/output';

interface Row {
  id: string;
  name: string;
  balance: number | null;
}

const columns: Column<Row>[] = [
  { header: 'ID', value: (row) => row.id },
  { header: 'NAME', value: (row) => row.name },
  { header: 'BALANCE', value: (row) => row.balance ?? '-', align: 'right' },
];

describe('renderTable', () => {
  it('sizes each column to its widest cell, two spaces apart, numbers right-aligned, no trailing spaces', () => {
    const text = renderTable(columns, [
      { id: 'acme', name: 'Acme Corporation', balance: 1250 },
      { id: 'b', name: 'B', balance: null },
    ]);
    expect(text).toBe(
      ['ID    NAME              BALANCE', 'acme  Acme Corporation     1250', 'b     B                       -', ''].join('\n'),
    );
  });

  it('prints only the header for no rows', () => {
    expect(renderTable(columns, [])).toBe('ID  NAME  BALANCE\n');
  });

  it('trims the padding of a last column that is left-aligned', () => {
    const text = renderTable(
      [
        { header: 'A', value: (row: { a: string; b: string }) => row.a },
        { header: 'B', value: (row: { a: string; b: string }) => row.b },
      ],
      [
        { a: 'x', b: 'long value' },
        { a: 'y', b: '' },
      ],
    );
    expect(text.split('\n')).toEqual(['A  B', 'x  long value', 'y', '']);
  });

  it('counts … as one column and wide characters as two, so columns still line up', () => {
    const text = renderTable(
      [
        { header: 'PREFIX', value: (row: { prefix: string; name: string }) => row.prefix },
        { header: 'NAME', value: (row: { prefix: string; name: string }) => row.name },
      ],
      [
        { prefix: 'gk_live_AbC4…', name: 'one' },
        { prefix: '漢字', name: 'two' },
      ],
    );
    const [header, first, second] = text.split('\n');
    expect(header).toBe('PREFIX         NAME');
    expect(first).toBe('gk_live_AbC4…  one');
    expect(second).toBe('漢字           two');
  });

  it('shows control characters in names as escapes, so a name cannot break a row or drive the terminal', () => {
    const text = renderTable(columns, [{ id: 'x', name: 'evil\n\x1b[2Jname\tend', balance: 1 }]);
    expect(text.split('\n')).toHaveLength(3);
    expect(text).toContain('evil\\n\\x1b[2Jname\\tend');
    expect(text).not.toContain('\x1b');
  });
});

describe('renderKeyValue', () => {
  it('aligns the values and leaves out undefined ones', () => {
    expect(
      renderKeyValue([
        ['id', 'key_1'],
        ['last used', 'never'],
        ['revoked', undefined],
        ['limits', null],
      ]),
    ).toBe('id         key_1\nlast used  never\nlimits\n');
  });
});

describe('cell, displayWidth, shortTime, formatLimits, renderJson', () => {
  it('renders null and undefined as empty and numbers as text', () => {
    expect(cell(null)).toBe('');
    expect(cell(undefined)).toBe('');
    expect(cell(-50)).toBe('-50');
    expect(cell('\u009b')).toBe('\\x9b');
  });

  it('measures terminal columns', () => {
    expect(displayWidth('abc')).toBe(3);
    expect(displayWidth('…')).toBe(1);
    expect(displayWidth('e\u0301')).toBe(1);
    expect(displayWidth('日本')).toBe(4);
  });

  it('shortens times to the minute in UTC, with a word for none', () => {
    expect(shortTime('2025-03-04T05:06:07.890Z')).toBe('2025-03-04 05:06Z');
    expect(shortTime('2025-03-04T05:06:07+02:00')).toBe('2025-03-04 03:06Z');
    expect(shortTime(null)).toBe('-');
    expect(shortTime(undefined, 'never')).toBe('never');
    expect(shortTime('soon')).toBe('soon');
  });

  it('writes limits as LIMIT/WINDOW', () => {
    expect(
      formatLimits(
        [
          { limit: 100, window: '1m' },
          { limit: 10000, window: '1d' },
        ],
        'default',
      ),
    ).toBe('100/1m, 10000/1d');
    expect(formatLimits(null, 'default')).toBe('default');
  });

  it('prints one pretty JSON document ending with a newline', () => {
    const text = renderJson({ a: 1, b: [2] });
    expect(JSON.parse(text)).toEqual({ a: 1, b: [2] });
    expect(text.endsWith('}\n')).toBe(true);
    expect(text.trimEnd().split('\n').length).toBeGreaterThan(1);
  });
});
