// One human line per stack event, for serve's stderr and the demo's plain (non-TTY) progress.
import type { StackEvent } from './embedded.ts'

function seconds (ms: number): string {
  return `${(ms / 1000).toFixed(1)} s`
}

/** The line for `e`, or undefined for events not worth a line. */
export function describeStackEvent (e: StackEvent): string | undefined {
  switch (e.kind) {
    case 'asset':
      if (e.action === 'making') return undefined
      return `${e.what.padEnd(15)} ${e.action === 'made' ? 'made   ' : 'reusing'} ${e.dir}`
    case 'starting':
      return `${e.name.padEnd(15)} starting`
    case 'ready':
      return `${e.name.padEnd(15)} ready   ${e.url}  pid ${e.pid}  (${seconds(e.ms)})`
    case 'died':
      return e.message
    case 'stopping':
      return `${e.name.padEnd(15)} stopping`
    case 'stopped': {
      const how = e.exit.signal !== null ? `killed by ${e.exit.signal}` : `exit ${String(e.exit.code)}`
      return `${e.name.padEnd(15)} stopped (${how})`
    }
  }
}
