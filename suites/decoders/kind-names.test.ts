// The decoder seam holds: no file of src/ outside a decoder kind's own folders (its record's
// `homes`) and the registry names a kind (a string literal or a property key equal to a kind's
// name: a comparison, a kind-keyed map, a union type). A real scan of the source text with the
// TypeScript parser (comments are not code), and controls proving the scan catches what it must.
import { readdirSync, readFileSync } from 'node:fs'
import { join, relative } from 'node:path'
import ts from 'typescript'
import { describe, expect, it } from 'vitest'
import { DECODER_KINDS } from '../../src/decoders/registry.ts'

const ROOT = join(import.meta.dirname, '..', '..')
const REGISTRY = 'src/decoders/registry.ts'
const NAMES = new Set(DECODER_KINDS.map((k) => k.name))

interface Hit { file: string, line: number, text: string }

/** Where `text` (the source of `file`, relative to the root) names a decoder kind. */
function kindNamesIn (file: string, text: string): Hit[] {
  // A literal or key equal to a name holds the name's characters: text without any is not parsed.
  if (![...NAMES].some((n) => text.includes(n))) return []
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true, file.endsWith('.mjs') ? ts.ScriptKind.JS : ts.ScriptKind.TS)
  const hits: Hit[] = []
  const hit = (node: ts.Node): void => {
    hits.push({ file, line: source.getLineAndCharacterOfPosition(node.getStart(source)).line + 1, text: node.getText(source) })
  }
  const visit = (node: ts.Node): void => {
    if ((ts.isStringLiteral(node) || ts.isNoSubstitutionTemplateLiteral(node)) && NAMES.has(node.text)) hit(node)
    // A kind-keyed map written with a bare key: { ours: ... }.
    else if ((ts.isPropertyAssignment(node) || ts.isPropertySignature(node) || ts.isShorthandPropertyAssignment(node)) && ts.isIdentifier(node.name) && NAMES.has(node.name.text)) hit(node.name)
    ts.forEachChild(node, visit)
  }
  visit(source)
  return hits
}

/** Whether `file` may name kinds: the registry, or one of a kind's homes. */
function mayName (file: string): boolean {
  return file === REGISTRY || DECODER_KINDS.some((k) => k.homes.some((h) => file === h || file.startsWith(h + '/')))
}

function sourceFiles (dir: string): string[] {
  return readdirSync(join(ROOT, dir), { withFileTypes: true }).flatMap((e) => {
    const path = join(dir, e.name)
    if (e.isDirectory()) return sourceFiles(path)
    return /\.(ts|mts|mjs)$/.test(e.name) ? [path] : []
  })
}

const files = sourceFiles('src').map((f) => relative(ROOT, join(ROOT, f)).split('\\').join('/'))

describe('decoder kind names stay in their kinds\' folders and the registry', () => {
  it('no file of src/ outside them names a kind', () => {
    const outside = files.filter((f) => !mayName(f)).flatMap((f) => kindNamesIn(f, readFileSync(join(ROOT, f), 'utf8')))
    expect(outside.map((h) => `${h.file}:${h.line}: ${h.text}`)).toEqual([])
  })

  it('the scan is not vacuous: it reads every source file and finds the names where they belong', () => {
    expect(files.length).toBeGreaterThan(100)
    expect(files).toContain('src/front/setup.ts')
    for (const kind of DECODER_KINDS) {
      const inHomes = files.filter((f) => kind.homes.some((h) => f.startsWith(h + '/'))).flatMap((f) => kindNamesIn(f, readFileSync(join(ROOT, f), 'utf8')))
      expect(inHomes.filter((h) => h.text.includes(kind.name)).length, kind.name).toBeGreaterThan(0)
    }
  })

  it('negative control: a comparison, a kind-keyed map and a union type added to a real file are caught; comments are not', () => {
    const real = readFileSync(join(ROOT, 'src/front/setup.ts'), 'utf8')
    expect(kindNamesIn('src/front/setup.ts', real)).toEqual([])
    for (const kind of DECODER_KINDS) {
      const q = JSON.stringify(kind.name)
      const added = [
        `if (config.decoder.engine === ${q}) console.log(1)`,
        `const other = config.decoder.engine !== '${kind.name}'`,
        `switch (name) { case \`${kind.name}\`: break }`,
        `const routes = { ${q}: 1 }`,
        `type Engine = ${q} | 'x'`,
      ]
      for (const line of added) {
        const hits = kindNamesIn('src/front/setup.ts', `${real}\n${line}\n`)
        expect(hits, line).toHaveLength(1)
        expect(hits[0].line).toBe(real.split('\n').length + 1)
        expect(mayName('src/front/setup.ts')).toBe(false)
      }
      expect(kindNamesIn('src/front/setup.ts', `${real}\n// decoder.engine === ${q}\n/* ${q} */\n`)).toEqual([])
    }
    expect(kindNamesIn('src/front/x.ts', 'const routes = { ours: 1, other: 2 }').map((h) => h.text)).toEqual(['ours'])
    expect(mayName(REGISTRY)).toBe(true)
    expect(mayName(`${DECODER_KINDS[0].homes[0]}/index.ts`)).toBe(true)
  })
})
