// `pd-bridge results`: regenerate RESULTS.md, the charts, the needle heatmaps and report.html from
// the run records, the micro-benchmark records, the needle run records, the fault protocol records, the
// load protocol records, the warm-extend protocol records and the two-host protocol records.
import { Command } from 'commander'
import { defaultFaultsDir, defaultLoadDir, defaultMicroDir, defaultNeedleDir, defaultTwoHostDir, defaultWarmDir, defaultAdversaryDir, generateResults } from '../results/generate.ts'

interface ResultsFlags {
  runs: string
  micro?: string
  needle?: string
  faults?: string
  load?: string
  warm?: string
  twoHost?: string
  adversary?: string
  out: string
}

/** The results command. */
export const resultsCommand = new Command('results')
  .description('read every cold-prompt run record, micro-benchmark record, needle run record, fault protocol record, load protocol record, warm-extend protocol record, two-host protocol record and adversary protocol record and regenerate RESULTS.md, the SVG charts and heatmaps, and report.html (docs/BENCHMARK-PROTOCOL.md)')
  .option('--runs <dir>', 'directory of cold-prompt run records (*.json)', 'results/runs')
  .option('--micro <dir>', 'directory of micro-benchmark records (*.json) (default: micro/ next to --runs)')
  .option('--needle <dir>', 'directory of needle run records (*.json) (default: needle/runs/ next to --runs)')
  .option('--faults <dir>', 'directory of fault protocol records (*.json) (default: faults/ next to --runs)')
  .option('--load <dir>', 'directory of load protocol records (*.json) (default: load/ next to --runs)')
  .option('--warm <dir>', 'directory of warm-extend protocol records (*.json) (default: warm/ next to --runs)')
  .option('--two-host <dir>', 'directory of two-host protocol records (*.json) (default: two-host/ next to --runs)')
  .option('--adversary <dir>', 'directory of adversary protocol records (*.json) (default: adversary/ next to --runs)')
  .option('--out <dir>', 'where RESULTS.md, report.html, the charts and the heatmaps go', 'results')
  .action(async (flags: ResultsFlags) => {
    const micro = flags.micro ?? defaultMicroDir(flags.runs)
    const needle = flags.needle ?? defaultNeedleDir(flags.runs)
    const faults = flags.faults ?? defaultFaultsDir(flags.runs)
    const load = flags.load ?? defaultLoadDir(flags.runs)
    const warm = flags.warm ?? defaultWarmDir(flags.runs)
    const twoHost = flags.twoHost ?? defaultTwoHostDir(flags.runs)
    const adversary = flags.adversary ?? defaultAdversaryDir(flags.runs)
    const r = await generateResults(flags.runs, flags.out, micro, needle, faults, load, warm, twoHost, adversary)
    process.stdout.write(`${r.records} run records, ${r.microRecords} micro-benchmark records, ${r.needleRecords} needle records, ${r.faultsRecords} faults records, ${r.loadRecords} load records, ${r.loadLevelsRecords} load-levels records, ${r.warmRecords} warm records, ${r.twoHostRecords} two-host records, ${r.adversaryRecords} adversary records, ${r.batchRecords} batched-decode records, ${r.environments} environments: wrote ${r.files.map((f) => `${flags.out}/${f}`).join(', ')}\n`)
  })
