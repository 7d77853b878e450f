import { createHash } from 'node:crypto'
import { describe, expect, it } from 'vitest'
import { ConfigError } from '../../src/errors.ts'
import { combinedGeometry, geometryFromDecoderHealth, geometryFromFlag, geometryFromFrontHealth } from '../../verify/needle/geometry.ts'

const STORE = '1'.repeat(64)
const SIDECAR = '2'.repeat(64)
const STALE_SIDECAR = '3'.repeat(64)

function frontHealth (sidecar: string | null) {
  return {
    ok: true,
    links: {
      store: { ok: true, dir: '/x', model_name: 'm', block_size: 256, geometry_fingerprint: STORE, blocks: 0, bytes: 0 },
      sidecar: sidecar === null ? { ok: false, dir: null } : { ok: true, dir: '/s', fingerprint: sidecar, block_size: 256, profile: 'decoder' },
    },
    routing: { block_size: 256 },
  }
}

describe('the ledger geometry of a deployment', () => {
  it('from a front door: the store and the sidecar fingerprints together', () => {
    expect(geometryFromFrontHealth(frontHealth(SIDECAR))).toEqual({ fingerprint: combinedGeometry(STORE, SIDECAR), source: 'front-door', store: STORE, sidecar: SIDECAR, label: null, blockSize: 256 })
    expect(combinedGeometry(STORE, SIDECAR)).toBe(createHash('sha256').update(`pd-bridge/needle-geometry/v1\nstore ${STORE}\nsidecar ${SIDECAR}\n`).digest('hex'))
  })

  it('a stale sidecar under an unchanged store is another geometry (the bridged rows differ)', () => {
    expect(geometryFromFrontHealth(frontHealth(STALE_SIDECAR))!.fingerprint).not.toBe(geometryFromFrontHealth(frontHealth(SIDECAR))!.fingerprint)
  })

  it('without a sidecar, the store fingerprint alone; without a store fingerprint, none', () => {
    expect(geometryFromFrontHealth(frontHealth(null))!.fingerprint).toBe(STORE)
    expect(geometryFromFrontHealth({ links: { store: { ok: false, dir: null } } })).toBeUndefined()
    expect(geometryFromFrontHealth('not json')).toBeUndefined()
  })

  it('from a decoder alone: its geometry_fingerprint and cache block size', () => {
    expect(geometryFromDecoderHealth({ geometry_fingerprint: STORE, cache: { block_size: 128 } })).toEqual({ fingerprint: STORE, source: 'decoder', store: STORE, sidecar: null, label: null, blockSize: 128 })
    expect(geometryFromDecoderHealth({ geometry_fingerprint: 'short' })).toBeUndefined()
  })

  it('from --geometry: 64 hex digits as they are, any other text hashed, empty refused', () => {
    expect(geometryFromFlag(STORE).fingerprint).toBe(STORE)
    const g = geometryFromFlag('yarn 32 over 1024')
    expect(g.fingerprint).toMatch(/^[0-9a-f]{64}$/)
    expect(g.fingerprint).not.toBe(geometryFromFlag('yarn 16 over 1024').fingerprint)
    expect(g.label).toBe('yarn 32 over 1024')
    expect(() => geometryFromFlag(' ')).toThrow(ConfigError)
  })
})
