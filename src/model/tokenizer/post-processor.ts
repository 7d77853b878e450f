// The post-processor decides what add_special_tokens adds around a single sequence: a
// TemplateProcessing's special tokens, nothing for ByteLevel (it only trims offsets), and the
// composition of a Sequence.
import { ConfigError } from '../../errors.ts'

/** The single-sequence template: ids to add, and 'A' where the sequence goes. */
export type Template = Array<{ id: number } | 'A'>

type Json = Record<string, unknown>
const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v)

function templateProcessing (post: Json, added: ReadonlyArray<{ content: string, id: number }>, where: string, file: string): Template {
  if (!Array.isArray(post.single)) throw new ConfigError(`${where}.single`, 'must be an array', file)
  const specials = isObject(post.special_tokens) ? post.special_tokens : {}
  return post.single.flatMap((piece: unknown, i: number): Template => {
    if (isObject(piece) && isObject(piece.Sequence) && piece.Sequence.id === 'A') return ['A']
    if (isObject(piece) && isObject(piece.SpecialToken) && typeof piece.SpecialToken.id === 'string') {
      const entry = specials[piece.SpecialToken.id]
      if (isObject(entry) && Array.isArray(entry.ids) && entry.ids.every((x) => Number.isInteger(x))) {
        return (entry.ids as number[]).map((id) => ({ id }))
      }
      const a = added.find((t) => t.content === (piece.SpecialToken as Json).id)
      if (a) return [{ id: a.id }]
    }
    throw new ConfigError(`${where}.single[${i}]`, 'must be Sequence A or a known SpecialToken', file)
  })
}

function parse (post: unknown, added: ReadonlyArray<{ content: string, id: number }>, where: string, file: string): Template {
  if (post == null) return ['A']
  if (!isObject(post)) throw new ConfigError(where, 'must be an object', file)
  if (post.type === 'TemplateProcessing') return templateProcessing(post, added, where, file)
  if (post.type === 'ByteLevel') return ['A']
  if (post.type === 'Sequence' && Array.isArray(post.processors)) {
    // Each step wraps what the steps before it made.
    return post.processors.reduce<Template>((inner, p: unknown, i: number) => {
      return parse(p, added, `${where}.processors[${i}]`, file).flatMap((piece) => piece === 'A' ? inner : [piece])
    }, ['A'])
  }
  throw new ConfigError(where, 'must be null, TemplateProcessing, ByteLevel or a Sequence of them', file)
}

/** Read the post_processor section as a single-sequence template. */
export function parsePostProcessor (post: unknown, added: ReadonlyArray<{ content: string, id: number }>, file: string): Template {
  return parse(post, added, 'post_processor', file)
}
