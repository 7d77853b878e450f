// Reused-seed protection. The seed README's first post-fix needle retest "missed and meant
// nothing": its document shared ~100K leading tokens with an earlier run, so the decoder served
// 88,064 tokens of blocks cached under the old rope. This ledger remembers, for every needle or
// benchmark document that went through the decoder, the chained hashes of its full blocks and the
// geometry they were cached under. A new document whose leading blocks match an entry recorded
// under another geometry is flagged before it is run. The hashes are of token ids only (no model
// name), so a ledger can be shared by every protocol that feeds the decoder.
import { createHash } from 'node:crypto'
import { mkdir, readFile } from 'node:fs/promises'
import { dirname } from 'node:path'
import { ConfigError } from '../../src/errors.ts'
import { writeFileAtomic } from '../../src/formats/atomic-file.ts'

/** The format tag of a ledger file. */
export const SEED_LEDGER_FORMAT = 'pd-bridge-seed-ledger/1'

/** One document the decoder has seen. */
export interface LedgerEntry {
  /** Who ran it and how: e.g. "needle seed 301, 120K". */
  label: string
  /** The decoder store's geometry fingerprint the document was cached under. */
  geometry: string
  blockSize: number
  /** Token count of the document. */
  tokens: number
  /** Chained hashes (32 hex digits) of its full blocks, first block first. */
  blocks: string[]
  recordedAt: string
}

/** A document sharing leading blocks with a ledger entry. */
export interface SeedReuse {
  entry: LedgerEntry
  /** Leading full blocks the document shares with the entry. */
  sharedBlocks: number
  sharedTokens: number
  /** Whether the entry was cached under the geometry asked about (a cache hit, not a wrong one). */
  sameGeometry: boolean
}

/**
 * Chained hashes of the full blocks of `tokens`: h_k = sha256(h_{k-1} || block k's ids as uint32
 * LE), h_{-1} = sha256(tag, block size); each cut to 32 hex digits. Two documents share their
 * first n hashes exactly when they share their first n full blocks of tokens.
 */
export function documentBlockHashes (tokens: ArrayLike<number>, blockSize: number): string[] {
  if (!Number.isSafeInteger(blockSize) || blockSize < 1) throw new ConfigError('blockSize', `must be a positive integer, got ${String(blockSize)}`)
  let parent = createHash('sha256').update(`${SEED_LEDGER_FORMAT}\nblock size ${blockSize}\n`).digest()
  const out: string[] = []
  const full = Math.floor(tokens.length / blockSize)
  const bytes = new Uint8Array(blockSize * 4)
  const view = new DataView(bytes.buffer)
  for (let b = 0; b < full; b++) {
    for (let i = 0; i < blockSize; i++) {
      const id = tokens[b * blockSize + i]
      if (!Number.isSafeInteger(id) || id < 0 || id > 0xffffffff) throw new ConfigError('tokens', `token ${b * blockSize + i} is ${String(id)}, not a token id`)
      view.setUint32(4 * i, id, true)
    }
    parent = createHash('sha256').update(parent).update(bytes).digest()
    out.push(parent.toString('hex').slice(0, 32))
  }
  return out
}

function checkEntry (e: unknown, i: number, file: string): LedgerEntry {
  const field = (name: string) => `entries.${i}.${name}`
  if (e === null || typeof e !== 'object' || Array.isArray(e)) throw new ConfigError(`entries.${i}`, 'must be an object', file)
  const x = e as Record<string, unknown>
  if (typeof x.label !== 'string') throw new ConfigError(field('label'), 'must be a string', file)
  if (typeof x.geometry !== 'string' || !/^[0-9a-f]{64}$/.test(x.geometry)) throw new ConfigError(field('geometry'), 'must be 64 lowercase hex digits (a geometry fingerprint)', file)
  if (!Number.isSafeInteger(x.blockSize) || (x.blockSize as number) < 1) throw new ConfigError(field('blockSize'), 'must be a positive integer', file)
  if (!Number.isSafeInteger(x.tokens) || (x.tokens as number) < 0) throw new ConfigError(field('tokens'), 'must be a non-negative integer', file)
  if (!Array.isArray(x.blocks) || !x.blocks.every((h) => typeof h === 'string' && /^[0-9a-f]{32}$/.test(h))) throw new ConfigError(field('blocks'), 'must be a list of 32-hex-digit block hashes', file)
  if (x.blocks.length !== Math.floor((x.tokens as number) / (x.blockSize as number))) throw new ConfigError(field('blocks'), `lists ${x.blocks.length} blocks, but ${String(x.tokens)} tokens make ${Math.floor((x.tokens as number) / (x.blockSize as number))} full blocks`, file)
  if (typeof x.recordedAt !== 'string') throw new ConfigError(field('recordedAt'), 'must be a string', file)
  return { label: x.label, geometry: x.geometry, blockSize: x.blockSize as number, tokens: x.tokens as number, blocks: x.blocks as string[], recordedAt: x.recordedAt }
}

/** A ledger file: read on open, rewritten atomically on each record. One writer at a time. */
export class SeedLedger {
  private constructor (readonly file: string, private readonly list: LedgerEntry[]) {}

  /** Open `file`; a missing file is an empty ledger. A malformed one is a ConfigError naming the field. */
  static async open (file: string): Promise<SeedLedger> {
    let text: string
    try {
      text = await readFile(file, 'utf8')
    }
    catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') return new SeedLedger(file, [])
      throw new ConfigError('(file)', `cannot be read: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`, file)
    }
    let json: unknown
    try {
      json = JSON.parse(text)
    }
    catch (e) {
      throw new ConfigError('(json)', `not valid JSON: ${(e as Error).message}`, file)
    }
    const root = json as Record<string, unknown> | null
    if (root === null || typeof root !== 'object' || root.format !== SEED_LEDGER_FORMAT) {
      throw new ConfigError('format', `is ${JSON.stringify(root?.format) ?? 'missing'}, expected ${SEED_LEDGER_FORMAT}`, file)
    }
    if (!Array.isArray(root.entries)) throw new ConfigError('entries', 'must be a list', file)
    return new SeedLedger(file, root.entries.map((e, i) => checkEntry(e, i, file)))
  }

  /** The recorded documents, oldest first. */
  get entries (): readonly LedgerEntry[] {
    return this.list
  }

  /**
   * Every entry the document `tokens` shares at least one leading full block with (each entry
   * compared at its own block size), marked whether it was cached under `geometry`.
   */
  reuses (tokens: ArrayLike<number>, geometry: string): SeedReuse[] {
    const hashes = new Map<number, string[]>()
    const out: SeedReuse[] = []
    for (const entry of this.list) {
      let ours = hashes.get(entry.blockSize)
      if (ours === undefined) hashes.set(entry.blockSize, ours = documentBlockHashes(tokens, entry.blockSize))
      let n = 0
      while (n < ours.length && n < entry.blocks.length && ours[n] === entry.blocks[n]) n++
      if (n > 0) out.push({ entry, sharedBlocks: n, sharedTokens: n * entry.blockSize, sameGeometry: entry.geometry === geometry })
    }
    return out
  }

  /** The reuses under another geometry: the ones that make a test result meaningless. */
  foreignReuses (tokens: ArrayLike<number>, geometry: string): SeedReuse[] {
    return this.reuses(tokens, geometry).filter((r) => !r.sameGeometry)
  }

  /** Record a document the decoder cached under `geometry`, and write the ledger (atomically: temporary sibling, fsync, rename). */
  async record (label: string, tokens: ArrayLike<number>, geometry: string, blockSize: number): Promise<LedgerEntry> {
    const entry = checkEntry({ label, geometry, blockSize, tokens: tokens.length, blocks: documentBlockHashes(tokens, blockSize), recordedAt: new Date().toISOString() }, this.list.length, this.file)
    await mkdir(dirname(this.file), { recursive: true })
    await writeFileAtomic(this.file, JSON.stringify({ format: SEED_LEDGER_FORMAT, entries: [...this.list, entry] }, null, 1) + '\n')
    this.list.push(entry)
    return entry
  }
}
