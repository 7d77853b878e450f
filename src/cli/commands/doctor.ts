// `pd-bridge doctor`: the checklist of a deployment (a front door config) or of the embedded
// stack (its state directory). Exit 0 when no check fails, 1 when one does.
import { Command } from 'commander'
import { renderReport } from '../../stack/doctor/checks.ts'
import { runDoctor } from '../../stack/doctor/doctor.ts'
import { resolveStateDir } from '../../stack/state-dir.ts'
import { integerOption, requireNativeKernels } from './serve.ts'

/** The doctor command. */
export const doctorCommand = new Command('doctor')
  .description('check every link of a deployment: reachability, versions, sidecar fingerprint vs decoder geometry, limits, store writable, clocks; exit 1 when any check fails')
  .option('--config <file>', 'the front door config of the deployment (default: the embedded stack of the state directory)')
  .option('--state-dir <dir>', 'the embedded stack\'s state directory (default $PD_STATE_DIR or ~/.cache/pd-bridge)')
  .option('--timeout <ms>', 'deadline of each link request (default: the config\'s deadlines.linkMs)', integerOption('--timeout', 1))
  .option('--json', 'print the report as JSON')
  .action(async (opts: { config?: string, stateDir?: string, timeout?: number, json?: boolean }) => {
    // The embedded stack runs on this checkout's native kernels; a deployment (--config) runs elsewhere.
    if (opts.config === undefined) requireNativeKernels('doctor')
    const report = await runDoctor({ config: opts.config, stateDir: resolveStateDir(opts.stateDir), timeoutMs: opts.timeout })
    process.stdout.write(opts.json === true ? JSON.stringify(report, null, 2) + '\n' : renderReport(report))
    process.exitCode = report.ok ? 0 : 1
  })
