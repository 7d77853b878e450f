// Where the oMLX-side adapter ships: a Python module the user puts beside oMLX (docs/omlx.md).
import { fileURLToPath } from 'node:url'

export const OMLX_ADAPTER_FILE = fileURLToPath(new URL('./adapter/pd_bridge_omlx_index.py', import.meta.url))
