// The README's headline is the report's, from the same committed records: regenerated here and
// compared line for line, so a hand edit or a record added without `pd-bridge results` fails.
import { readFile } from 'node:fs/promises'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { summarizeRecords } from '../../verify/results/generate.ts'
import { headlineMarkdown, headlineOf } from '../../verify/results/headline.ts'
import { CHECKOUT_RESULTS, HEADLINE_BEGIN, HEADLINE_END, README_PATH, readmeHeadline, withReadmeHeadline } from '../../verify/results/readme-headline.ts'

describe('the README\'s headline', () => {
  it('is the block pd-bridge results writes from the committed records, line for line', async () => {
    const { envs } = await summarizeRecords(join(CHECKOUT_RESULTS, 'runs'))
    const expected = headlineMarkdown(headlineOf(envs))
    expect(expected.length).toBeGreaterThan(0)
    expect(readmeHeadline(await readFile(README_PATH, 'utf8'))).toEqual(expected)
  })

  it('is replaced between its markers only, and a text without them is left alone', () => {
    const text = `intro\n${HEADLINE_BEGIN}\nold line\n${HEADLINE_END}\nafter\n`
    const next = withReadmeHeadline(text, ['- new', ''])
    expect(next).toBe(`intro\n${HEADLINE_BEGIN}\n- new\n\n${HEADLINE_END}\nafter\n`)
    expect(readmeHeadline(next)).toEqual(['- new', ''])
    expect(withReadmeHeadline('no block here', ['- x'])).toBe('no block here')
    expect(readmeHeadline('no block here')).toBeNull()
  })
})
