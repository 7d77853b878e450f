// Bootstrap of the front door's tokenizer thread: a worker thread starts without the main thread's
// loader hooks, so it registers tsx itself before loading the TypeScript worker.
import { register } from 'tsx/esm/api'

register()
await import('./tokenize-worker.ts')
