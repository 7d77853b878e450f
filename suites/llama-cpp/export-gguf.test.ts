// export-gguf: what the GGUF holds, checked against what llama.cpp's deepseek4 loader
// (node-llama-cpp 3.22.1 = llama.cpp v0.5.0, src/models/deepseek4.cpp) reads, written out here by
// hand: every key it reads with the type it wants, every tensor name with its ggml dims (numpy
// shape reversed), the data bit for bit against the safetensors file itself (not through our
// loader), the weight types, the refusals (one line, exit code 2, no file), and `inspect FILE.gguf`.
import { execFile } from 'node:child_process'
import { copyFileSync, cpSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { parseGguf, readGgufHeader, type GgufHeader } from '../../src/formats/gguf/index.ts'
import { readSafetensors, viewAs } from '../../src/formats/safetensors/index.ts'
import { makeCheckpoint } from '../../src/model/checkpoint/index.ts'
import { parseDeepseekV4Config } from '../../src/model/config.ts'
import { checkExpressible, GgufExportError } from '../../src/model/gguf/index.ts'
import { decodeBf16 } from '../../src/numerics/bf16.ts'
import { repoPath } from './helpers.ts'

const run = promisify(execFile)
async function cli (...args: string[]): Promise<{ code: number, stdout: string, stderr: string }> {
  try {
    const { stdout, stderr } = await run(process.execPath, [repoPath('bin/pd-bridge.mjs'), ...args], { maxBuffer: 1 << 26 })
    return { code: 0, stdout, stderr }
  }
  catch (err) {
    const e = err as { code: number, stdout: string, stderr: string }
    return { code: e.code, stdout: e.stdout, stderr: e.stderr }
  }
}

let scratch: string
let tiny: string
const headers = new Map<string, GgufHeader>()
beforeAll(async () => {
  scratch = mkdtempSync(join(tmpdir(), 'pd-bridge-export-gguf-'))
  tiny = join(scratch, 'tiny')
  await makeCheckpoint({ preset: 'tiny', seed: 1, out: tiny })
  for (const type of ['f32', 'f16', 'bf16']) {
    const r = await cli('export-gguf', '--model', tiny, '--out', join(scratch, `tiny-${type}.gguf`), '--type', type)
    if (r.code !== 0) throw new Error(`export-gguf --type ${type} failed: ${r.stderr}`)
    headers.set(`tiny-${type}`, await readGgufHeader(join(scratch, `tiny-${type}.gguf`)))
  }
  const r = await cli('export-gguf', '--model', repoPath('harness/fixtures/hf-saved'), '--out', join(scratch, 'hf-saved.gguf'), '--type', 'bf16', '--ids-only')
  if (r.code !== 0) throw new Error(`export-gguf hf-saved failed: ${r.stderr}`)
  headers.set('hf-saved', await readGgufHeader(join(scratch, 'hf-saved.gguf')))
})
afterAll(() => rmSync(scratch, { recursive: true, force: true }))

const value = (h: GgufHeader, key: string) => h.metadata.get(key)

describe('metadata: every key the deepseek4 loader reads, typed as it reads them', () => {
  // tiny: vocab 512, hidden 256, 4 layers [sliding, CSA, HCA, CSA], 4 heads x 128 (rope 64), q_lora 128,
  // o 2 x 64, indexer 4 x 128 top 8, window 128, 8 experts top 2 (1 shared, 128), YaRN 32 over 1024.
  const expected: Array<[string, string, unknown]> = [
    ['general.architecture', 'STRING', 'deepseek4'],
    ['deepseek4.context_length', 'UINT32', 32768],
    ['deepseek4.embedding_length', 'UINT32', 256],
    ['deepseek4.embedding_length_out', 'UINT32', 1024],
    ['deepseek4.block_count', 'UINT32', 4],
    ['deepseek4.attention.head_count', 'UINT32', 4],
    ['deepseek4.attention.head_count_kv', 'UINT32', 1],
    ['deepseek4.attention.key_length', 'UINT32', 128],
    ['deepseek4.attention.value_length', 'UINT32', 128],
    ['deepseek4.attention.layer_norm_rms_epsilon', 'FLOAT32', Math.fround(1e-6)],
    ['deepseek4.attention.q_lora_rank', 'UINT32', 128],
    ['deepseek4.attention.sliding_window', 'UINT32', 128],
    ['deepseek4.attention.output_group_count', 'UINT32', 2],
    ['deepseek4.attention.output_lora_rank', 'UINT32', 64],
    ['deepseek4.attention.compress_ratios', 'ARRAY', [0, 4, 128, 4]],
    ['deepseek4.attention.compress_rope_freq_base', 'FLOAT32', 160000],
    ['deepseek4.attention.indexer.head_count', 'UINT32', 4],
    ['deepseek4.attention.indexer.key_length', 'UINT32', 128],
    ['deepseek4.attention.indexer.top_k', 'UINT32', 8],
    ['deepseek4.rope.dimension_count', 'UINT32', 64],
    ['deepseek4.rope.freq_base', 'FLOAT32', 10000],
    ['deepseek4.rope.scaling.type', 'STRING', 'yarn'],
    ['deepseek4.rope.scaling.factor', 'FLOAT32', 32],
    ['deepseek4.rope.scaling.original_context_length', 'UINT32', 1024],
    ['deepseek4.rope.scaling.yarn_beta_fast', 'FLOAT32', 32],
    ['deepseek4.rope.scaling.yarn_beta_slow', 'FLOAT32', 1],
    ['deepseek4.expert_count', 'UINT32', 8],
    ['deepseek4.expert_used_count', 'UINT32', 2],
    ['deepseek4.expert_shared_count', 'UINT32', 1],
    ['deepseek4.expert_feed_forward_length', 'UINT32', 128],
    ['deepseek4.expert_weights_scale', 'FLOAT32', 1.5],
    ['deepseek4.expert_weights_norm', 'BOOL', true],
    ['deepseek4.expert_gating_func', 'UINT32', 4],
    ['deepseek4.swiglu_clamp_exp', 'ARRAY', [10, 10, 10, 10]],
    ['deepseek4.swiglu_clamp_shexp', 'ARRAY', [10, 10, 10, 10]],
    ['deepseek4.hyper_connection.count', 'UINT32', 4],
    ['deepseek4.hyper_connection.sinkhorn_iterations', 'UINT32', 20],
    ['deepseek4.hyper_connection.epsilon', 'FLOAT32', Math.fround(1e-6)],
    ['deepseek4.hash_layer_count', 'UINT32', 1],
  ]
  it.each(expected)('%s is %s %j', (key, type, v) => {
    const got = value(headers.get('tiny-f32')!, key)
    expect(got?.type, key).toBe(type)
    expect(got?.value, key).toEqual(v)
  })

  it('the arrays: compress ratios u32, SwiGLU clamps f32 per layer', () => {
    const h = headers.get('tiny-f32')!
    expect(value(h, 'deepseek4.attention.compress_ratios')).toMatchObject({ itemType: 'UINT32' })
    expect(value(h, 'deepseek4.swiglu_clamp_exp')).toMatchObject({ itemType: 'FLOAT32' })
  })

  it('the tokenizer: gpt2 BPE with the GPT-2 split, 512 tokens, types, 251 merges, bos 0 prepended, eos 1, pad 4, the chat template', () => {
    const h = headers.get('tiny-f32')!
    const tokenizer = JSON.parse(readFileSync(join(tiny, 'tokenizer.json'), 'utf8')) as { model: { merges: string[][] }, added_tokens: Array<{ id: number }> }
    expect(value(h, 'tokenizer.ggml.model')?.value).toBe('gpt2')
    // "trillion": llama.cpp's GPT-2 split without clean_up_tokenization_spaces (tokenizer_config.json says false).
    expect(value(h, 'tokenizer.ggml.pre')?.value).toBe('trillion')
    const tokens = value(h, 'tokenizer.ggml.tokens')!.value as string[]
    expect(tokens).toHaveLength(512)
    expect(tokens.slice(0, 6)).toEqual(['<｜begin▁of▁sentence｜>', '<｜end▁of▁sentence｜>', '<｜User｜>', '<｜Assistant｜>', '<｜▁pad▁｜>', 'Ā'])
    const types = value(h, 'tokenizer.ggml.token_type')!
    expect(types.type === 'ARRAY' && types.itemType).toBe('INT32')
    const special = new Set(tokenizer.added_tokens.map((a) => a.id))
    expect((types.value as number[]).every((t, id) => t === (special.has(id) ? 3 : 1))).toBe(true)
    expect(value(h, 'tokenizer.ggml.merges')!.value).toEqual(tokenizer.model.merges.map((m) => m.join(' ')))
    expect(value(h, 'tokenizer.ggml.bos_token_id')).toEqual({ type: 'UINT32', value: 0 })
    expect(value(h, 'tokenizer.ggml.eos_token_id')).toEqual({ type: 'UINT32', value: 1 })
    expect(value(h, 'tokenizer.ggml.padding_token_id')).toEqual({ type: 'UINT32', value: 4 })
    expect(value(h, 'tokenizer.ggml.add_bos_token')).toEqual({ type: 'BOOL', value: true })
    expect(value(h, 'tokenizer.ggml.add_eos_token')).toEqual({ type: 'BOOL', value: false })
    expect(value(h, 'tokenizer.chat_template')?.value).toBe(JSON.parse(readFileSync(join(tiny, 'tokenizer_config.json'), 'utf8')).chat_template)
  })

  it('--ids-only for a checkpoint without tokenizer.json: 512 placeholder tokens, no merges, nothing prepended', () => {
    const h = headers.get('hf-saved')!
    expect(value(h, 'tokenizer.ggml.model')?.value).toBe('gpt2')
    expect((value(h, 'tokenizer.ggml.tokens')!.value as string[]).slice(0, 2)).toEqual(['<id_0>', '<id_1>'])
    expect(value(h, 'tokenizer.ggml.merges')!.value).toEqual([])
    expect(value(h, 'tokenizer.ggml.add_bos_token')?.value).toBe(false)
  })
})

describe('tensors: llama.cpp\'s names, dims = numpy shape reversed', () => {
  // llama.cpp's create_tensor dims for tiny (src/models/deepseek4.cpp, ggml order), 2-D where it
  // creates attn_output_a as {256, 64, 2} with TENSOR_ALLOW_RESHAPE (the same 32,768 values).
  const common = (n: number): Array<[string, number[]]> => [
    [`blk.${n}.attn_sinks.weight`, [4]],
    [`blk.${n}.attn_q_a.weight`, [256, 128]],
    [`blk.${n}.attn_q_a_norm.weight`, [128]],
    [`blk.${n}.attn_q_b.weight`, [128, 512]],
    [`blk.${n}.attn_kv.weight`, [256, 128]],
    [`blk.${n}.attn_kv_a_norm.weight`, [128]],
    [`blk.${n}.attn_output_a.weight`, [256, 128]],
    [`blk.${n}.attn_output_b.weight`, [128, 256]],
    [`blk.${n}.ffn_gate_inp.weight`, [256, 8]],
    [`blk.${n}.ffn_gate_exps.weight`, [256, 128, 8]],
    [`blk.${n}.ffn_up_exps.weight`, [256, 128, 8]],
    [`blk.${n}.ffn_down_exps.weight`, [128, 256, 8]],
    [`blk.${n}.ffn_gate_shexp.weight`, [256, 128]],
    [`blk.${n}.ffn_up_shexp.weight`, [256, 128]],
    [`blk.${n}.ffn_down_shexp.weight`, [128, 256]],
    [`blk.${n}.attn_norm.weight`, [256]],
    [`blk.${n}.ffn_norm.weight`, [256]],
    [`blk.${n}.hc_attn_fn.weight`, [1024, 24]],
    [`blk.${n}.hc_attn_base.weight`, [24]],
    [`blk.${n}.hc_attn_scale.weight`, [3]],
    [`blk.${n}.hc_ffn_fn.weight`, [1024, 24]],
    [`blk.${n}.hc_ffn_base.weight`, [24]],
    [`blk.${n}.hc_ffn_scale.weight`, [3]],
  ]
  const csa = (n: number): Array<[string, number[]]> => [
    [`blk.${n}.attn_compressor_ape.weight`, [256, 4]],
    [`blk.${n}.attn_compressor_kv.weight`, [256, 256]],
    [`blk.${n}.attn_compressor_gate.weight`, [256, 256]],
    [`blk.${n}.attn_compressor_norm.weight`, [128]],
    [`blk.${n}.indexer_compressor_ape.weight`, [256, 4]],
    [`blk.${n}.indexer_compressor_kv.weight`, [256, 256]],
    [`blk.${n}.indexer_compressor_gate.weight`, [256, 256]],
    [`blk.${n}.indexer_compressor_norm.weight`, [128]],
    [`blk.${n}.indexer.attn_q_b.weight`, [128, 512]],
    [`blk.${n}.indexer.proj.weight`, [256, 4]],
    [`blk.${n}.exp_probs_b.bias`, [8]],
  ]
  const expected = new Map<string, number[]>([
    ['token_embd.weight', [256, 512]],
    ['output_norm.weight', [256]],
    ['output_hc_fn.weight', [1024, 4]],
    ['output_hc_base.weight', [4]],
    ['output_hc_scale.weight', [1]],
    ['output.weight', [256, 512]],
    ...common(0), ['blk.0.ffn_gate_tid2eid.weight', [2, 512]],
    ...common(1), ...csa(1),
    ...common(2), ['blk.2.attn_compressor_ape.weight', [128, 128]], ['blk.2.attn_compressor_kv.weight', [256, 128]],
    ['blk.2.attn_compressor_gate.weight', [256, 128]], ['blk.2.attn_compressor_norm.weight', [128]], ['blk.2.exp_probs_b.bias', [8]],
    ...common(3), ...csa(3),
  ])

  it('all 126 tiny tensors, each with llama.cpp\'s dims, and nothing else', () => {
    const h = headers.get('tiny-f32')!
    expect(h.tensors).toHaveLength(126)
    expect(new Map(h.tensors.map((t) => [t.name, t.dims]))).toEqual(expected)
  })

  it('f32: every tensor F32 but tid2eid (I32); f16 / bf16: the 2-D and stacked weights only, hyper-connection fn and ape kept F32', () => {
    const type = (h: string, name: string) => headers.get(h)!.tensors.find((t) => t.name === name)!.type
    for (const t of headers.get('tiny-f32')!.tensors) expect(t.type, t.name).toBe(t.name.endsWith('tid2eid.weight') ? 'I32' : 'F32')
    for (const [h, weight] of [['tiny-f16', 'F16'], ['tiny-bf16', 'BF16']] as const) {
      for (const t of headers.get(h)!.tensors) {
        const kept = t.dims.length === 1 || /hc_(attn|ffn)_fn|output_hc_fn|_ape\.weight$/.test(t.name)
        expect(t.type, `${h} ${t.name}`).toBe(t.name.endsWith('tid2eid.weight') ? 'I32' : kept ? 'F32' : weight)
      }
    }
    expect(type('tiny-bf16', 'blk.1.ffn_gate_exps.weight')).toBe('BF16')
  })

  it('general.file_type follows --type (0 all f32, 1 mostly f16, 32 mostly bf16)', () => {
    expect(value(headers.get('tiny-f32')!, 'general.file_type')?.value).toBe(0)
    expect(value(headers.get('tiny-f16')!, 'general.file_type')?.value).toBe(1)
    expect(value(headers.get('tiny-bf16')!, 'general.file_type')?.value).toBe(32)
  })
})

describe('data: bit for bit against the safetensors file (read directly, DeepSeek names)', () => {
  // save_pretrained's names -> llama.cpp's (the table of ../shared/research/llama-cpp-dsv4.md), written out here.
  const layerMap: Array<[RegExp, string]> = [
    [/^attn\.attn_sink$/, 'attn_sinks.weight'], [/^attn\.wq_a\.weight$/, 'attn_q_a.weight'], [/^attn\.q_norm\.weight$/, 'attn_q_a_norm.weight'],
    [/^attn\.wq_b\.weight$/, 'attn_q_b.weight'], [/^attn\.wkv\.weight$/, 'attn_kv.weight'], [/^attn\.norm\.weight$/, 'attn_kv_a_norm.weight'],
    [/^attn\.wo_a\.weight$/, 'attn_output_a.weight'], [/^attn\.wo_b\.weight$/, 'attn_output_b.weight'],
    [/^attn\.compressor\.ape$/, 'attn_compressor_ape.weight'], [/^attn\.compressor\.wkv\.weight$/, 'attn_compressor_kv.weight'],
    [/^attn\.compressor\.wgate\.weight$/, 'attn_compressor_gate.weight'], [/^attn\.compressor\.norm\.weight$/, 'attn_compressor_norm.weight'],
    [/^attn\.indexer\.compressor\.ape$/, 'indexer_compressor_ape.weight'], [/^attn\.indexer\.compressor\.wkv\.weight$/, 'indexer_compressor_kv.weight'],
    [/^attn\.indexer\.compressor\.wgate\.weight$/, 'indexer_compressor_gate.weight'], [/^attn\.indexer\.compressor\.norm\.weight$/, 'indexer_compressor_norm.weight'],
    [/^attn\.indexer\.wq_b\.weight$/, 'indexer.attn_q_b.weight'], [/^attn\.indexer\.weights_proj\.weight$/, 'indexer.proj.weight'],
    [/^ffn\.gate\.weight$/, 'ffn_gate_inp.weight'], [/^ffn\.gate\.bias$/, 'exp_probs_b.bias'], [/^ffn\.gate\.tid2eid$/, 'ffn_gate_tid2eid.weight'],
    [/^ffn\.shared_experts\.w1\.weight$/, 'ffn_gate_shexp.weight'], [/^ffn\.shared_experts\.w3\.weight$/, 'ffn_up_shexp.weight'],
    [/^ffn\.shared_experts\.w2\.weight$/, 'ffn_down_shexp.weight'], [/^attn_norm\.weight$/, 'attn_norm.weight'], [/^ffn_norm\.weight$/, 'ffn_norm.weight'],
    [/^hc_(attn|ffn)_(fn|base|scale)$/, 'hc_$1_$2.weight'],
  ]
  const globalMap: Record<string, string> = {
    'model.embed_tokens.weight': 'token_embd.weight', 'model.norm.weight': 'output_norm.weight', 'head.weight': 'output.weight',
    'model.hc_head.hc_fn': 'output_hc_fn.weight', 'model.hc_head.hc_base': 'output_hc_base.weight', 'model.hc_head.hc_scale': 'output_hc_scale.weight',
  }
  const experts: Record<string, string> = { w1: 'ffn_gate_exps.weight', w3: 'ffn_up_exps.weight', w2: 'ffn_down_exps.weight' }

  it.each([['tiny', 'tiny-bf16'], ['hf-saved', 'hf-saved']])('%s exported --type bf16: every file tensor lands in its GGUF tensor unchanged (experts stacked in id order, tid2eid as I32)', async (which, gguf) => {
    const dir = which === 'tiny' ? tiny : repoPath('harness/fixtures/hf-saved')
    const file = await readSafetensors(join(dir, 'model.safetensors'))
    const written = parseGguf(readFileSync(join(scratch, `${gguf}.gguf`)))
    const out = new Map(written.tensors.map((t) => [t.name, t]))
    const expertParts = new Map<string, Uint8Array[]>()
    let checked = 0
    for (const [name, t] of file.tensors) {
      const m = /^model\.layers\.(\d+)\.(.+)$/.exec(name)
      const expert = m === null ? null : /^ffn\.experts\.(\d+)\.(w[123])\.weight$/.exec(m[2])
      if (m !== null && expert !== null) {
        const key = `blk.${m[1]}.${experts[expert[2]]}`
        const parts = expertParts.get(key) ?? []
        parts[Number(expert[1])] = t.data
        expertParts.set(key, parts)
        continue
      }
      let target = globalMap[name]
      if (m !== null) {
        const rule = layerMap.find(([re]) => re.test(m[2]))
        expect(rule, name).toBeDefined()
        target = `blk.${m[1]}.${m[2].replace(rule![0], rule![1])}`
      }
      const g = out.get(target)
      expect(g, `${name} -> ${target}`).toBeDefined()
      expect(g!.dims, target).toEqual([...t.shape].reverse())
      if (t.dtype === 'I64') {
        expect(g!.type).toBe('I32')
        expect(Buffer.compare(Buffer.from(g!.data), Buffer.from(Int32Array.from(viewAs(t, 'I64'), Number).buffer)), target).toBe(0)
      }
      else {
        expect(g!.type, target).toBe(t.dtype)
        expect(Buffer.compare(Buffer.from(g!.data), Buffer.from(t.data)), target).toBe(0)
      }
      checked++
    }
    for (const [key, parts] of expertParts) {
      const g = out.get(key)!
      expect(g.type, key).toBe('BF16')
      expect(Buffer.compare(Buffer.from(g.data), Buffer.concat(parts)), key).toBe(0)
      checked++
    }
    expect(checked).toBe(written.tensors.length)
  })

  it('f32 widens bf16 exactly; f16 rounds to nearest', () => {
    const f32 = parseGguf(readFileSync(join(scratch, 'tiny-f32.gguf'))).tensors.find((t) => t.name === 'blk.1.attn_q_a.weight')!
    const bf16 = parseGguf(readFileSync(join(scratch, 'tiny-bf16.gguf'))).tensors.find((t) => t.name === 'blk.1.attn_q_a.weight')!
    const widened = decodeBf16(new Uint16Array(bf16.data.slice().buffer))
    expect(Buffer.compare(Buffer.from(f32.data), Buffer.from(widened.buffer))).toBe(0)
  })
})

describe('refusals: one line, exit code 2, no file written', () => {
  const refused = async (args: string[], message: string, out: string) => {
    const r = await cli('export-gguf', ...args)
    expect(r.code, r.stderr).toBe(2)
    expect(r.stderr.trim().split('\n')).toHaveLength(1)
    expect(r.stderr).toContain(message)
    expect(r.stderr).not.toMatch(/\n\s+at /)
    return out
  }

  it('an existing --out without --force (left untouched), --force replaces it', async () => {
    const out = join(scratch, 'exists.gguf')
    writeFileSync(out, 'keep')
    await refused(['--model', tiny, '--out', out], 'exists (pass --force to replace it)', out)
    expect(readFileSync(out, 'utf8')).toBe('keep')
    expect((await cli('export-gguf', '--model', tiny, '--out', out, '--force')).code).toBe(0)
    expect(readFileSync(out).subarray(0, 4).toString()).toBe('GGUF')
  })

  it('an unknown --type, a missing --out directory, a checkpoint without tokenizer.json (unless --ids-only)', async () => {
    await refused(['--model', tiny, '--out', join(scratch, 'q.gguf'), '--type', 'q8_0'], '--type: unknown "q8_0", expected one of f32, f16, bf16', '')
    await refused(['--model', tiny, '--out', join(scratch, 'no', 'such', 'x.gguf')], 'does not exist', '')
    const out = join(scratch, 'hf.gguf')
    await refused(['--model', repoPath('harness/fixtures/hf-saved'), '--out', out], 'no tokenizer.json to carry into the GGUF (pass --ids-only', out)
    expect(existsSync(out)).toBe(false)
    expect(existsSync(join(scratch, 'q.gguf'))).toBe(false)
  })

  it.each([
    ['scoring_func', (c: Record<string, unknown>) => { c.scoring_func = 'softmax' }, 'config.json scoring_func: is "softmax", the loader accepts only "sqrtsoftplus"'],
    ['YaRN beta_fast', (c: Record<string, unknown>) => { (c.rope_parameters as { compress: Record<string, unknown> }).compress.beta_fast = 16.0 }, 'YaRN betas 16 / 1: llama.cpp\'s deepseek4 ignores the GGUF keys and uses 32 / 1'],
    ['YaRN attention_factor', (c: Record<string, unknown>) => { delete (c.rope_parameters as { compress: Record<string, unknown> }).compress.attention_factor }, 'attention_factor: is 1.34'],
  ])('a config llama.cpp cannot express: %s (refused before any weight is read)', async (_what, edit, message) => {
    const dir = join(scratch, `bad-${_what.replace(/\W/g, '')}`)
    cpSync(tiny, dir, { recursive: true })
    const config = JSON.parse(readFileSync(join(dir, 'config.json'), 'utf8')) as Record<string, unknown>
    edit(config)
    writeFileSync(join(dir, 'config.json'), JSON.stringify(config))
    const out = join(scratch, 'bad.gguf')
    await refused(['--model', dir, '--out', out], message, out)
    expect(existsSync(out)).toBe(false)
  })

  it('the config rules that need other tensors too (checked on the parsed config)', () => {
    const base = JSON.parse(readFileSync(join(tiny, 'config.json'), 'utf8')) as Record<string, unknown>
    const refusedBy = (over: Record<string, unknown>, message: string) => {
      const cfg = parseDeepseekV4Config({ ...base, ...over })
      expect(() => checkExpressible(cfg)).toThrow(GgufExportError)
      expect(() => checkExpressible(cfg)).toThrow(message)
    }
    refusedBy({ mlp_layer_types: ['moe', 'hash_moe', 'moe', 'moe'] }, 'hash_moe layers must come first')
    refusedBy({ compress_rates: { compressed_sparse_attention: 8, heavily_compressed_attention: 128 } }, 'the compressed-sparse rate is 8, llama.cpp fixes it at 4')
    refusedBy({ rope_parameters: { ...(base.rope_parameters as object), main: { rope_type: 'yarn', rope_theta: 10000.0, factor: 2.0, original_max_position_embeddings: 1024, partial_rotary_factor: 0.5 } } }, "llama.cpp runs the sliding layers' rope unscaled")
    refusedBy({ num_nextn_predict_layers: 1 }, 'MTP layers are not exported')
    expect(() => checkExpressible(parseDeepseekV4Config(base))).not.toThrow()
  })
})

describe('inspect FILE.gguf', () => {
  it('lists the metadata (typed, arrays by count) and every tensor with its ggml dims and byte range', async () => {
    const file = join(scratch, 'inspect.gguf')
    copyFileSync(join(scratch, 'tiny-f32.gguf'), file)
    const r = await cli('inspect', file)
    expect(r.code, r.stderr).toBe(0)
    const lines = r.stdout.trim().split('\n')
    expect(lines[0]).toMatch(/^.*inspect\.gguf: GGUF v3, 126 tensors, 52 metadata keys, data starts at byte \d+ \(alignment 32\)$/)
    expect(lines).toContain('  metadata general.architecture = "deepseek4" (STRING)')
    expect(lines).toContain('  metadata deepseek4.attention.compress_ratios = [0, 4, 128, 4] (ARRAY of 4 UINT32)')
    expect(lines.some((l) => /^ {2}metadata tokenizer\.ggml\.tokens = \["<｜begin▁of▁sentence｜>", .*, \.\.\.\] \(ARRAY of 512 STRING\)$/.test(l))).toBe(true)
    expect(lines.filter((l) => / (F32|I32|F16|BF16) \[/.test(l))).toHaveLength(126)
    expect(lines).toContain(`  blk.1.ffn_gate_exps.weight  F32 [256, 128, 8]  bytes ${headers.get('tiny-f32')!.tensors.find((t) => t.name === 'blk.1.ffn_gate_exps.weight')!.start}..${headers.get('tiny-f32')!.tensors.find((t) => t.name === 'blk.1.ffn_gate_exps.weight')!.start + 256 * 128 * 8 * 4}`)
  })

  it('a broken GGUF: one line naming the file and the problem, exit code 2', async () => {
    const file = join(scratch, 'cut.gguf')
    writeFileSync(file, readFileSync(join(scratch, 'tiny-f32.gguf')).subarray(0, 5000))
    const r = await cli('inspect', file)
    expect(r.code).toBe(2)
    expect(r.stderr.trim().split('\n')).toHaveLength(1)
    expect(r.stderr).toContain(`${file}: `)
  })
})
