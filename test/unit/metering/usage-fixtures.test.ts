import { USAGE_FIXTURE_CASES, readUsage, usageFixture } from '../../support/usage-fixtures';

describe('usage of every fixture, whole body', () => {
  it.each(USAGE_FIXTURE_CASES.map((c) => [c.fixture, c] as const))('%s', (_name, c) => {
    expect(readUsage(c.response, usageFixture(c.fixture))).toEqual(c.expected);
  });
});
