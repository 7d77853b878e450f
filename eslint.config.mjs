// Lint (issue #19): ESLint's and typescript-eslint's recommended rules on every TypeScript file and
// plain-JavaScript script, plus a line length. Layering (who may import whom) is dependency-cruiser's
// job: .dependency-cruiser.cjs.
import js from '@eslint/js'
import globals from 'globals'
import tseslint from 'typescript-eslint'

export default tseslint.config(
  { ignores: ['node_modules/**', 'native/build/**', 'harness/mlx/.work/**', 'harness/mlx/.omlx/**', 'results/**', '.scratch/**', '.device-carry/**', '.device-state/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: { globals: { ...globals.node } },
    linterOptions: { reportUnusedDisableDirectives: 'error' },
    rules: {
      'max-len': ['error', { code: 220, ignoreUrls: true, ignoreStrings: true, ignoreTemplateLiterals: true, ignoreRegExpLiterals: true }],
      // Terminal escapes and control characters are matched on purpose (progress lines, path checks).
      'no-control-regex': 'off',
      // `catch {}` is how a best-effort clean-up says "nothing to do"; other empty blocks are not.
      'no-empty': ['error', { allowEmptyCatch: true }],
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_', ignoreRestSiblings: true, caughtErrors: 'none' }],
    },
  },
  {
    // Tests read JSON bodies and records whose shape the assertions themselves check.
    files: ['suites/**'],
    rules: { '@typescript-eslint/no-explicit-any': 'off' },
  },
)
