// `pd-bridge verify-blocks DIR_A DIR_B`: are two block stores the same, tensor by tensor?
import { Command } from 'commander'
import { compareBlockDirs } from '../../decode/store/index.ts'

/** Differences printed per block before the rest are counted. */
const SHOWN_PER_BLOCK = 20

/** The verify-blocks command: exit 0 only when every block is identical (created_at aside). */
export const verifyBlocksCommand = new Command('verify-blocks')
  .description('compare two block-store directories: blocks paired by hash, metadata (all but created_at), tensors by name, dtype, shape and value; exit 0 only when all are identical')
  .argument('<dirA>', 'a block store root (holds 0/ .. f/)')
  .argument('<dirB>', 'another block store root')
  .action(async (dirA: string, dirB: string) => {
    const report = await compareBlockDirs(dirA, dirB)
    const out = process.stdout
    for (const block of report.blocks) {
      if (block.status === 'identical') {
        out.write(`${block.hash}  identical\n`)
        continue
      }
      out.write(`${block.hash}  ${block.status === 'different' ? 'DIFFERENT' : block.status === 'only-a' ? 'ONLY IN A' : 'ONLY IN B'}\n`)
      if (block.status !== 'different') continue
      for (const d of block.differences.slice(0, SHOWN_PER_BLOCK)) out.write(`  ${d}\n`)
      if (block.differences.length > SHOWN_PER_BLOCK) out.write(`  ... and ${block.differences.length - SHOWN_PER_BLOCK} more differences\n`)
    }
    if (report.total === 0) out.write(`no blocks found in ${dirA} or ${dirB}\n`)
    out.write(`${report.identical}/${report.total} identical\n`)
    // Nothing compared proves nothing: only a non-empty, all-identical comparison passes.
    process.exitCode = report.total > 0 && report.identical === report.total ? 0 : 1
  })
