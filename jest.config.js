/** @type {import('jest').Config} */
module.exports = {
  // Node's, reporting what a test file leaves open (test/support/open-handle-environment.js).
  testEnvironment: '<rootDir>/test/support/open-handle-environment.js',
  roots: ['<rootDir>/test'],
  testMatch: ['**/*.test.ts'],
  transform: { '^.+\\.ts$': ['ts-jest', { tsconfig: 'tsconfig.json' }] },
  // Three workers on the 2-core machines: much of a suite's time is spent
  // waiting (on Chromium, child processes, Redis, timers), and two workers
  // left a third of the CPU idle. The whole suite took 313 s with three
  // against 389 s with two on the same machine (docs/development/workflow.md).
  maxWorkers: 3,
  testTimeout: 30000,
  // Suite-wide secret hygiene: every captured log line is scanned for every secret any test used.
  globalSetup: '<rootDir>/test/support/global-setup.ts',
  globalTeardown: '<rootDir>/test/support/global-teardown.ts',
};
