// The omlx decoder kind's name, alone in a file with no imports, so config schemas can name the kind
// without pulling in its target (and the registry, when it lands, has one constant to point at).
export const OMLX_KIND = 'omlx' as const
