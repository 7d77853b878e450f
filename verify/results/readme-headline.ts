// The README quotes the report's headline, the same lines from the same records (issue #44): the
// block between the markers below is written only by `pd-bridge results` when it regenerates the
// checkout's own results/, and suites/results/readme-headline.test.ts holds it to the records.
import { readFile, writeFile } from 'node:fs/promises'
import { join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'

const CHECKOUT = resolve(fileURLToPath(new URL('../..', import.meta.url)))
export const README_PATH = join(CHECKOUT, 'README.md')
export const CHECKOUT_RESULTS = join(CHECKOUT, 'results')
export const HEADLINE_BEGIN = '<!-- results headline: written by `pd-bridge results`, do not edit by hand -->'
export const HEADLINE_END = '<!-- end of results headline -->'

/** The lines between the markers, or null when the text has no such block. */
export function readmeHeadline (text: string): string[] | null {
  const a = text.indexOf(HEADLINE_BEGIN)
  const b = text.indexOf(HEADLINE_END)
  if (a < 0 || b < a) return null
  return text.slice(a + HEADLINE_BEGIN.length, b).split('\n').slice(1, -1)
}

/** `text` with the block's lines replaced by `lines`; unchanged when it has no block. */
export function withReadmeHeadline (text: string, lines: readonly string[]): string {
  const a = text.indexOf(HEADLINE_BEGIN)
  const b = text.indexOf(HEADLINE_END)
  if (a < 0 || b < a) return text
  return `${text.slice(0, a + HEADLINE_BEGIN.length)}\n${lines.join('\n')}\n${text.slice(b)}`
}

/** Rewrite the README's block when `outDir` is the checkout's results/ (a report made elsewhere leaves the README alone). */
export async function updateReadmeHeadline (outDir: string, lines: readonly string[]): Promise<boolean> {
  if (resolve(outDir) !== CHECKOUT_RESULTS) return false
  const text = await readFile(README_PATH, 'utf8')
  const next = withReadmeHeadline(text, lines)
  if (next === text) return false
  await writeFile(README_PATH, next)
  return true
}
