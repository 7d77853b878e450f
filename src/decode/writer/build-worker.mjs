// Bootstrap of a block builder thread: a worker thread starts without the main thread's loader
// hooks, so it registers tsx itself before loading the TypeScript worker.
import { register } from 'tsx/esm/api'

register()
await import('./build-worker.ts')
