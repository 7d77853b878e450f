// Seeded prompts for the suites: the same seed gives the same ids in every suite and run, a fresh
// seed a prompt no earlier test has sent.

/** `n` token ids below 512 (the tiny vocabulary) from a linear congruential generator seeded by `seed`. */
export function seededTokens (n: number, seed = 1): number[] {
  let x = (seed * 2654435761) >>> 0
  return Array.from({ length: n }, () => {
    x = (Math.imul(x, 1664525) + 1013904223) >>> 0
    return x >>> 23
  })
}
