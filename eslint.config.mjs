// ESLint flat config. TypeScript (src/, test/) is linted with type information from tsconfig.json, and so is the
// dashboards' browser code (src/web/, from src/web/tsconfig.json); the few other plain JavaScript files (configs,
// tools/fake-upstream) with the JavaScript rules only.
// Formatting is Prettier's job: eslint-config-prettier comes last and turns off every rule it would fight.
import js from '@eslint/js';
import prettier from 'eslint-config-prettier';
import globals from 'globals';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  {
    // Build output, benchmark builds, caches, reports, and the vendored Envoy/Google protos.
    ignores: ['dist/', '.bench/', '.cache/', 'coverage/', 'test-artifacts/', 'proto/', 'node_modules/'],
  },
  {
    linterOptions: { reportUnusedDisableDirectives: 'error' },
  },
  js.configs.recommended,
  {
    files: ['**/*.ts'],
    extends: [tseslint.configs.recommendedTypeChecked],
    languageOptions: {
      parserOptions: {
        projectService: true,
        tsconfigRootDir: import.meta.dirname,
      },
    },
    rules: {
      // An async function without await is how this code implements a Promise-returning interface (the in-memory
      // store, test fakes, SDK key callbacks) so that a throw becomes a rejection, as in the Redis implementation.
      '@typescript-eslint/require-await': 'off',
      // Passing on an error received from elsewhere (typed unknown) is right; literals and known non-Errors stay refused.
      '@typescript-eslint/prefer-promise-reject-errors': ['error', { allowThrowingUnknown: true }],
      '@typescript-eslint/only-throw-error': ['error', { allowThrowingUnknown: true }],
      // `const { secret: _secret, ...rest } = value` is the idiom for leaving fields out of a copy.
      '@typescript-eslint/no-unused-vars': ['error', { ignoreRestSiblings: true }],
    },
  },
  {
    // The Check and metering paths. On Node 20 (V8 11.3), optimized code gives an object literal that starts with a
    // spread and then has more members a hidden class (map) of its own every time; with such objects each Check
    // promoted ~190 bytes to old space, which is what filled it and brought the mark-compacts (docs/design/performance-studies.md,
    // "The mark-compacts' source"). Name the members first, or spell the fields out. Node 22 and 24 (V8 12.4, 13.6) keep one
    // map there (docs/operations/runtime.md); the rule stays, as it costs nothing and a Node 20 may still run the service.
    files: [
      'src/{check,transport,metering,keys,accounts}/**/*.ts',
      'src/platform/{metrics,batched-counts,event-loop-lag,hot-path-histogram,logger,clock,health-service}.ts',
      'src/admin/admin-auth-limits.ts',
      'src/customer/{customer-permissions,session-storage}.ts',
      'src/store/{ordering,usage-aggregates}.ts',
      'src/store/redis/{check-connection,cluster-check-channel,deadline,resp,scripts}.ts',
    ],
    // The key and member actions: what the admin and customer APIs call, off both paths.
    ignores: ['src/keys/key-actions.ts', 'src/accounts/{action-deps,audit-trail,member-actions}.ts'],
    rules: {
      'no-restricted-syntax': [
        'error',
        {
          selector: ":function ObjectExpression[properties.0.type='SpreadElement'][properties.length>1]",
          message:
            'On the hot path, an object literal must not start with a spread followed by more members: V8 11.3 makes a new hidden class for each such object (see eslint.config.mjs). Put named members first, or list the fields.',
        },
      ],
    },
  },
  {
    files: ['**/*.js'],
    ignores: ['src/web/**'],
    languageOptions: { sourceType: 'commonjs', globals: globals.node },
  },
  {
    // The dashboard pages' browser code: ES modules served as written, with browser globals only. Type-aware like the
    // TypeScript (src/web/tsconfig.json checks their JSDoc types), and user data only ever goes in as text.
    files: ['src/web/**/*.js'],
    extends: [tseslint.configs.recommendedTypeChecked],
    languageOptions: {
      sourceType: 'module',
      globals: globals.browser,
      parserOptions: {
        projectService: true,
        tsconfigRootDir: import.meta.dirname,
      },
    },
    rules: {
      'no-restricted-properties': [
        'error',
        ...['innerHTML', 'outerHTML'].map((property) => ({ property, message: 'Build elements with ../shared/dom.js: text only.' })),
        { property: 'insertAdjacentHTML', message: 'Build elements with ../shared/dom.js: text only.' },
        { object: 'document', property: 'write', message: 'Build elements with ../shared/dom.js: text only.' },
        { object: 'window', property: 'localStorage', message: 'Secrets stay in this tab only (sessionStorage).' },
        { object: 'document', property: 'cookie', message: 'The page sets no cookie of its own.' },
      ],
      'no-restricted-globals': [
        'error',
        { name: 'localStorage', message: 'Secrets stay in this tab only (sessionStorage).' },
        { name: 'eval', message: 'The CSP forbids it.' },
      ],
      'no-implied-eval': 'error',
      'no-new-func': 'error',
    },
  },
  {
    files: ['**/*.mjs'],
    languageOptions: { sourceType: 'module', globals: globals.node },
  },
  prettier,
);
