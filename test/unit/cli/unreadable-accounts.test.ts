import { renderAccountList } from '../../../src/cli/commands/accounts';

describe('accounts list with an unreadable account', () => {
  it('names each unreadable account and its problem after the table', () => {
    const text = renderAccountList({
      accounts: [],
      unreadable: [{ id: 'damaged', problem: 'creditBalance is not a whole number within ±10^15' }],
    });
    expect(text).toBe('No accounts.\nunreadable account damaged: creditBalance is not a whole number within ±10^15\n');
  });

  it('prints nothing extra when every account is readable, or for an older server that does not say', () => {
    expect(renderAccountList({ accounts: [], unreadable: [] })).toBe('No accounts.\n');
    expect(renderAccountList({ accounts: [] })).toBe('No accounts.\n');
  });
});
