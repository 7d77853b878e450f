// The doctor's checklist: one named check per link or promise, each pass, warn, fail or skip
// with one sentence. The verdict fails when any check fails.

/** How a check came out. `skip`: it could not be judged (a link it needs is down, or not configured). */
export type CheckStatus = 'pass' | 'warn' | 'fail' | 'skip'

/** One line of the checklist. */
export interface CheckResult {
  name: string
  status: CheckStatus
  detail: string
}

/** The whole report. */
export interface DoctorReport {
  /** What was checked: a config file or an embedded state directory. */
  source: string
  checks: CheckResult[]
  ok: boolean
  /** One line: all good, or the failures by name. */
  verdict: string
}

/** Collects results in order. */
export class Checklist {
  readonly checks: CheckResult[] = []

  add (name: string, status: CheckStatus, detail: string): void {
    this.checks.push({ name, status, detail })
  }

  pass (name: string, detail: string): void { this.add(name, 'pass', detail) }
  warn (name: string, detail: string): void { this.add(name, 'warn', detail) }
  fail (name: string, detail: string): void { this.add(name, 'fail', detail) }
  skip (name: string, detail: string): void { this.add(name, 'skip', detail) }

  /** The report with its verdict line. */
  report (source: string): DoctorReport {
    const failed = this.checks.filter((c) => c.status === 'fail')
    const warned = this.checks.filter((c) => c.status === 'warn')
    const verdict = failed.length === 0
      ? `healthy: ${this.checks.filter((c) => c.status === 'pass').length} checks passed` + (warned.length > 0 ? `, ${warned.length} warning${warned.length > 1 ? 's' : ''} (${warned.map((c) => c.name).join(', ')})` : '')
      : `${failed.length} of ${this.checks.length} checks failed: ${failed.map((c) => c.name).join(', ')}`
    return { source, checks: this.checks, ok: failed.length === 0, verdict }
  }
}

const MARK: Record<CheckStatus, string> = { pass: 'ok  ', warn: 'warn', fail: 'FAIL', skip: 'skip' }

/** The checklist as text: one line per check, then the verdict. */
export function renderReport (r: DoctorReport): string {
  const width = Math.max(...r.checks.map((c) => c.name.length), 4)
  const lines = r.checks.map((c) => `  ${MARK[c.status]}  ${c.name.padEnd(width)}  ${c.detail}`)
  return `pd-bridge doctor: ${r.source}\n${lines.join('\n')}\n${r.ok ? 'verdict: ' : 'verdict: FAILED, '}${r.verdict}\n`
}
