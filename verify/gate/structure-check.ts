// The layer structure the three model files state (layer types, ratios, window, head sizes) must
// agree too: a rope table only means something for the layers it is applied to, and the sliding
// window is part of the block geometry. Same rule as the tables: the majority wins, a tie goes to
// the decoder, every other file is named with its field.
import type { PlaceName, PlaceStructure } from './places.ts'

/** One structural field on which a file disagrees with the majority. */
export interface StructureDifference {
  place: PlaceName
  file: string
  field: string
  value: string
  consensusValue: string
  against: PlaceName
}

const FIELDS: ReadonlyArray<{ key: keyof PlaceStructure, config: string, sidecar: string }> = [
  { key: 'layerTypes', config: 'layer_types', sidecar: 'layers[].layerType' },
  { key: 'compressRatios', config: 'compress_ratios', sidecar: 'layers[].compressRatio' },
  { key: 'slidingWindow', config: 'sliding_window', sidecar: 'slidingWindow' },
  { key: 'headDim', config: 'head_dim', sidecar: 'headDim' },
  { key: 'indexHeadDim', config: 'index_head_dim', sidecar: 'indexHeadDim' },
  { key: 'hiddenSize', config: 'hidden_size', sidecar: 'hiddenSize' },
]

function show (v: unknown): string {
  if (Array.isArray(v)) return v.length > 8 ? `[${v.slice(0, 8).join(', ')}, ... (${v.length})]` : `[${v.join(', ')}]`
  return String(v)
}

/** Every structural field on which a file differs from the majority of `places`. */
export function checkStructure (places: ReadonlyArray<{ name: PlaceName, file: string, structure: PlaceStructure }>): StructureDifference[] {
  const out: StructureDifference[] = []
  for (const f of FIELDS) {
    const byValue = new Map<string, PlaceName[]>()
    for (const p of places) {
      const key = JSON.stringify(p.structure[f.key])
      byValue.set(key, [...(byValue.get(key) ?? []), p.name])
    }
    if (byValue.size < 2) continue
    const rank = (g: PlaceName[]) => g.length * 2 + (g.includes('decoder') ? 1 : 0)
    const [consensus] = [...byValue.values()].sort((x, y) => rank(y) - rank(x))
    const reference = places.find((p) => p.name === (consensus.includes('decoder') ? 'decoder' : consensus[0]))!
    for (const p of places) {
      if (consensus.includes(p.name)) continue
      out.push({
        place: p.name,
        file: p.file,
        field: p.name === 'sidecar' ? f.sidecar : f.config,
        value: show(p.structure[f.key]),
        consensusValue: show(reference.structure[f.key]),
        against: reference.name,
      })
    }
  }
  return out
}
