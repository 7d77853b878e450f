// The block writer's memory as the prompt grows. Run: npx tsx protocols/bench-writer.ts
// Preset `small` (max_position_embeddings 65536), a `decoder` sidecar at the deployed block size
// 2048. For 8K, 16K, 32K and 64K tokens a synthetic capture is made by feeding seeded random
// attention inputs through the capture hook layer by layer (no forward: the writer only cares that
// the files are real captures). Then, each in a fresh child process so its peak RSS is its own, the
// writer turns the capture into blocks: once from the local directory, once through the share
// (served by this process over loopback, spooled by the child). Reports the writer's peak held bytes
// (its own instrument), the child's peak RSS and its RSS after each block (after a forced GC, so
// garbage V8 has not yet collected is not counted), and the timings, and writes
// results/bench/writer-<date>.json. Nothing is asserted: times depend on the machine and its load.
import { spawn } from 'node:child_process'
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { cpus, loadavg, tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { CaptureSession, exportWeights } from '../src/capture/index.ts'
import { DecoderPrefixCache } from '../src/decode/prefix-cache/index.ts'
import { BlockWriter, type BlockWriterReport } from '../src/decode/writer/index.ts'
import { blockStoreTarget, captureFromShare, openCaptureWriter, type CaptureAtHand } from '../src/front/index.ts'
import { makeCheckpoint } from '../src/model/checkpoint/index.ts'
import { loadDeepseekV4Config } from '../src/model/config.ts'
import { startShareServer } from '../src/share/index.ts'
import { parseSidecarJson, SIDECAR_JSON } from '../src/wire/sidecar-format.ts'
import { helpAndExit, usageError } from './bench-cli.ts'

const LENGTHS = (process.env.PDB_BENCH_LENGTHS ?? '8192,16384,32768,65536').split(',').map(Number)
const BLOCK_SIZE = 2048
/** Rows per hook call when making a capture (the hook's result does not depend on it). */
const FEED_ROWS = 2048

/** What the child reports for one run. */
interface ChildResult {
  mode: 'local' | 'share'
  report: BlockWriterReport
  /** RSS when the writer was about to start (the process's baseline), and its peak over the run. */
  rssBeforeBytes: number
  maxRssBytes: number
  /** RSS after each block, each after a forced garbage collection: what the process really keeps. */
  rssAfterBlockBytes: number[]
  heapUsedAfterBytes: number
}

interface Row {
  tokens: number
  blocks: number
  captureBytes: number
  local: ChildResult
  share: ChildResult
}

function promptOf (tokens: number, vocab: number, seed: number): number[] {
  let s = seed >>> 0
  return Array.from({ length: tokens }, () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0
    return s % vocab
  })
}

// Seeded attention-input rows in about [-2, 2): the hook normalises them, their scale is immaterial.
function randomRows (count: number, hidden: number, seed: number): Float32Array {
  const out = new Float32Array(count * hidden)
  let s = seed >>> 0
  for (let i = 0; i < out.length; i++) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0
    out[i] = (s / 2 ** 30) - 2
  }
  return out
}

/** Child mode: open a store and run one writer; print the result as one JSON line. */
async function child (args: { mode: 'local' | 'share', modelDir: string, sidecarDir: string, captureDir: string, storeRoot: string, requestId: string, tokens: number, baseUrl?: string, spoolRoot?: string }): Promise<void> {
  const cfg = await loadDeepseekV4Config(args.modelDir)
  const json = parseSidecarJson(readFileSync(join(args.sidecarDir, SIDECAR_JSON), 'utf8'), join(args.sidecarDir, SIDECAR_JSON))
  const sidecar = { json, fingerprint: json.fingerprint }
  const target = await DecoderPrefixCache.open({ storeRoot: args.storeRoot, modelName: args.modelDir, cfg, profile: 'decoder', blockSize: BLOCK_SIZE, log: () => {} })
  const tokens = promptOf(args.tokens, cfg.vocabSize, args.tokens)
  const rssBeforeBytes = process.memoryUsage().rss
  const options = { target, sidecar, requestId: args.requestId, tokens }
  // Through the share, the front door's own path: spool the capture, then open the writer on it.
  const spooled = async (): Promise<CaptureAtHand> => await captureFromShare({
    baseUrl: args.baseUrl!, spoolRoot: args.spoolRoot!, pollMs: 20, requestId: args.requestId, tokenCount: tokens.length, sidecarFingerprint: sidecar.fingerprint,
  })
  const writer = args.mode === 'local'
    ? await BlockWriter.open(args.captureDir, options)
    : await openCaptureWriter(blockStoreTarget(target), await spooled(), { sidecar: { ...sidecar, dir: args.sidecarDir }, requestId: args.requestId, tokens })
  const gc = (globalThis as { gc?: () => void }).gc ?? (() => {})
  const rssAfterBlockBytes: number[] = []
  while (await writer.writeNext() !== null) {
    gc()
    rssAfterBlockBytes.push(process.memoryUsage().rss)
  }
  const report = await writer.finalize()
  const result: ChildResult = { mode: args.mode, report, rssBeforeBytes, maxRssBytes: process.resourceUsage().maxRSS * 1024, rssAfterBlockBytes, heapUsedAfterBytes: process.memoryUsage().heapUsed }
  process.stdout.write(JSON.stringify(result) + '\n')
}

async function runChild (args: Parameters<typeof child>[0]): Promise<ChildResult> {
  const script = fileURLToPath(import.meta.url)
  return await new Promise((resolve, reject) => {
    const p = spawn(process.execPath, ['--expose-gc', '--import', 'tsx', script, '--child', JSON.stringify(args)], { stdio: ['ignore', 'pipe', 'inherit'] })
    let out = ''
    p.stdout.on('data', (d: Buffer) => { out += d.toString() })
    p.on('error', reject)
    p.on('close', (code) => {
      if (code !== 0) reject(new Error(`writer child exited with ${code}`))
      else resolve(JSON.parse(out.trim().split('\n').pop()!) as ChildResult)
    })
  })
}

async function main (): Promise<void> {
  const root = mkdtempSync(join(tmpdir(), 'pd-bridge-bench-writer-'))
  const rows: Row[] = []
  try {
    const modelDir = join(root, 'small')
    await makeCheckpoint({ preset: 'small', seed: 1, out: modelDir })
    const sidecarDir = join(root, 'sidecar')
    const sidecar = await exportWeights({ model: modelDir, profile: 'decoder', out: sidecarDir, blockSize: BLOCK_SIZE })
    const captureRoot = join(root, 'captures')
    mkdirSync(captureRoot)
    const server = await startShareServer({ root: captureRoot, log: () => {} })
    try {
      for (const tokens of LENGTHS) {
        const requestId = `synthetic-${tokens}`
        let t0 = performance.now()
        // The capture names the prompt it belongs to (its tokens' digest): the same ids the writer child keys blocks under.
        const ids = promptOf(tokens, (await loadDeepseekV4Config(modelDir)).vocabSize, tokens)
        const session = await CaptureSession.start({ sidecar, captureRoot, requestId, tokenCount: tokens, tokens: ids })
        for (let layer = 0; layer < sidecar.numLayers; layer++) {
          for (let at = 0; at < tokens; at += FEED_ROWS) {
            const count = Math.min(FEED_ROWS, tokens - at)
            session.onAttentionInput(layer, at, randomRows(count, sidecar.json.hiddenSize, tokens * 1000 + layer * 100 + at / FEED_ROWS), count)
          }
        }
        const manifest = await session.finish()
        console.error(`T=${tokens}: capture ${((performance.now() - t0) / 1000).toFixed(1)} s, ${manifest.payloadBytes} B`)
        t0 = performance.now()
        const base = { modelDir, sidecarDir, captureDir: session.dir, requestId, tokens }
        const local = await runChild({ ...base, mode: 'local', storeRoot: join(root, `store-local-${tokens}`) })
        const share = await runChild({ ...base, mode: 'share', storeRoot: join(root, `store-share-${tokens}`), baseUrl: server.url, spoolRoot: join(root, `spool-${tokens}`) })
        console.error(`T=${tokens}: writer ${((performance.now() - t0) / 1000).toFixed(1)} s, peak held ${local.report.peakHeldBytes} B, child peak RSS ${(local.maxRssBytes / 2 ** 20).toFixed(1)} MiB (local) ${(share.maxRssBytes / 2 ** 20).toFixed(1)} MiB (share)`)
        rows.push({ tokens, blocks: local.report.blocks, captureBytes: manifest.payloadBytes, local, share })
        rmSync(join(root, `spool-${tokens}`), { recursive: true, force: true })
      }
    } finally {
      await server.close()
    }
  } finally {
    rmSync(root, { recursive: true, force: true })
  }

  const MiB = (n: number): number => Number((n / 2 ** 20).toFixed(1))
  console.table(rows.map((r) => ({
    T: r.tokens,
    blocks: r.blocks,
    'capture MiB': MiB(r.captureBytes),
    'peak held KiB': Math.round(r.local.report.peakHeldBytes / 1024),
    'RSS start MiB': MiB(r.local.rssBeforeBytes),
    'peak RSS MiB (local)': MiB(r.local.maxRssBytes),
    'peak RSS MiB (share)': MiB(r.share.maxRssBytes),
    'RSS after blocks, max MiB (local, GC)': MiB(Math.max(...r.local.rssAfterBlockBytes)),
    'ms / block': Number(((r.local.report.timings.read + r.local.report.timings.build + r.local.report.timings.write) / r.blocks).toFixed(1)),
    'verify ms': Math.round(r.local.report.timings.verify),
    'share: last layer -> first block ms': Math.round(r.share.report.timings.firstBlockAfterLastLayer),
  })))

  const date = new Date().toISOString().slice(0, 10)
  const dir = fileURLToPath(new URL('../results/bench/', import.meta.url))
  mkdirSync(dir, { recursive: true })
  const file = `${dir}writer-${date}.json`
  writeFileSync(file, JSON.stringify({
    protocol: 'bench-writer',
    date: new Date().toISOString(),
    machine: { cpu: cpus()[0]?.model ?? 'unknown', logicalCpus: cpus().length, node: process.version, loadAverage: loadavg(), note: process.env.PDB_BENCH_NOTE ?? null },
    setup: `preset small, decoder sidecar, block size ${BLOCK_SIZE}; synthetic captures from seeded random attention inputs through the hook; each writer run in its own child process (local directory, then through the share with a spool)`,
    rows,
  }, null, 2) + '\n')
  console.error(`wrote ${file}`)
}

const at = process.argv.indexOf('--child')
if (at >= 0) await child(JSON.parse(process.argv[at + 1]) as Parameters<typeof child>[0])
else {
  helpAndExit(`Usage: npx tsx protocols/bench-writer.ts

The block writer's memory as the prompt grows (preset small, a decoder sidecar, blocks of 2048):
for each length a synthetic capture, then the writer in a child process, from the directory and
through the share; prints a table and writes results/bench/writer-<date>.json. No options; the
lengths come from $PDB_BENCH_LENGTHS (default 8192,16384,32768,65536), the note from $PDB_BENCH_NOTE.

  -h, --help             this text (nothing is measured or written)
`)
  if (process.argv.length > 2) usageError('bench-writer', `takes no options, got ${JSON.stringify(process.argv[2])} (see --help)`)
  await main()
}
