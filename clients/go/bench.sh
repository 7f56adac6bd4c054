#!/usr/bin/env bash
# The Go client's benchmark (issue 33's table): prints one BENCH line per case on stdout,
# everything else on stderr.
#   local        Supply.NextID from a local range (one huge range: no fetch) against
#                atomic.AddInt64 on one int64: testing.B, the same number of ids each, 5 rounds
#                alternated, the median of each.
#   formatted_local  FormattedSupply.NextID from a local batch of texts (one batch of a million
#                order numbers, served again when spent, timer stopped) against the numeric
#                Supply.NextID of the local case: 10M texts a round, in the same 5 rounds.
#   sustained_1  one goroutine on a fresh Client (defaults: batch 1000, the demand rule on)
#                for LEAFID_BENCH_SECS against the server, every fetch included; baseline:
#                atomic.AddInt64 in one goroutine for 1 s, in the same run.
#   sustained_4  four goroutines on one Client; baseline: four goroutines on one shared int64.
# Environment: LEAFID_BENCH_URL (a running release server), LEAFID_BENCH_TAG (an existing segment
# tag), LEAFID_BENCH_SECS (default 10).
set -euo pipefail
cd "$(dirname "$0")"
: "${LEAFID_BENCH_URL:?set LEAFID_BENCH_URL to a running leafid server, e.g. http://127.0.0.1:18200}"
: "${LEAFID_BENCH_TAG:?set LEAFID_BENCH_TAG to an existing segment tag}"
export LEAFID_BENCH_SECS="${LEAFID_BENCH_SECS:-10}"
export GOFLAGS=-mod=mod GOPROXY=off GO111MODULE=on
export GOCACHE="${GOCACHE:-${HOME:-/root}/.cache/go-build}"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
go test -c -o "$work/leafid.test" . >&2

# local: 5 rounds, each running NextID then AtomicAddInt64 (alternated), 50M ids each.
for round in 1 2 3 4 5; do
  "$work/leafid.test" -test.run '^$' -test.bench '^BenchmarkLocal$/^(NextID|AtomicAddInt64)$' \
    -test.benchtime 50000000x >>"$work/local.txt"
  "$work/leafid.test" -test.run '^$' -test.bench '^BenchmarkLocal$/^FormattedNextID$' \
    -test.benchtime 10000000x >>"$work/local.txt"
done
cat "$work/local.txt" >&2
awk '
  /^BenchmarkLocal\/NextID(-[0-9]+)? / { s[++ns] = $3 }
  /^BenchmarkLocal\/AtomicAddInt64(-[0-9]+)? / { b[++nb] = $3 }
  /^BenchmarkLocal\/FormattedNextID(-[0-9]+)? / { f[++nf] = $3 }
  function median(a, n,   i, j, t) {
    for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
  }
  END {
    if (!ns || !nb || !nf) { print "bench.sh: no BenchmarkLocal results" > "/dev/stderr"; exit 1 }
    subj = 1e9 / median(s, ns); base = 1e9 / median(b, nb)
    printf "BENCH {\"client\":\"go\",\"case\":\"local\",\"ids_per_s\":%.0f,\"baseline_per_s\":%.0f,\"ratio\":%.3f,\"method\":\"testing.B, Supply.NextID on one local range vs atomic.AddInt64 on one int64, 50M each, median of 5 alternated rounds\"}\n", subj, base, subj / base
    form = 1e9 / median(f, nf)
    printf "BENCH {\"client\":\"go\",\"case\":\"formatted_local\",\"ids_per_s\":%.0f,\"baseline_per_s\":%.0f,\"ratio\":%.3f,\"method\":\"formatted next_id vs numeric next_id\"}\n", form, subj, form / subj
  }' "$work/local.txt"

# sustained_1 and sustained_4 against the server.
LEAFID_BENCH_OUT="$work/sustained.txt" "$work/leafid.test" -test.run '^TestBenchSustained$' -test.v \
  -test.timeout "$(( ${LEAFID_BENCH_SECS%.*} * 2 + 60 ))s" >&2
cat "$work/sustained.txt"
