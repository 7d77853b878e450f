import { createHash } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { describe, expect, it } from 'vitest'
import { ConfigError } from '../../src/errors.ts'
import {
  canonicalJson, getProfile, PROFILE_NAMES, profileFingerprint, REFERENCE_QUANT_SUFFIX, WEIGHT_FORMATS,
  WEIGHT_GROUPS, withReferenceQuant, type NumericsProfile,
} from '../../src/model/profiles/index.ts'

const DOC = readFileSync(new URL('../../docs/profiles.md', import.meta.url), 'utf8')

// The first markdown table after the marker comment, as rows of trimmed cells.
function docTable (marker: string): string[][] {
  const lines = DOC.slice(DOC.indexOf(marker)).split('\n').slice(1)
  const rows: string[][] = []
  for (const line of lines) {
    if (!line.startsWith('|')) {
      if (rows.length > 0) break
      continue
    }
    rows.push(line.split('|').slice(1, -1).map((c) => c.trim()))
  }
  return rows
}

describe('getProfile: every named profile resolves', () => {
  it('returns frozen data with its own name, version 1 and a known format per group', () => {
    for (const name of PROFILE_NAMES) {
      const p = getProfile(name)
      expect(p.name).toBe(name)
      expect(p.version).toBe(1)
      for (const g of WEIGHT_GROUPS) expect(WEIGHT_FORMATS).toContain(p.weights[g])
      expect(Object.isFrozen(p) && Object.isFrozen(p.weights) && Object.isFrozen(p.referenceQuant)).toBe(true)
      expect(() => { (p.weights as Record<string, string>).attention = 'f32' }).toThrow(TypeError)
      expect(getProfile(name)).toBe(p)
    }
  })

  it('holds the formats the brief asks for', () => {
    const f32 = getProfile('f32')
    expect(WEIGHT_GROUPS.every((g) => f32.weights[g] === 'f32')).toBe(true)
    expect([f32.activations, f32.matmulOrder]).toEqual(['f32', 'lanes8'])
    const hf = getProfile('hf-bf16')
    expect(WEIGHT_GROUPS.every((g) => hf.weights[g] === 'bf16')).toBe(true)
    expect([hf.activations, hf.vectors, hf.matmulOrder]).toEqual(['bf16', 'bf16', 'lanes8'])
    const dec = getProfile('decoder')
    expect(dec.weights).toEqual({
      embedding: 'bf16', lmHead: 'bf16', attention: 'mxfp8', compressor: 'bf16',
      indexerQ: 'bf16', router: 'bf16', experts: 'mxfp4', sharedExperts: 'mxfp8',
    })
    expect([dec.activations, dec.matmulOrder]).toEqual(['bf16', 'lanes8'])
    const pre = getProfile('prefill')
    expect([pre.weights.attention, pre.weights.experts, pre.weights.sharedExperts, pre.weights.compressor])
      .toEqual(['fp8-block128', 'fp8-block128', 'fp8-block128', 'bf16'])
    expect([pre.activations, pre.matmulOrder]).toEqual(['bf16', 'blocks128'])
    for (const name of PROFILE_NAMES) {
      expect(getProfile(name).referenceQuant).toEqual({ windowFp8: false, mainPoolFp8: false, indexerFp4: false })
    }
  })
})

describe('docs/profiles.md documents every profile', () => {
  it('has a table whose every cell equals the profile data', () => {
    const rows = docTable('<!-- profile-table')
    expect(rows[0]).toEqual(['field', ...PROFILE_NAMES])
    const byField = new Map(rows.slice(2).map((r) => [r[0], r.slice(1)]))
    const fields = [...WEIGHT_GROUPS, 'activations', 'vectors', 'matmulOrder', 'referenceQuant', 'version']
    expect([...byField.keys()]).toEqual(fields)
    PROFILE_NAMES.forEach((name, col) => {
      const p = getProfile(name)
      for (const g of WEIGHT_GROUPS) expect(byField.get(g)?.[col], `${name}.${g}`).toBe(p.weights[g])
      expect(byField.get('activations')?.[col]).toBe(p.activations)
      expect(byField.get('vectors')?.[col]).toBe(p.vectors)
      expect(byField.get('matmulOrder')?.[col]).toBe(p.matmulOrder)
      const rq = p.referenceQuant
      expect(byField.get('referenceQuant')?.[col]).toBe(rq.windowFp8 || rq.mainPoolFp8 || rq.indexerFp4 ? 'on' : 'off')
      expect(byField.get('version')?.[col]).toBe(String(p.version))
    })
  })

  it('lists each fingerprint in full', () => {
    for (const name of PROFILE_NAMES) expect(DOC).toContain(`| ${name} | \`${profileFingerprint(getProfile(name))}\` |`)
  })
})

describe('getProfile: the +refquant switch', () => {
  it('turns on all three round trips and changes nothing else', () => {
    for (const name of PROFILE_NAMES) {
      const base = getProfile(name)
      const rq = getProfile(`${name}${REFERENCE_QUANT_SUFFIX}`)
      expect(rq.name).toBe(`${name}+refquant`)
      expect(rq.referenceQuant).toEqual({ windowFp8: true, mainPoolFp8: true, indexerFp4: true })
      expect({ ...rq, name: base.name, referenceQuant: base.referenceQuant }).toEqual(base)
      expect(Object.isFrozen(rq.referenceQuant)).toBe(true)
      expect(profileFingerprint(rq)).not.toBe(profileFingerprint(base))
    }
  })

  it('withReferenceQuant takes single switches and never doubles the suffix', () => {
    const p = withReferenceQuant(getProfile('decoder'), { windowFp8: true, mainPoolFp8: false, indexerFp4: false })
    expect(p.referenceQuant).toEqual({ windowFp8: true, mainPoolFp8: false, indexerFp4: false })
    expect(withReferenceQuant(p).name).toBe('decoder+refquant')
  })
})

describe('getProfile: unknown names', () => {
  it('throws a ConfigError that names the profile and lists the known ones', () => {
    for (const bad of ['F32', 'bf16', '', 'decoder+refquant+refquant', '+refquant', 'decoder ']) {
      let err: unknown
      try { getProfile(bad) } catch (e) { err = e }
      expect(err).toBeInstanceOf(ConfigError)
      expect((err as Error).message).toContain(JSON.stringify(bad))
      expect((err as Error).message).toContain('f32, hf-bf16, decoder, prefill')
    }
  })

  it('throws a ConfigError, not a TypeError, for a non-string', () => {
    expect(() => getProfile(undefined as unknown as string)).toThrow(ConfigError)
    expect(() => getProfile(7 as unknown as string)).toThrow(/must be a string, got number/)
  })
})

describe('profileFingerprint', () => {
  const PINNED: Record<string, string> = {
    f32: 'd4eb2fd22cc570abc571ba50248a112bf6802df2120437dc064e2595070713cb',
    'hf-bf16': '81fb5c85eb4e7c580625f056fc11fbe06e1351c945505793375650fc62ceb3bd',
    decoder: 'e5d10dda505ef77baf1a5d14c1f38d6d4ef12387ff955852b9994f7f294edd21',
    prefill: 'b9f81586176d88ada0a25bc9d54af41cb6bc2f4538ce0635f9c862ff04c09cb6',
  }

  it('is pinned per profile (a change needs a version bump and new pins)', () => {
    for (const name of PROFILE_NAMES) expect(profileFingerprint(getProfile(name))).toBe(PINNED[name])
  })

  it('is sha256 of the canonical JSON shown in the docs', () => {
    const json = canonicalJson(getProfile('f32'))
    expect(DOC).toContain(json)
    expect(profileFingerprint(getProfile('f32'))).toBe(createHash('sha256').update(json).digest('hex'))
  })

  it('sorts keys at every level and ignores insertion order', () => {
    expect(canonicalJson({ b: 1, a: { d: [true, null], c: 'x' } })).toBe('{"a":{"c":"x","d":[true,null]},"b":1}')
    const p = getProfile('decoder')
    const reversed = Object.fromEntries(Object.entries({ ...p, weights: Object.fromEntries(Object.entries(p.weights).reverse()) }).reverse())
    expect(profileFingerprint(reversed as unknown as NumericsProfile)).toBe(profileFingerprint(p))
  })

  it('changes when any single field changes', () => {
    const base = getProfile('decoder')
    const variants: NumericsProfile[] = [
      { ...base, name: 'decoder2' },
      { ...base, version: 2 },
      { ...base, activations: 'f32' },
      { ...base, vectors: 'bf16' },
      { ...base, matmulOrder: 'blocks128' },
      ...WEIGHT_GROUPS.map((g) => ({ ...base, weights: { ...base.weights, [g]: base.weights[g] === 'f32' ? 'bf16' : 'f32' } })),
      ...(['windowFp8', 'mainPoolFp8', 'indexerFp4'] as const).map((k) => ({ ...base, referenceQuant: { ...base.referenceQuant, [k]: true } })),
    ]
    const prints = new Set([base, ...variants].map(profileFingerprint))
    expect(prints.size).toBe(variants.length + 1)
  })
})
