// `pd-bridge results`: regenerate RESULTS.md, the charts and report.html from the run records and
// the micro-benchmark records.
import { Command } from 'commander'
import { defaultMicroDir, generateResults } from '../../results/generate.ts'

interface ResultsFlags {
  runs: string
  micro?: string
  out: string
}

/** The results command. */
export const resultsCommand = new Command('results')
  .description('read every cold-prompt run record and micro-benchmark record and regenerate RESULTS.md, the SVG charts and report.html (docs/BENCHMARK-PROTOCOL.md)')
  .option('--runs <dir>', 'directory of cold-prompt run records (*.json)', 'results/runs')
  .option('--micro <dir>', 'directory of micro-benchmark records (*.json) (default: micro/ next to --runs)')
  .option('--out <dir>', 'where RESULTS.md, report.html and the charts go', 'results')
  .action(async (flags: ResultsFlags) => {
    const micro = flags.micro ?? defaultMicroDir(flags.runs)
    const r = await generateResults(flags.runs, flags.out, micro)
    process.stdout.write(`${r.records} run records, ${r.microRecords} micro-benchmark records, ${r.environments} environments: wrote ${r.files.map((f) => `${flags.out}/${f}`).join(', ')}\n`)
  })
