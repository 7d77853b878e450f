// A strict little well-formedness check for the generated SVG and HTML (written as XHTML-style
// markup): every tag closes in order, attributes are quoted, text has no raw < or stray &.
// Returns the element tree's elements so tests can count them.

/** One parsed element. */
export interface XmlElement {
  name: string
  attrs: Record<string, string>
  text: string
}

const VOID_HTML = new Set(['meta', 'br', 'hr', 'img', 'input', 'link'])

/** Parse `text` or throw with the offset of the first problem. */
export function parseMarkup (text: string): XmlElement[] {
  const src = text.replace(/^<\?xml[^>]*\?>/, '').replace(/^<!DOCTYPE html>/, '')
  const elements: XmlElement[] = []
  const stack: XmlElement[] = []
  let i = 0
  let roots = 0
  while (i < src.length) {
    const lt = src.indexOf('<', i)
    const textPart = src.slice(i, lt === -1 ? src.length : lt)
    checkText(textPart, i)
    if (stack.length > 0) stack[stack.length - 1].text += textPart
    else if (textPart.trim() !== '') throw new Error(`text outside the root at ${i}`)
    if (lt === -1) break
    const gt = src.indexOf('>', lt)
    if (gt === -1) throw new Error(`unclosed tag at ${lt}`)
    const tag = src.slice(lt + 1, gt)
    i = gt + 1
    if (tag.startsWith('/')) {
      const name = tag.slice(1).trim()
      const open = stack.pop()
      if (open?.name !== name) throw new Error(`</${name}> at ${lt} closes <${open?.name}>`)
      continue
    }
    const m = /^([A-Za-z][\w:-]*)((?:\s+[\w:-]+="[^"<]*")*)\s*(\/?)$/.exec(tag)
    if (m === null) throw new Error(`malformed tag <${tag.slice(0, 60)}> at ${lt}`)
    const attrs: Record<string, string> = {}
    for (const a of m[2].matchAll(/([\w:-]+)="([^"]*)"/g)) {
      if (a[1] in attrs) throw new Error(`duplicate attribute ${a[1]} at ${lt}`)
      checkText(a[2], lt)
      attrs[a[1]] = a[2]
    }
    const el = { name: m[1], attrs, text: '' }
    elements.push(el)
    if (stack.length === 0) roots++
    if (m[3] !== '/' && !VOID_HTML.has(m[1])) stack.push(el)
  }
  if (stack.length > 0) throw new Error(`<${stack[stack.length - 1].name}> never closed`)
  if (roots !== 1) throw new Error(`expected one root element, found ${roots}`)
  return elements
}

function checkText (text: string, at: number): void {
  const bad = /&(?!(amp|lt|gt|quot|#\d+);)/.exec(text)
  if (bad !== null) throw new Error(`stray & at ${at + bad.index}`)
}
