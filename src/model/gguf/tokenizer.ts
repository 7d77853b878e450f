// The tokenizer section of the GGUF: the checkpoint's own byte-level BPE tokenizer.json as
// llama.cpp's `gpt2` vocabulary (tokens in id order, token types, merges in rank order, bos/eos/pad,
// whether bos is prepended) with the `gpt-2` pre-tokenizer, whose split is the GPT-2 regex our
// tokenizer (and Hugging Face's ByteLevel pre-tokenizer) uses. Or, for a checkpoint without a
// tokenizer, a placeholder vocabulary that only serves token ids.
import { readFile, stat } from 'node:fs/promises'
import { join } from 'node:path'
import type { GgufValue } from '../../formats/gguf/index.ts'
import { structureSections, type Tokenizer } from '../tokenizer/index.ts'
import type { DeepseekV4Config } from '../config.ts'
import { GgufExportError } from './deepseek4.ts'

/** llama.cpp's llama_token_type numbers. */
export const TOKEN_TYPE = { NORMAL: 1, UNKNOWN: 2, CONTROL: 3, USER_DEFINED: 4, UNUSED: 5, BYTE: 6 } as const

type Json = Record<string, unknown>
const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v)

async function readJson (file: string): Promise<unknown | undefined> {
  try {
    if (!(await stat(file)).isFile()) return undefined
  }
  catch {
    return undefined
  }
  try {
    return JSON.parse(await readFile(file, 'utf8'))
  }
  catch (err) {
    throw new GgufExportError(`${file}: not valid JSON: ${(err as Error).message}`)
  }
}

function firstEos (cfg: DeepseekV4Config): number | null {
  return Array.isArray(cfg.eosTokenId) ? (cfg.eosTokenId[0] ?? null) : cfg.eosTokenId
}

// Whether the post-processor prepends bos (TemplateProcessing [bos, A]) or adds nothing (none, or [A]).
function addsBos (post: unknown, bosContent: string | undefined, file: string): boolean {
  if (post == null) return false
  const single = isObject(post) && post.type === 'TemplateProcessing' && Array.isArray(post.single) ? post.single : undefined
  const seq = (p: unknown) => isObject(p) && isObject(p.Sequence) && p.Sequence.id === 'A'
  const special = (p: unknown) => isObject(p) && isObject(p.SpecialToken) ? p.SpecialToken.id : undefined
  if (single !== undefined && single.length === 1 && seq(single[0])) return false
  if (single !== undefined && single.length === 2 && seq(single[1]) && special(single[0]) === bosContent && bosContent !== undefined) return true
  throw new GgufExportError(`${file}: post_processor: only "prepend bos" or nothing can be written as llama.cpp's add_bos_token / add_eos_token`)
}

/**
 * llama.cpp's pre-tokenizer name, which picks both the split regex and whether detokenizing cleans
 * up spaces before punctuation (Hugging Face's clean_up_tokenization_spaces). Both names below split
 * with the GPT-2 regex (llama.cpp's hand-written unicode_regex_split_custom_gpt2) and differ in
 * nothing else: `gpt-2` cleans up, `trillion` does not. Hugging Face's default is not to clean up.
 */
export function preTokenizerName (tokenizerConfig: Record<string, unknown>): 'gpt-2' | 'trillion' {
  return tokenizerConfig.clean_up_tokenization_spaces === true ? 'gpt-2' : 'trillion'
}

const sameJson = (a: unknown, b: unknown) => JSON.stringify(a) === JSON.stringify(b)

/**
 * llama.cpp's name for a tokenizer.json's split: ByteLevel with the GPT-2 regex (preTokenizerName),
 * or DeepSeek's exact Sequence of three Splits and ByteLevel, which llama.cpp knows as `deepseek-v3`
 * (the same three patterns, no space clean-up). Anything else has no llama.cpp equivalent.
 */
export function ggufPreTokenizer (json: Record<string, unknown>, tokenizerConfig: Record<string, unknown>, file: string): string {
  const pre = json.pre_tokenizer
  const emptyNormalizer = json.normalizer == null || sameJson(json.normalizer, { type: 'Sequence', normalizers: [] })
  if (emptyNormalizer && sameJson(pre, structureSections('deepseek-v3').pre_tokenizer) && tokenizerConfig.clean_up_tokenization_spaces !== true) return 'deepseek-v3'
  if (json.normalizer == null && isObject(pre) && pre.type === 'ByteLevel' && pre.use_regex !== false && pre.add_prefix_space !== true) return preTokenizerName(tokenizerConfig)
  throw new GgufExportError(`${file}: pre_tokenizer/normalizer: only ByteLevel with the GPT-2 regex (no prefix space) or DeepSeek's Split sequence have a llama.cpp pre-tokenizer`)
}

/**
 * The `tokenizer.*` keys for the checkpoint in `dir`, whose tokenizer.json loaded as `tokenizer`.
 * Ids past the tokenizer's last one (a config vocab_size larger than the tokenizer) are written as
 * unused `[PAD<id>]` tokens, as llama.cpp's converter does.
 */
export async function tokenizerMetadata (dir: string, cfg: DeepseekV4Config, tokenizer: Tokenizer): Promise<Array<[string, GgufValue]>> {
  const file = join(dir, 'tokenizer.json')
  const json = await readJson(file)
  if (!isObject(json) || !isObject(json.model)) throw new GgufExportError(`${file}: no model section`)
  const added = new Map<number, boolean>()
  for (const a of Array.isArray(json.added_tokens) ? json.added_tokens : []) {
    if (isObject(a) && typeof a.id === 'number') added.set(a.id, a.special === true)
  }
  const tokens: string[] = []
  const types: number[] = []
  for (let id = 0; id < cfg.vocabSize; id++) {
    const token = tokenizer.idToToken(id)
    if (token === undefined) {
      tokens.push(`[PAD${id}]`)
      types.push(TOKEN_TYPE.UNUSED)
      continue
    }
    tokens.push(token)
    types.push(!added.has(id) ? TOKEN_TYPE.NORMAL : added.get(id) === true ? TOKEN_TYPE.CONTROL : TOKEN_TYPE.USER_DEFINED)
  }
  const config = await readJson(join(dir, 'tokenizer_config.json'))
  const configObject = isObject(config) ? config : {}
  const merges: string[] = []
  const rawMerges = Array.isArray(json.model.merges) ? json.model.merges : []
  for (const [rank, m] of rawMerges.entries()) {
    const pair = typeof m === 'string' ? m.split(' ') : m
    if (!Array.isArray(pair) || pair.length !== 2 || pair.some((p) => typeof p !== 'string' || p === '' || p.includes(' '))) {
      throw new GgufExportError(`${file}: model.merges[${rank}]: llama.cpp stores a merge as "left right", so neither part may be empty or hold a space`)
    }
    merges.push(`${pair[0] as string} ${pair[1] as string}`)
  }
  const bos = cfg.bosTokenId
  const eos = firstEos(cfg)
  const bosContent = bos === null ? undefined : tokenizer.idToToken(bos)
  const kv: Array<[string, GgufValue]> = [
    ['tokenizer.ggml.model', { type: 'STRING', value: 'gpt2' }],
    ['tokenizer.ggml.pre', { type: 'STRING', value: ggufPreTokenizer(json, configObject, file) }],
    ['tokenizer.ggml.tokens', { type: 'ARRAY', itemType: 'STRING', value: tokens }],
    ['tokenizer.ggml.token_type', { type: 'ARRAY', itemType: 'INT32', value: types }],
    ['tokenizer.ggml.merges', { type: 'ARRAY', itemType: 'STRING', value: merges }],
  ]
  if (bos !== null) kv.push(['tokenizer.ggml.bos_token_id', { type: 'UINT32', value: bos }])
  if (eos !== null) kv.push(['tokenizer.ggml.eos_token_id', { type: 'UINT32', value: eos }])
  const pad = typeof configObject.pad_token === 'string' ? tokenizer.tokenToId(configObject.pad_token) : cfg.padTokenId ?? undefined
  if (pad !== undefined) kv.push(['tokenizer.ggml.padding_token_id', { type: 'UINT32', value: pad }])
  kv.push(
    ['tokenizer.ggml.add_bos_token', { type: 'BOOL', value: addsBos(json.post_processor, bosContent, file) }],
    ['tokenizer.ggml.add_eos_token', { type: 'BOOL', value: false }],
  )
  if (typeof configObject.chat_template === 'string') kv.push(['tokenizer.chat_template', { type: 'STRING', value: configObject.chat_template }])
  return kv
}

/**
 * A placeholder vocabulary for a checkpoint without tokenizer.json: `vocab_size` tokens `<id_N>`
 * as a `gpt2` vocabulary without merges, so llama.cpp can be fed token ids. Text tokenizes to
 * nothing useful. (A `llama` vocabulary would need the 256 `<0xHH>` byte tokens: llama.cpp's SPM
 * tokenizer throws out of a worker thread, killing the process, on a byte it cannot find.)
 */
export function idsOnlyTokenizerMetadata (cfg: DeepseekV4Config): Array<[string, GgufValue]> {
  const n = cfg.vocabSize
  const kv: Array<[string, GgufValue]> = [
    ['tokenizer.ggml.model', { type: 'STRING', value: 'gpt2' }],
    ['tokenizer.ggml.pre', { type: 'STRING', value: 'gpt-2' }],
    ['tokenizer.ggml.tokens', { type: 'ARRAY', itemType: 'STRING', value: Array.from({ length: n }, (_, i) => `<id_${i}>`) }],
    ['tokenizer.ggml.token_type', { type: 'ARRAY', itemType: 'INT32', value: new Array(n).fill(TOKEN_TYPE.NORMAL) }],
    ['tokenizer.ggml.merges', { type: 'ARRAY', itemType: 'STRING', value: [] }],
  ]
  if (cfg.bosTokenId !== null) kv.push(['tokenizer.ggml.bos_token_id', { type: 'UINT32', value: cfg.bosTokenId }])
  const eos = firstEos(cfg)
  if (eos !== null) kv.push(['tokenizer.ggml.eos_token_id', { type: 'UINT32', value: eos }])
  kv.push(['tokenizer.ggml.add_bos_token', { type: 'BOOL', value: false }], ['tokenizer.ggml.add_eos_token', { type: 'BOOL', value: false }])
  return kv
}
