import { defineConfig } from 'vitest/config'

export default defineConfig({
  test: {
    include: ['suites/**/*.test.ts'],
    pool: 'forks',
    // Two cores here: more workers only fight over them.
    maxWorkers: 2,
    testTimeout: 60_000,
    hookTimeout: 120_000,
  },
})
