// A vitest reporter that writes one line per test file: project, file, and where its time went
// (vitest's JSON report gives only the tests' own time, not the beforeAll hooks or the import).
// Used to classify files into projects (docs/testing.md); add it next to the usual reporter:
//   PD_TIMING_OUT=/tmp/timing.tsv npx vitest run --reporter=default --reporter=./suites/support/timing-reporter.ts
// Columns (milliseconds): project, file, total, setup (environment + prepare + setup files),
// collect (import the file and its dependencies), run (tests and hooks), tests, state.
import { writeFileSync } from 'node:fs'
import { relative } from 'node:path'
import type { Reporter, TestModule } from 'vitest/node'

export default class TimingReporter implements Reporter {
  private readonly rows: string[] = []

  onTestModuleEnd (m: TestModule): void {
    const d = m.diagnostic()
    const setup = d.environmentSetupDuration + d.prepareDuration + d.setupDuration
    const total = setup + d.collectDuration + d.duration
    let tests = 0
    for (const _ of m.children.allTests()) tests++
    const r = Math.round
    this.rows.push([m.project.name || '-', relative(process.cwd(), m.moduleId), r(total), r(setup), r(d.collectDuration), r(d.duration), tests, m.state()].join('\t'))
  }

  onTestRunEnd (): void {
    const out = process.env.PD_TIMING_OUT
    const text = 'project\tfile\ttotal_ms\tsetup_ms\tcollect_ms\trun_ms\ttests\tstate\n' + this.rows.sort().join('\n') + '\n'
    if (out !== undefined && out !== '') writeFileSync(out, text)
    else process.stdout.write(text)
  }
}
