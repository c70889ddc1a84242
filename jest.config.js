/** @type {import('jest').Config} */
module.exports = {
  // Node's, reporting what a test file leaves open (test/support/open-handle-environment.js).
  testEnvironment: '<rootDir>/test/support/open-handle-environment.js',
  roots: ['<rootDir>/test'],
  testMatch: ['**/*.test.ts'],
  transform: { '^.+\\.ts$': ['ts-jest', { tsconfig: 'tsconfig.json' }] },
  // Integration suites start their own redis-server and gRPC servers; keep
  // parallelism modest on the 2-core machines.
  maxWorkers: 2,
  testTimeout: 30000,
  // Suite-wide secret hygiene: every captured log line is scanned for every secret any test used.
  globalSetup: '<rootDir>/test/support/global-setup.ts',
  globalTeardown: '<rootDir>/test/support/global-teardown.ts',
};
