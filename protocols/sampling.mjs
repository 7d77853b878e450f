#!/usr/bin/env node
// Seeded sampling, bridged vs native, in full (the long form of suites/stack/sampling.test.ts): for
// each decoder kind, the embedded stack and a second decoder of that kind with an empty store; for
// every parameter set of harness/sampling/bridged-vs-native.ts and --prompts fresh prompts per set,
// the same request bridged through the front door and native; the sampled ids must be equal token
// for token. Then, per kind, a request without a seed: the drawn seed, returned through the front
// door, repeats the answer. Prints one line per case; exit 0 when every case holds, 1 otherwise.
//
//   node protocols/sampling.mjs [--engines ours,llama.cpp] [--prompts 2] [--tokens 600]
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { argv } from 'zx'
import { register } from 'tsx/esm/api'
import { checkArgv, helpAndExit, integerFlag, usageError } from './flags.mjs'

const USAGE = `Usage: node protocols/sampling.mjs [options]

Seeded sampling through the embedded stack, bridged vs native, for each decoder kind: every parameter
set of harness/sampling/bridged-vs-native.ts on --prompts fresh prompts, then a request without a seed
whose drawn seed must repeat the answer. One line per case; exit 0 when every case holds.

  --engines LIST     decoder kinds, comma-separated (default ours,llama.cpp)
  --prompts N        fresh prompts per parameter set (default 2)
  --tokens N         prompt size in tokens, at least two blocks of 256 (default 600)
  --max-tokens N     the answer budget (default 12)
  --seed N           the first prompt seed (default 500)
  --state-dir DIR    where the checkpoints and sidecars are made or reused (default: a temporary folder)
  --leg-timeout-s N  per request (default 900)
  -h, --help         this text (nothing is started or written)
`
helpAndExit(USAGE)
checkArgv('sampling', argv, {
  engines: 'string', prompts: 'string', tokens: 'string', 'max-tokens': 'string', seed: 'string', 'state-dir': 'string', 'leg-timeout-s': 'string',
})

const BLOCK = 256
const opts = {
  engines: String(argv.engines ?? 'ours,llama.cpp').split(',').map((s) => s.trim()).filter((s) => s !== ''),
  prompts: integerFlag('sampling', 'prompts', argv.prompts ?? 2, 1),
  tokens: integerFlag('sampling', 'tokens', argv.tokens ?? 600, 2 * BLOCK),
  maxTokens: integerFlag('sampling', 'max-tokens', argv['max-tokens'] ?? 12, 2),
  seed: integerFlag('sampling', 'seed', argv.seed ?? 500, 0),
  stateDir: argv['state-dir'] === undefined ? undefined : String(argv['state-dir']),
  legTimeoutMs: integerFlag('sampling', 'leg-timeout-s', argv['leg-timeout-s'] ?? 900, 1) * 1000,
}
if (opts.engines.length === 0) usageError('sampling', '--engines names no decoder kind')

register()
// The decoder kinds the embedded stack starts (demo's --decoder), checked by that parser before anything starts.
const { stackDecoderOption } = await import('../src/cli/commands/serve.ts')
for (const e of opts.engines) {
  try {
    stackDecoderOption(e)
  } catch (err) {
    usageError('sampling', err.message.replace(/^--decoder /, '--engines '))
  }
}
const { startEmbeddedStack, startNativeLeg } = await import('../src/stack/embedded.ts')
const { loadTokenizer } = await import('../src/model/tokenizer/index.ts')
const { PARAMETER_SETS, bridgedVsNative, drawnSeedRepeats } = await import('../harness/sampling/bridged-vs-native.ts')

const say = (line) => process.stdout.write(`${line}\n`)
const scratch = await mkdtemp(join(tmpdir(), 'pd-sampling-'))
const stateDir = opts.stateDir ?? join(scratch, 'state')
let held = 0
let failed = 0

function report (label, c) {
  if (c.problems.length === 0) {
    held++
    say(`  ok    ${label}: ${c.bridged.ids.length} identical tokens`)
  } else {
    failed++
    say(`  FAIL  ${label}: ${c.problems.join('; ')}`)
  }
}

try {
  for (const engine of opts.engines) {
    say(`sampling: decoder ${engine}, ${PARAMETER_SETS.length} parameter sets x ${opts.prompts} prompts of ${opts.tokens} tokens`)
    const stack = await startEmbeddedStack({ stateDir, home: join(scratch, engine), decoderEngine: engine, port: 0 })
    let native
    try {
      native = await startNativeLeg(stack, 'sampling')
      const target = { frontUrl: stack.urls.front, nativeUrl: native.url, modelName: stack.modelName, tokenizer: await loadTokenizer(stack.checkpoint.dir), timeoutMs: opts.legTimeoutMs }
      let promptSeed = opts.seed
      for (const set of PARAMETER_SETS) {
        for (let p = 0; p < opts.prompts; p++, promptSeed++) {
          report(`${set.name}, prompt seed ${promptSeed}`, await bridgedVsNative(target, set.params, promptSeed, opts.tokens, opts.maxTokens, undefined))
        }
      }
      report(`no seed, prompt seed ${promptSeed}: the drawn seed repeats the answer`, await drawnSeedRepeats(target, promptSeed, opts.tokens, opts.maxTokens))
    } finally {
      await stack.stop()
      // The native leg's store lives under the state directory: gone once its decoder is.
      await native?.remove()
    }
  }
} finally {
  await rm(scratch, { recursive: true, force: true })
}
say(`sampling: ${held}/${held + failed} cases hold${failed === 0 ? '' : `, ${failed} FAILED`}`)
process.exit(failed === 0 ? 0 : 1)
