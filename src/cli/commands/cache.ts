// `pd-bridge cache scan|quarantine DIR`: look at a block store (with --verify, check every block's
// content against its digest), and move blocks of another geometry aside (a rename into
// DIR/_quarantine/<run>/, never a delete).
import { Command } from 'commander'
import { PdBridgeError } from '../../errors.ts'
import { quarantineForeignGeometry, surveyBlockDir, verifyBlockDir } from '../../decode/store/index.ts'
import { blockKeyFromEnv } from '../../config/block-key.ts'

function countBy<T> (items: readonly T[], key: (x: T) => string): [string, number][] {
  const m = new Map<string, number>()
  for (const x of items) m.set(key(x), (m.get(key(x)) ?? 0) + 1)
  return [...m].sort((p, q) => q[1] - p[1] || (p[0] < q[0] ? -1 : 1))
}

const scan = new Command('scan')
  .description('list what a block store holds: blocks by model, geometry, block size and format; unreadable files; leftover temporary files. With --verify, also read every block and check its content against its digest (exit 1 if any block fails)')
  .argument('<dir>', 'a block store root')
  .option('--verify', 'read every block whole and check it against its content_sha256 (and, with PD_BLOCK_KEY or PD_API_KEY set, its content_hmac_sha256); list corrupt, unverified and unauthenticated blocks; exit 1 when any block fails')
  .action(async (dir: string, opts: { verify?: boolean }) => {
    const survey = await surveyBlockDir(dir)
    const readable = survey.blocks.filter((b) => b.info !== undefined)
    const bytes = survey.blocks.reduce((a, b) => a + b.fileSize, 0)
    const out = process.stdout
    out.write(`${dir}: ${survey.blocks.length} block files, ${bytes} bytes\n`)
    for (const [model, n] of countBy(readable, (b) => b.info?.modelName ?? '')) out.write(`  model ${JSON.stringify(model)}: ${n}\n`)
    for (const [geometry, n] of countBy(readable, (b) => b.info?.geometryFingerprint ?? '(none)')) out.write(`  geometry ${geometry}: ${n}\n`)
    for (const [size, n] of countBy(readable, (b) => String(b.info?.blockSize))) out.write(`  block size ${size}: ${n}\n`)
    for (const [version, n] of countBy(readable, (b) => b.info?.formatVersion ?? '')) out.write(`  format ${version}: ${n}\n`)
    for (const b of survey.blocks) if (b.problem !== undefined) out.write(`  unreadable ${b.path}: ${b.problem}\n`)
    for (const t of survey.temps) out.write(`  temporary file ${t.path} (writer pid ${t.pid})\n`)
    if (opts.verify !== true) return
    // With the deployment's block key in this shell, blocks are checked as a decoder with that key checks them.
    const v = await verifyBlockDir(dir, blockKeyFromEnv()?.key)
    for (const b of v.blocks) {
      if (b.status === 'corrupt') out.write(`  CORRUPT ${b.hash} ${b.path}: ${b.problem}\n`)
      else if (b.status === 'unverified') out.write(`  UNVERIFIED ${b.hash} ${b.path}: ${b.problem}\n`)
      else if (b.status === 'unauthenticated') out.write(`  UNAUTHENTICATED ${b.hash} ${b.path}: ${b.problem}\n`)
    }
    const bad = v.corrupt + v.unverified + v.unreadable + v.unauthenticated
    const keyed = v.authenticated ? `, ${v.unauthenticated} unauthenticated (keyed digests checked with the block key from the environment)` : ''
    out.write(`verify: ${v.ok}/${v.blocks.length} block(s) match their content digest; ${v.corrupt} corrupt, ${v.unverified} without a digest, ${v.unreadable} unreadable${keyed}\n`)
    // A decoder refuses, counts and quarantines each of these on first use; none is ever served.
    if (bad > 0) process.exitCode = 1
  })

const quarantine = new Command('quarantine')
  .description('move every block whose geometry fingerprint is not --geometry (including blocks with none) into DIR/_quarantine/<run>/; renames only, never deletes')
  .argument('<dir>', 'a block store root')
  .requiredOption('--geometry <fingerprint>', 'the geometry fingerprint blocks must carry to stay (from the sidecar)')
  .option('--model-name <name>', 'only consider blocks of this model (the directory may be shared)')
  .option('--include-unreadable', 'also move files that cannot be read as blocks')
  .option('--dry-run', 'say what would move; move nothing')
  .action(async (dir: string, opts: { geometry: string, modelName?: string, includeUnreadable?: boolean, dryRun?: boolean }) => {
    if (!/^[0-9a-f]{64}$/.test(opts.geometry)) throw new PdBridgeError(`--geometry must be 64 lowercase hex digits, got ${JSON.stringify(opts.geometry)}`)
    const report = await quarantineForeignGeometry(dir, {
      geometryFingerprint: opts.geometry,
      modelName: opts.modelName,
      includeUnreadable: opts.includeUnreadable === true,
      dryRun: opts.dryRun === true,
    })
    const out = process.stdout
    const verb = opts.dryRun === true ? 'would move' : 'moved'
    for (const m of report.moved) out.write(`${verb} ${m.hash} (${m.why}) -> ${m.to}\n`)
    for (const u of report.unreadable) out.write(`unreadable ${u.path}: ${u.problem}${u.movedTo === undefined ? '' : ` -> ${u.movedTo}`}\n`)
    out.write(`${verb} ${report.moved.length} block(s)${report.moved.length > 0 ? ` to ${report.runDir}` : ''}; kept ${report.kept}; other models ${report.otherModels}; unreadable ${report.unreadable.length}\n`)
  })

/** The cache command group. */
export const cacheCommand = new Command('cache')
  .description('inspect a decoder block store, and quarantine blocks built under another geometry')
  .addCommand(scan)
  .addCommand(quarantine)
