// The normalizers of tokenizer.json a byte-level BPE checkpoint may carry: none, an empty Sequence
// (DeepSeek's), Unicode normal forms, Lowercase, and Replace of a literal string.
import { ConfigError } from '../../errors.ts'

/** Normalizes one piece of text that is not an added token. */
export type Normalize = (text: string) => string

type Json = Record<string, unknown>
const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v)

function parse (json: unknown, where: string, file: string): Normalize[] {
  if (!isObject(json)) throw new ConfigError(where, 'must be an object', file)
  switch (json.type) {
    case 'Sequence':
      if (!Array.isArray(json.normalizers)) throw new ConfigError(`${where}.normalizers`, 'must be an array', file)
      return json.normalizers.flatMap((n: unknown, i: number) => parse(n, `${where}.normalizers[${i}]`, file))
    case 'NFC': case 'NFD': case 'NFKC': case 'NFKD': {
      const form = json.type
      return [(t) => t.normalize(form)]
    }
    case 'Lowercase':
      return [(t) => t.toLowerCase()]
    case 'Replace': {
      const pattern = json.pattern
      if (!isObject(pattern) || typeof pattern.String !== 'string' || pattern.String === '' || typeof json.content !== 'string') {
        throw new ConfigError(`${where}.pattern`, 'only a non-empty {"String": ...} pattern with a string content is supported', file)
      }
      const from = pattern.String
      const to = json.content
      return [(t) => t.split(from).join(to)]
    }
    default:
      throw new ConfigError(`${where}.type`, `normalizer ${JSON.stringify(json.type)} is not supported (Sequence, NFC, NFD, NFKC, NFKD, Lowercase, Replace are)`, file)
  }
}

/** Read the normalizer section; undefined when it changes nothing (null or an empty Sequence). */
export function parseNormalizer (json: unknown, file: string): Normalize | undefined {
  if (json == null) return undefined
  const steps = parse(json, 'normalizer', file)
  if (steps.length === 0) return undefined
  return (text) => steps.reduce((t, step) => step(t), text)
}
