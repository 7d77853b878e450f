// cos/sin rows for the forward, per rope kind, grown on demand. transformers' bf16 model (the fp32
// model cast with .to(bfloat16)) holds inv_freq as a bf16 buffer, forms the angles in fp32 from
// it, and casts cos and sin to the activation dtype; the two switches reproduce that.
import { NumericsError } from '../../errors.ts'
import { roundBf16 } from '../../numerics/bf16.ts'
import type { DeepseekV4Config, RopeParams } from '../config.ts'
import { ropeInvFreq } from '../rope.ts'

const fround = Math.fround

/** Which table a layer uses: `main` for sliding layers, `compress` for CSA / HCA layers and their compressors. */
export type RopeKind = 'main' | 'compress'

class GrowingTable {
  cos = new Float32Array(0)
  sin = new Float32Array(0)
  rows = 0
  readonly inv: Float32Array
  readonly half: number

  constructor (p: RopeParams, invFreqBf16: boolean, private readonly bf16: boolean) {
    if (p.attentionFactor !== 1) throw new NumericsError(`rope: attention factor ${p.attentionFactor} is not supported by the engine (DeepSeek-V4 uses 1)`)
    const inv = ropeInvFreq(p)
    this.inv = invFreqBf16 ? inv.map(roundBf16) : inv
    this.half = inv.length
  }

  ensure (rows: number): void {
    if (rows <= this.rows) return
    const target = Math.max(rows, this.rows * 2, 256)
    const cos = new Float32Array(target * this.half)
    const sin = new Float32Array(target * this.half)
    cos.set(this.cos)
    sin.set(this.sin)
    for (let r = this.rows; r < target; r++) {
      const pos = fround(r)
      for (let k = 0; k < this.half; k++) {
        const angle = fround(pos * this.inv[k])
        let c = fround(Math.cos(angle))
        let s = fround(Math.sin(angle))
        if (this.bf16) {
          c = roundBf16(c)
          s = roundBf16(s)
        }
        cos[r * this.half + k] = c
        sin[r * this.half + k] = s
      }
    }
    this.cos = cos
    this.sin = sin
    this.rows = target
  }
}

/** The main and compress rope tables of one model under one profile. */
export class RopeTables {
  private readonly tables: Record<RopeKind, GrowingTable>

  /** invFreqBf16: inv_freq rounded to bf16 first (a buffer cast with a bf16 model); cosSinBf16: cos and sin rounded to bf16. */
  /** Only the config's rope pair is read, so a sidecar (which carries just that) builds the same tables. */
  constructor (cfg: Pick<DeepseekV4Config, 'rope'>, opts: { invFreqBf16: boolean, cosSinBf16: boolean }) {
    this.tables = {
      main: new GrowingTable(cfg.rope.main, opts.invFreqBf16, opts.cosSinBf16),
      compress: new GrowingTable(cfg.rope.compress, opts.invFreqBf16, opts.cosSinBf16),
    }
  }

  /** The table of `kind` covering positions [0, rows) (views valid until the next call). */
  table (kind: RopeKind, rows: number): { cos: Float32Array, sin: Float32Array, half: number } {
    const t = this.tables[kind]
    t.ensure(rows)
    return { cos: t.cos, sin: t.sin, half: t.half }
  }
}
