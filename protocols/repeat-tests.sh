#!/usr/bin/env bash
# Runs the full `npm test` N times in a row on a clean clone of one commit and records every run:
# the evidence behind "ten consecutive full npm test runs pass" (flaky tests: red runs).
#   protocols/repeat-tests.sh [--runs N] [--commit REV] [--out DIR]
# Each run's counts come from vitest's own JSON report; the record lands in results/test-runs/.
set -u
runs=10
commit=HEAD
repo="$(cd "$(dirname "$0")/.." && pwd)"
out="$repo/results/test-runs"
while [ $# -gt 0 ]; do
  case "$1" in
    --runs) runs="$2"; shift 2 ;;
    --commit) commit="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    *) echo "repeat-tests: unknown option $1 (use --runs N --commit REV --out DIR)" >&2; exit 2 ;;
  esac
done
case "$runs" in ''|*[!0-9]*|0*) echo "repeat-tests: --runs needs a positive integer, got '$runs'" >&2; exit 2 ;; esac

sha="$(git -C "$repo" rev-parse --verify "$commit^{commit}" 2>/dev/null)" || { echo "repeat-tests: no such commit $commit" >&2; exit 2; }
work="$(mktemp -d /tmp/repeat-tests.XXXXXX)"
git clone -q "$repo" "$work/clone" && git -C "$work/clone" checkout -q "$sha" || exit 1
cd "$work/clone"
npm ci --silent >"$work/npm-ci.log" 2>&1 || { echo "repeat-tests: npm ci failed, see $work/npm-ci.log" >&2; exit 1; }

mkdir -p "$out"
record="$out/runs-${sha:0:12}-$(date -u +%Y%m%dT%H%M%SZ).json"
lines=()
consecutive=0
for i in $(seq 1 "$runs"); do
  start=$(date +%s)
  CI=true npx vitest run --reporter=dot --reporter=json --outputFile.json="$work/run-$i.json" >"$work/run-$i.log" 2>&1
  rc=$?
  seconds=$(( $(date +%s) - start ))
  line="$(node -e '
    const fs = require("fs"); const [file, i, rc, s] = process.argv.slice(1)
    let passed = 0, failed = 1, failures = ["no JSON report"]
    if (fs.existsSync(file)) {
      const r = JSON.parse(fs.readFileSync(file, "utf8"))
      const broken = r.testResults.filter((t) => t.status === "failed" && t.assertionResults.length === 0)
      passed = r.numPassedTests; failed = r.numFailedTests + broken.length
      failures = r.testResults.flatMap((t) => t.assertionResults.filter((a) => a.status === "failed").map((a) => `${t.name.split("/suites/")[1] ?? t.name}: ${a.fullName}`))
        .concat(broken.map((t) => `${t.name}: failed to load`))
    }
    console.log(JSON.stringify({ run: +i, exit_code: +rc, passed, failed, seconds: +s, failures }))
  ' "$work/run-$i.json" "$i" "$rc" "$seconds")"
  lines+=("$line")
  echo "run $i/$runs: $line"
  if [ "$rc" -eq 0 ]; then consecutive=$((consecutive + 1)); else consecutive=0; cp "$work/run-$i.log" "$out/failed-run-${sha:0:12}-$i.log"; fi
  # Written after every run so an interrupted series still leaves its evidence.
  node -e '
    const [file, sha, host, cores, runs, consecutive, ...lines] = process.argv.slice(1)
    const list = lines.map((l) => JSON.parse(l))
    require("fs").writeFileSync(file, JSON.stringify({
      protocol: "repeat-tests", commit: sha, runs_planned: +runs, runs: list,
      passed_runs: list.filter((r) => r.exit_code === 0).length, consecutive_passes_at_end: +consecutive,
      environment: { host, cpu_cores: +cores, node: process.version },
    }, null, 2) + "\n")
  ' "$record" "$sha" "$(hostname)" "$(nproc)" "$runs" "$consecutive" "${lines[@]}"
done
echo "repeat-tests: $consecutive consecutive passes at the end of $runs runs; record $record"
rm -rf "$work"
[ "$consecutive" -eq "$runs" ]
