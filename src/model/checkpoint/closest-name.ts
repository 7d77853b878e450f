// The expected name nearest to a name nobody expected, for error messages.

/** Edit distance (insert, delete, substitute: each 1) between two strings. */
export function editDistance (a: string, b: string): number {
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j)
  for (let i = 1; i <= a.length; i++) {
    const row = [i]
    for (let j = 1; j <= b.length; j++) {
      row[j] = Math.min(prev[j] + 1, row[j - 1] + 1, prev[j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1))
    }
    prev = row
  }
  return prev[b.length]
}

/** The candidate with the smallest edit distance to `name` (the first of equals), or null if there are none. */
export function closestName (name: string, candidates: Iterable<string>): string | null {
  let best: string | null = null
  let bestDistance = Infinity
  for (const c of candidates) {
    const d = editDistance(name, c)
    if (d < bestDistance) { best = c; bestDistance = d }
  }
  return best
}
