// Cache geometry: blocks already in the decoder's store that were built under another geometry
// (an old rope table, window or profile). The store refuses them as hits, but they stay on disk,
// take its space, and a forced or older reader would serve them: the seed served 88,064 tokens of
// old-rope blocks after the fix. The gate counts them; with fix it moves them aside (a rename into
// <store>/_quarantine/<run>/, never a delete).
import { quarantineForeignGeometry, surveyBlockDir } from '../../src/decode/store/index.ts'
import { fmt, type Finding } from './finding.ts'

/** What the store holds, by geometry. */
export interface StoreSurvey {
  root: string
  expectedGeometry: string
  blocks: number
  matching: number
  /** Geometry fingerprint ('(none)' for blocks without one) -> block count, for blocks of other geometries. */
  foreign: Map<string, number>
  otherModels: number
  unreadable: number
  /** Matching-geometry blocks of another block size (served by no store of this block size). */
  otherBlockSize: number
}

/** Options of the store check. */
export interface StoreCheckOptions {
  /** The decoder's geometry fingerprint: Geometry.fromConfig(decoder config, decoder profile).fingerprint (src/wire/geometry.ts). */
  geometry: string
  /** Only blocks of this model name count (a store may be shared). */
  modelName?: string
  blockSize?: number
  /** Quarantine foreign blocks (rename, never delete). */
  fix?: boolean
}

/** Count the store's blocks by geometry. */
export async function surveyStore (root: string, options: StoreCheckOptions): Promise<StoreSurvey> {
  const survey = await surveyBlockDir(root)
  const out: StoreSurvey = { root, expectedGeometry: options.geometry, blocks: 0, matching: 0, foreign: new Map(), otherModels: 0, unreadable: 0, otherBlockSize: 0 }
  for (const b of survey.blocks) {
    if (b.info === undefined) {
      out.unreadable++
      continue
    }
    if (options.modelName !== undefined && b.info.modelName !== options.modelName) {
      out.otherModels++
      continue
    }
    out.blocks++
    const g = b.info.geometryFingerprint ?? '(none)'
    if (g === options.geometry) {
      out.matching++
      if (options.blockSize !== undefined && b.info.blockSize !== options.blockSize) out.otherBlockSize++
    } else {
      out.foreign.set(g, (out.foreign.get(g) ?? 0) + 1)
    }
  }
  return out
}

/** The store findings: foreign blocks (fail, or moved aside with fix), and what else was seen. */
export async function checkStore (root: string, options: StoreCheckOptions): Promise<{ survey: StoreSurvey, findings: Finding[], quarantinedTo?: string }> {
  const survey = await surveyStore(root, options)
  const findings: Finding[] = []
  // Filed under the block metadata key that tells the geometries apart.
  const add = (rule: string, status: Finding['status'], message: string) => findings.push({ check: 'store', rule, status, file: root, field: rule === 'geometry' ? 'geometry_fingerprint' : undefined, message })
  const foreignCount = [...survey.foreign.values()].reduce((a, n) => a + n, 0)
  const byGeometry = [...survey.foreign].map(([g, n]) => `${fmt(n)} under ${g === '(none)' ? 'no geometry fingerprint' : g.slice(0, 16)}`).join(', ')
  let quarantinedTo: string | undefined
  if (foreignCount === 0) {
    add('geometry', 'pass', `${fmt(survey.blocks)} block(s), all under the decoder's geometry ${options.geometry.slice(0, 16)}`)
  } else if (options.fix === true) {
    const report = await quarantineForeignGeometry(root, { geometryFingerprint: options.geometry, modelName: options.modelName })
    quarantinedTo = report.moved.length > 0 ? report.runDir : undefined
    add('geometry', 'pass', `moved ${fmt(report.moved.length)} block(s) of other geometries (${byGeometry}) to ${report.runDir} (renamed, not deleted); kept ${fmt(report.kept)}`)
  } else {
    add('geometry', 'fail', `${fmt(foreignCount)} of ${fmt(survey.blocks)} block(s) were built under another geometry (${byGeometry}); the decoder's is ${options.geometry.slice(0, 16)}: they are refused as hits but stay on disk; move them aside with --fix (rename, never delete)`)
  }
  if (survey.otherBlockSize > 0) add('block-size', 'warn', `${fmt(survey.otherBlockSize)} block(s) of this geometry have another block size than ${fmt(options.blockSize ?? 0)}: no store of this block size serves them`)
  if (survey.unreadable > 0) add('unreadable', 'warn', `${fmt(survey.unreadable)} file(s) cannot be read as blocks (pd-bridge cache scan lists them)`)
  return { survey, findings, quarantinedTo }
}
