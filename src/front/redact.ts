// The front door's redactor (src/http/redact.ts): its configured roots by their config names, so
// `/srv/pd/cache/ab/x` reads `<decoder.cacheDir>/ab/x` in whatever a client sees.
import type { FrontConfig } from '../config/index.ts'
import { pathRedactor as redactorOf, redactDeep, type Redactor } from '../http/redact.ts'

export { redactDeep, type Redactor }

/** The redactor for this config; `spoolDir` is the spool actually used. */
export function pathRedactor (config: FrontConfig, spoolDir: string | undefined): Redactor {
  return redactorOf([
    [config.decoder.model, 'decoder.model'],
    [config.decoder.cacheDir, 'decoder.cacheDir'],
    [config.sidecar, 'sidecar'],
    [config.capture.dir, 'capture.dir'],
    [spoolDir, 'capture.spoolDir'],
    [config.log.file, 'log.file'],
  ])
}
