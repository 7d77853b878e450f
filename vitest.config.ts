import { defineConfig } from 'vitest/config'

export default defineConfig({
  test: {
    include: ['suites/**/*.test.ts'],
    pool: 'forks',
    // Two cores here: more workers only fight over them.
    maxWorkers: 2,
    testTimeout: 60_000,
    hookTimeout: 120_000,
    // Progress lines appear after a wall-clock interval (src/progress): off for every test and the
    // processes tests start, so no output depends on how loaded the machine is. Tests of progress
    // itself choose their mode explicitly.
    env: { PD_PROGRESS: 'off' },
  },
})
