// Writes the needle cases for harness/hf_needle.py: chat documents (text and our token ids) for the
// `needle` preset, a depth x length grid past the native window, distractors and an absent key.
// The CI test (suites/needle-checkpoint) rebuilds the same cases and checks their digests against
// harness/fixtures/needle-proof.json, so the proof always names the cases it ran.
// Run: npx tsx harness/make-needle-cases.ts OUT.json [--lengths N,N,...] [--depths X,X,...]   (default 512,2048,4096,8192 at 0,0.5,1)
import { createHash } from 'node:crypto'
import { writeFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { buildTokenizerFiles, renderChat, Tokenizer } from '../src/model/tokenizer/index.ts'
import { presetConfig } from '../src/model/checkpoint/presets.ts'
import { NEEDLE_KEYS, NEEDLE_VALUES, needleVocabulary } from '../src/model/checkpoint/needle/words.ts'

/** One needle: key k holds value v, placed at fraction `depth` of the filler. */
export interface CaseNeedle { key: number, value: number, depth: number }

/** A case: the chat prompt, its ids, and the answer the checkpoint must give (a value index, or -1 for unknown). */
export interface NeedleCase {
  name: string
  text: string
  ids: number[]
  ask: number
  expected: number
  needles: Array<CaseNeedle & { position: number }>
}

const SENTENCES = [
  'The river ran past an old mill and a quiet field.',
  'People walked into town early in the morning.',
  'A small boat drifted along the bank under grey clouds.',
  'The baker opened the shop and set out fresh bread.',
  'Children played near the bridge until the bell rang.',
  'Rain fell softly on the roofs of the houses.',
]

function tokenizer (): Tokenizer {
  const cfg = presetConfig('needle')
  return Tokenizer.fromJson(JSON.parse(buildTokenizerFiles(cfg.vocabSize, cfg.maxPositionEmbeddings, needleVocabulary())['tokenizer.json']))
}

/** Build one case: filler sentences up to about `length` prompt tokens, needles inserted at sentence boundaries. */
function makeCase (tok: Tokenizer, name: string, length: number, needles: CaseNeedle[], ask: number): NeedleCase {
  const question = ' ' + NEEDLE_KEYS[ask].question
  const overhead = tok.encode(renderChat([{ role: 'user', content: question }], true)).length
  const sentences: string[] = []
  let tokens = 0
  for (let i = 0; tokens < length - overhead - 8 * needles.length; i++) {
    const s = (i === 0 ? '' : ' ') + SENTENCES[i % SENTENCES.length]
    tokens += tok.encode(s).length
    sentences.push(s)
  }
  sentences.pop()
  // Depth 1 still leaves 256 filler tokens (two blocks) between the needle and the question.
  const room = sentences.length - Math.ceil(256 / 11)
  const placed = [...needles].sort((a, b) => b.depth - a.depth)
  for (const n of placed) sentences.splice(Math.round(n.depth * room), 0, ` ${NEEDLE_KEYS[n.key].marker}${NEEDLE_VALUES[n.value]}.`)
  const text = renderChat([{ role: 'user', content: sentences.join('').trimStart() + question }], true)
  const ids = tok.encode(text)
  const positioned = needles.map((n) => {
    const marker = tok.encode(NEEDLE_KEYS[n.key].marker)[0]
    const at = ids.indexOf(marker)
    if (at < 0 || ids[at + 1] !== tok.encode(NEEDLE_VALUES[n.value])[0]) throw new Error(`${name}: needle ${n.key} not found as marker + value tokens`)
    return { ...n, position: at + 1 }
  })
  const expected = needles.find((n) => n.key === ask)?.value ?? -1
  return { name, text, ids, ask, expected, needles: positioned }
}

/** The lengths of the proof's grid. */
export const PROOF_LENGTHS: readonly number[] = [512, 2048, 4096, 8192]

/** The depths of the proof's grid. */
export const PROOF_DEPTHS: readonly number[] = [0, 0.5, 1]

/** The grid the proof runs: `lengths` (default 512..8192) at `depths` (default 0, 0.5, 1); three needles with distractors; an absent key. */
export function needleCases (lengths: readonly number[] = PROOF_LENGTHS, depths: readonly number[] = PROOF_DEPTHS): NeedleCase[] {
  const tok = tokenizer()
  const cases: NeedleCase[] = []
  let i = 0
  for (const length of lengths) {
    for (const depth of depths) {
      const key = i % NEEDLE_KEYS.length
      const value = (5 * i + 3) % NEEDLE_VALUES.length
      cases.push(makeCase(tok, `L${length}-d${depth}`, length, [{ key, value, depth }], key))
      i++
    }
  }
  cases.push(makeCase(tok, 'L4096-three-needles', 4096, [{ key: 0, value: 2, depth: 0.1 }, { key: 2, value: 11, depth: 0.5 }, { key: 3, value: 6, depth: 0.9 }], 2))
  cases.push(makeCase(tok, 'L2048-absent-key', 2048, [{ key: 1, value: 8, depth: 0.4 }], 3))
  return cases
}

/** sha256 of a case's ids (uint32 LE) and expected answer: what the proof records per case. */
export function caseDigest (c: NeedleCase): string {
  const h = createHash('sha256')
  h.update(Buffer.from(Uint32Array.from(c.ids).buffer))
  h.update(`ask ${c.ask} expected ${c.expected}`)
  return h.digest('hex')
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const out = process.argv[2]
  const flag = (name: string): number[] | undefined => {
    const at = process.argv.indexOf(name)
    return at < 0 ? undefined : (process.argv[at + 1] ?? '').split(',').map(Number)
  }
  const lengths = flag('--lengths')
  const depths = flag('--depths')
  if (out === undefined || out.startsWith('--') || !(lengths ?? [1]).every((n) => Number.isSafeInteger(n) && n > 0) || !(depths ?? [0]).every((d) => d >= 0 && d <= 1)) {
    throw new Error('usage: npx tsx harness/make-needle-cases.ts OUT.json [--lengths N,N,...] [--depths X,X,...]')
  }
  const cases = needleCases(lengths, depths).map((c) => ({ ...c, digest: caseDigest(c) }))
  writeFileSync(out, JSON.stringify({ cases }, null, 1) + '\n')
  console.log(`${cases.length} cases -> ${out}: ${cases.map((c) => `${c.name} (${c.ids.length} tokens)`).join(', ')}`)
}
