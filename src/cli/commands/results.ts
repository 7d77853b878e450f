// `pd-bridge results`: regenerate RESULTS.md, the charts and report.html from the run records.
import { Command } from 'commander'
import { generateResults } from '../../results/generate.ts'

interface ResultsFlags {
  runs: string
  out: string
}

/** The results command. */
export const resultsCommand = new Command('results')
  .description('read every cold-prompt run record and regenerate RESULTS.md, the SVG charts and report.html (docs/BENCHMARK-PROTOCOL.md)')
  .option('--runs <dir>', 'directory of run records (*.json)', 'results/runs')
  .option('--out <dir>', 'where RESULTS.md, report.html and the charts go', 'results')
  .action(async (flags: ResultsFlags) => {
    const r = await generateResults(flags.runs, flags.out)
    process.stdout.write(`${r.records} records, ${r.environments} environments: wrote ${r.files.map((f) => `${flags.out}/${f}`).join(', ')}\n`)
  })
