#!/usr/bin/env bash
# bench/postgres.sh — one svcgw instance on PostgreSQL against one on SQLite,
# in the same run, with the same mock upstream and the same pinning as
# bench/run.sh (bench/README.md):
#
#   (a) maximum throughput, non-streaming chat completions, closed loop:
#       the PostgreSQL/SQLite throughput ratio (target ≥ 0.8×);
#   (b) 2,000 req/s: p50/p99 added over the mock called directly (target
#       ≤ +0.5 ms / +3 ms), for both stores;
#   and the PostgreSQL connections the instance holds under that load
#   (sampled from pg_stat_activity every 0.2 s; target: a small fixed
#   number), with the ledger's generation count checked afterwards.
#
# It starts a throwaway PostgreSQL cluster (initdb + pg_ctl in a temporary
# directory, on a Unix socket only, as the postgres user when run as root)
# from Debian's postgresql package, pinned to the target's core: SQLite's
# work happens inside svcgw, on that core, so PostgreSQL's does too, and
# it never takes the core of the driver and the upstream mock (on which it
# would slow the mock down and show as svcgw's latency). Loopback and
# sockets only; everything it starts is stopped on exit.
#
# Settings (environment): BENCH_DURATION=10s, BENCH_WARMUP=1s,
# BENCH_CONNECTIONS=50, BENCH_RATE=2000, BENCH_TIMEOUT=10s,
# BENCH_TARGET_CPU=1, BENCH_DRIVER_CPU=0, BENCH_PG_CPU= (PostgreSQL's core:
# the target's by default; the driver's to leave svcgw's core to svcgw, as
# a database server on another machine would), BENCH_LOG_LEVEL=info,
# BENCH_OUT= (results directory; default: results/ in the work directory),
# BENCH_SCENARIOS="max rate" (which of (a) and (b) run; (c) comes with (b)).
#
# (c), measured over (b) from the stores' own figures rather than the clock:
# the ledger commits (svcgw's svcgw_ledger_* metrics, read from each
# instance's admin listener), and on PostgreSQL's side its transactions,
# statements (pg_stat_statements) and CPU time per committed generation.
# These do not move with the neighbours' load the way a p99 does.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)

duration=${BENCH_DURATION:-10s}
warmup=${BENCH_WARMUP:-1s}
connections=${BENCH_CONNECTIONS:-50}
rate=${BENCH_RATE:-2000}
call_timeout=${BENCH_TIMEOUT:-10s}
target_cpu=${BENCH_TARGET_CPU:-1}
driver_cpu=${BENCH_DRIVER_CPU:-0}
pg_cpu=${BENCH_PG_CPU:-$target_cpu}
log_level=${BENCH_LOG_LEVEL:-info}
scenarios=${BENCH_SCENARIOS:-max rate}

work=$(mktemp -d "${TMPDIR:-/tmp}/svcgw-pgbench.XXXXXX")
chmod 755 "$work"
out=${BENCH_OUT:-$work/results}
mkdir -p "$out" "$work/bin"
bin=$work/bin

log() { printf '[pgbench %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "FAILED: $*"; exit 1; }

pgbin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
if [ -z "$pgbin" ] && command -v initdb >/dev/null; then pgbin=$(dirname "$(readlink -f "$(command -v initdb)")"); fi
[ -n "$pgbin" ] && [ -x "$pgbin/initdb" ] || die "no PostgreSQL server binaries: apt-get install postgresql"
as_pg=()
if [ "$(id -u)" -eq 0 ]; then as_pg=(runuser -u postgres --); fi

pids=()
pgdata=$work/pg
cleanup() {
	local code=$?
	for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
	for pid in "${pids[@]}"; do
		for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
		kill -KILL "$pid" 2>/dev/null || true
	done
	wait 2>/dev/null || true
	if [ -f "$pgdata/postmaster.pid" ]; then "${as_pg[@]}" "$pgbin/pg_ctl" -D "$pgdata" -m immediate stop >/dev/null 2>&1 || true; fi
	rm -rf "$work/bin" "$work"/svcgw.db* "$pgdata"
	exit "$code"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if command -v taskset >/dev/null && [ "$(nproc)" -gt 1 ]; then
	pin_target=(taskset -c "$target_cpu")
	pin_driver=(taskset -c "$driver_cpu")
	pin_pg=(taskset -c "$pg_cpu")
else
	log "taskset or a second core missing: nothing is pinned"
	pin_target=()
	pin_driver=()
	pin_pg=()
fi
ulimit -n 65536 2>/dev/null || true

log "building into $bin"
(
	cd "$repo"
	export CGO_ENABLED=0
	go build -o "$bin/svcgw" .
	go -C bench build -tags bench -o "$bin/" ./mock ./load # their own module
) || die "build"

waitfile() {
	for _ in $(seq 100); do
		[ -s "$1" ] && return 0
		kill -0 "$2" 2>/dev/null || return 1
		sleep 0.05
	done
	return 1
}
alive() { kill -0 "$2" 2>/dev/null || die "$1 (pid $2) is not running; see $work/$1.log"; }

# --- PostgreSQL, on the target's core unless BENCH_PG_CPU says otherwise --------
mkdir -p "$pgdata" "$work/pgsock" "$work/pglog"
if [ "${#as_pg[@]}" -gt 0 ]; then chown postgres "$pgdata" "$work/pgsock" "$work/pglog"; fi
"${as_pg[@]}" "$pgbin/initdb" -D "$pgdata" -U postgres -A trust --no-sync >"$work/initdb.log" 2>&1 || die "initdb; see $work/initdb.log"
pgport=$((20000 + RANDOM % 20000))
# pg_stat_statements (in Debian's postgresql package) counts the statements
# svcgw sends; the settings are otherwise the defaults (synchronous_commit on).
pgstat=()
if [ -f "$("$pgbin/pg_config" --pkglibdir 2>/dev/null || echo /nonexistent)/pg_stat_statements.so" ]; then
	pgstat=(-c shared_preload_libraries=pg_stat_statements -c pg_stat_statements.track_planning=on)
fi
"${pin_pg[@]}" "${as_pg[@]}" "$pgbin/pg_ctl" -D "$pgdata" -l "$work/pglog/server.log" -w \
	-o "-c listen_addresses='' -c unix_socket_directories='$work/pgsock' -p $pgport -c max_connections=50 ${pgstat[*]}" start >/dev/null ||
	die "PostgreSQL did not start; see $work/pglog/server.log"
psql=("$pgbin/psql" -X -q -h "$work/pgsock" -p "$pgport" -U postgres)
"${psql[@]}" -d postgres -c 'CREATE DATABASE svcgw' || die "createdb"
if [ "${#pgstat[@]}" -gt 0 ]; then "${psql[@]}" -d svcgw -c 'CREATE EXTENSION pg_stat_statements' || die "pg_stat_statements"; fi
postmaster=$(head -n 1 "$pgdata/postmaster.pid")
pgdsn="postgres://postgres@/svcgw?host=$work/pgsock&port=$pgport&sslmode=disable"
pgversion=$("${psql[@]}" -d svcgw -At -c 'SHOW server_version')

# --- the mocks -------------------------------------------------------------------
"${pin_driver[@]}" "$bin/mock" -addr-file "$work/upstream.addr" >"$work/upstream.log" 2>&1 &
upstream_pid=$!
pids+=("$upstream_pid")
waitfile "$work/upstream.addr" "$upstream_pid" || die "upstream mock did not start"
upstream_addr=$(cat "$work/upstream.addr")
"${pin_target[@]}" "$bin/mock" -addr-file "$work/direct.addr" >"$work/direct.log" 2>&1 &
direct_pid=$!
pids+=("$direct_pid")
waitfile "$work/direct.addr" "$direct_pid" || die "direct mock did not start"
direct_addr=$(cat "$work/direct.addr")

cat >"$work/svcgw.yaml" <<EOF
upstreams:
  mock:
    protocol: openai
    base_url: http://$upstream_addr/v1
    api_key: bench
    models:
      mock-model: {context_length: 128000, max_completion_tokens: 16384}
routes:
  default: [mock/mock-model]
EOF

# start_svcgw NAME DB: one svcgw on DB, pinned to the target core.
declare -A addr_of pid_of key_of admin_of
addr_of[direct]=$direct_addr
pid_of[direct]=$direct_pid
start_svcgw() {
	local name=$1 db=$2
	"$bin/svcgw" --db "$db" init 2>>"$work/keys.log" || die "init $name; see $work/keys.log"
	key_of[$name]=$("$bin/svcgw" --db "$db" keys create --account bench 2>>"$work/keys.log") || die "keys create $name"
	"$bin/svcgw" --db "$db" credits add --account bench 1000000 >/dev/null 2>>"$work/keys.log" || die "credits add $name"
	"${pin_target[@]}" "$bin/svcgw" serve --db "$db" --addr 127.0.0.1:0 --admin-addr 127.0.0.1:0 --log-level "$log_level" --shutdown-grace 5s \
		--config "$work/svcgw.yaml" >/dev/null 2>"$work/$name.log" &
	pid_of[$name]=$!
	pids+=("${pid_of[$name]}")
	for _ in $(seq 200); do
		grep -q 'svcgw listening' "$work/$name.log" 2>/dev/null && break
		kill -0 "${pid_of[$name]}" 2>/dev/null || break
		sleep 0.05
	done
	addr_of[$name]=$(grep -o 'msg="svcgw listening" addr=[0-9.:]*' "$work/$name.log" | head -1 | sed 's/.*addr=//') || true
	[ -n "${addr_of[$name]}" ] || die "svcgw on $name did not start; see $work/$name.log"
	admin_of[$name]=$(grep -o 'admin_addr=[0-9.:]*' "$work/$name.log" | head -1 | sed 's/.*=//') || true
}
start_svcgw sqlite "$work/svcgw.db"
start_svcgw postgres "$pgdsn"
log "direct $direct_addr · svcgw/sqlite ${addr_of[sqlite]} · svcgw/postgres ${addr_of[postgres]} on cpu $target_cpu; PostgreSQL $pgversion on cpu $pg_cpu; driver and upstream mock on cpu $driver_cpu"

# sample_conns FILE: the most connections svcgw holds to PostgreSQL, sampled
# every 0.2 s until killed, through one session (a new connection per
# sample would fork a backend on PostgreSQL's core five times a second).
sample_conns() {
	local most=0 n
	while :; do
		echo "SELECT COUNT(*) FROM pg_stat_activity WHERE application_name = 'svcgw';"
		sleep 0.2
	done | stdbuf -oL "${psql[@]}" -d postgres -At 2>/dev/null | while read -r n; do
		if [ "$n" -gt "$most" ]; then most=$n; echo "$most" >"$1"; fi
	done
}

# pg_cpu_ticks: CPU time (clock ticks) PostgreSQL's processes have used:
# the postmaster's own and its exited children's, and the live backends'.
pg_cpu_ticks() {
	local t=0 pid
	for pid in "$postmaster" $(pgrep -P "$postmaster" || true); do
		[ -r "/proc/$pid/stat" ] || continue
		if [ "$pid" = "$postmaster" ]; then
			t=$((t + $(awk '{print $14 + $15 + $16 + $17}' "/proc/$pid/stat")))
		else
			t=$((t + $(awk '{print $14 + $15}' "/proc/$pid/stat")))
		fi
	done
	echo "$t"
}

# snap NAME TAG: the figures (c) compares, before or after a run against
# NAME: svcgw's metrics, and on PostgreSQL its CPU, its transactions, and
# pg_stat_statements (reset before, read after).
snap() {
	local name=$1 tag=$2
	curl -fsS "http://${admin_of[$name]}/metrics" >"$out/metrics-$name-$tag.txt" 2>/dev/null || : >"$out/metrics-$name-$tag.txt"
	[ "$name" = postgres ] || return 0
	pg_cpu_ticks >"$out/pgcpu-$tag"
	"${psql[@]}" -d postgres -At -c "SELECT xact_commit FROM pg_stat_database WHERE datname = 'svcgw'" >"$out/pgxact-$tag"
	[ "${#pgstat[@]}" -gt 0 ] || return 0
	if [ "$tag" = before ]; then
		"${psql[@]}" -d svcgw -At -c 'SELECT pg_stat_statements_reset()' >/dev/null
	else
		"${psql[@]}" -d svcgw -At -F $'\t' -c "SELECT calls, round((total_exec_time + total_plan_time)::numeric, 3), rows, plans,
			regexp_replace(left(query, 90), '\s+', ' ', 'g')
			FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = 'svcgw')
			  AND query NOT LIKE '%pg_stat_statements%'
			ORDER BY total_exec_time + total_plan_time DESC" >"$out/statements.tsv"
	fi
}

failed=()
drive() {
	local scenario=$1 name=$2
	shift 2
	local target=svcgw extra=()
	if [ "$name" = direct ]; then target=direct; else extra=(-key "${key_of[$name]}"); fi
	local sampler=
	if [ "$name" = postgres ]; then
		echo 0 >"$out/conns-$scenario"
		sample_conns "$out/conns-$scenario" &
		sampler=$!
	fi
	if [ "$scenario" = rate ] && [ "$name" != direct ]; then snap "$name" before; fi
	if ! "${pin_driver[@]}" "$bin/load" run -scenario "$scenario" -target "$target" \
		-base "http://${addr_of[$name]}" -pid "${pid_of[$name]}" \
		-timeout "$call_timeout" -out "$out/$scenario-$name.json" "${extra[@]}" "$@" 2>>"$work/load.log"; then
		failed+=("$scenario/$name")
		log "scenario $scenario against $name failed; see $work/load.log"
	fi
	if [ "$scenario" = rate ] && [ "$name" != direct ]; then
		sleep 1.5 # PostgreSQL's backends publish their counts within a second of going idle
		snap "$name" after
	fi
	if [ -n "$sampler" ]; then pkill -P "$sampler" 2>/dev/null || true; kill "$sampler" 2>/dev/null || true; wait "$sampler" 2>/dev/null || true; fi
	tail -n 1 "$work/load.log" >&2
	alive "$name" "${pid_of[$name]}"
}

runs() { [[ " $scenarios " == *" $1 "* ]]; }
if runs max; then
	log "(a) max throughput @ $connections connections, $duration"
	for t in sqlite postgres; do drive max "$t" -connections "$connections" -duration "$duration" -warmup "$warmup"; done
fi
if runs rate; then
	log "(b) constant $rate req/s, $duration"
	for t in direct sqlite postgres; do drive rate "$t" -rate "$rate" -duration "$duration" -warmup "$warmup"; done
fi
idle_conns=$("${psql[@]}" -d svcgw -At -c "SELECT COUNT(*) FROM pg_stat_activity WHERE application_name = 'svcgw'")

# Stop both, then count what each ledger holds.
for t in sqlite postgres; do kill -TERM "${pid_of[$t]}"; done
for t in sqlite postgres; do
	for _ in $(seq 300); do kill -0 "${pid_of[$t]}" 2>/dev/null || break; sleep 0.1; done
done
gens_sqlite=$("$bin/svcgw" --db "$work/svcgw.db" usage --account bench --json 2>/dev/null | jq '.total.requests')
gens_postgres=$("${psql[@]}" -d svcgw -At -c "SELECT COUNT(*) FROM generations")
ok_sqlite=$(jq -s '[.[].ok_total] | add' "$out"/*-sqlite.json)
ok_postgres=$(jq -s '[.[].ok_total] | add' "$out"/*-postgres.json)

# metric NAME FILTER: the sum of the samples of metric NAME whose labels
# match FILTER, in after − before of (b), for instance NAME of the stores.
mdelta() {
	local inst=$1 metric=$2 filter=${3:-}
	awk -v m="$metric" -v f="$filter" '
		FNR == 1 { file++ }
		$1 ~ "^" m "([{]|$)" && index($1, f) { v[file] += $2 }
		END { printf "%.0f", v[2] - v[1] }' "$out/metrics-$inst-before.txt" "$out/metrics-$inst-after.txt"
}
# hquantile INST METRIC Q: the upper bound of the histogram bucket holding
# quantile Q of the observations of (b) (ok results only).
hquantile() {
	local inst=$1 metric=$2 q=$3
	awk -v m="${metric}_bucket" -v q="$q" '
		FNR == 1 { file++ }
		index($1, m "{") == 1 && $1 !~ /result="error"/ {
			le = $1; sub(/.*le="/, "", le); sub(/".*/, "", le)
			if (file == 1) b[le] -= $2; else b[le] += $2
			if (!(le in seen)) { seen[le] = 1; order[++n] = le }
		}
		END {
			total = b["+Inf"]
			if (total <= 0) { print "–"; exit }
			for (i = 1; i <= n; i++) if (b[order[i]] >= q * total) { print (order[i] == "+Inf" ? "> last bucket" : "≤ " order[i] * 1000 " ms"); exit }
		}' "$out/metrics-$inst-before.txt" "$out/metrics-$inst-after.txt"
}
errors_svcgw=$(cat "$work/sqlite.log" "$work/postgres.log" | grep -c 'level=ERROR' || true)

j() { jq -r "$1" "$2"; }
ms() { printf '%.3f' "$1"; }
{
	echo "## svcgw on PostgreSQL vs SQLite, $(date -u +%Y-%m-%dT%H:%MZ)"
	echo
	echo "- machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(uname -sr), $(go version | cut -d' ' -f3); PostgreSQL $pgversion (throwaway cluster, default settings, Unix socket)"
	echo "- load average at the end: $(cut -d' ' -f1-3 /proc/loadavg) (other work on the machine shifts every figure)"
	if [ "$pg_cpu" = "$target_cpu" ]; then where="the target's core: its work shares svcgw's core, as SQLite's does inside svcgw"; else where="cpu $pg_cpu (BENCH_PG_CPU), beside the driver and the upstream mock: svcgw's core is svcgw's alone"; fi
	echo "- svcgw (either store) and the direct mock pinned to cpu $target_cpu; the load driver and the upstream mock on cpu $driver_cpu; PostgreSQL on $where; log level $log_level"
	echo "- svcgw logs: $errors_svcgw ERROR lines"
	echo
	if runs max; then
		echo "### (a) maximum throughput, non-streaming chat completions ($connections connections, $duration)"
		echo
		echo "| | svcgw on SQLite | svcgw on PostgreSQL | PostgreSQL / SQLite |"
		echo "|---|---:|---:|---:|"
		a_s=$(j .throughput "$out/max-sqlite.json")
		a_p=$(j .throughput "$out/max-postgres.json")
		echo "| req/s | $(printf %.0f "$a_s") | $(printf %.0f "$a_p") | $(awk -v p="$a_p" -v s="$a_s" 'BEGIN{printf "%.2f×%s", p/s, (p/s >= 0.8 ? " (target ≥ 0.8×: met)" : " (target ≥ 0.8×: MISSED)")}') |"
		echo "| success (%) | $(printf %.2f "$(j .success_pct "$out/max-sqlite.json")") | $(printf %.2f "$(j .success_pct "$out/max-postgres.json")") | |"
		echo "| p50 / p99 (ms) | $(ms "$(j .latency.p50_ms "$out/max-sqlite.json")") / $(ms "$(j .latency.p99_ms "$out/max-sqlite.json")") | $(ms "$(j .latency.p50_ms "$out/max-postgres.json")") / $(ms "$(j .latency.p99_ms "$out/max-postgres.json")") | |"
		echo "| CPU per call (µs, svcgw alone) | $(printf %.1f "$(j '.cpu_per_call_us // 0' "$out/max-sqlite.json")") | $(printf %.1f "$(j '.cpu_per_call_us // 0' "$out/max-postgres.json")") | |"
		c_s=$(j '.cpu_per_call_us // 0' "$out/max-sqlite.json")
		c_p=$(j '.cpu_per_call_us // 0' "$out/max-postgres.json")
		echo "| calls per second of svcgw's own CPU (10⁶ / CPU per call; PostgreSQL's not counted) | $(awk -v c="$c_s" 'BEGIN{printf "%.0f", 1e6/c}') | $(awk -v c="$c_p" 'BEGIN{printf "%.0f", 1e6/c}') | $(awk -v s="$c_s" -v p="$c_p" 'BEGIN{printf "%.2f×", s/p}') |"
		echo "| svcgw's share of its core / the core busy (%) | $(printf %.0f "$(j '.target_cpu_pct // 0' "$out/max-sqlite.json")") / $(printf %.0f "$(j '.core_busy_pct // 0' "$out/max-sqlite.json")") | $(printf %.0f "$(j '.target_cpu_pct // 0' "$out/max-postgres.json")") / $(printf %.0f "$(j '.core_busy_pct // 0' "$out/max-postgres.json")") | |"
		echo "| PostgreSQL connections held, most | | $(cat "$out/conns-max") | |"
		echo
	fi
	if runs rate; then
		echo "### (b) $rate req/s, non-streaming chat completions ($duration)"
		echo
		echo "| | direct | svcgw on SQLite | svcgw on PostgreSQL | added over direct: SQLite / PostgreSQL (ms) |"
		echo "|---|---:|---:|---:|---:|"
		echo "| success (%) | $(j .success_pct "$out/rate-direct.json") | $(j .success_pct "$out/rate-sqlite.json") | $(j .success_pct "$out/rate-postgres.json") | |"
		echo "| achieved req/s | $(printf %.0f "$(j .throughput "$out/rate-direct.json")") | $(printf %.0f "$(j .throughput "$out/rate-sqlite.json")") | $(printf %.0f "$(j .throughput "$out/rate-postgres.json")") | |"
		for q in p50 p90 p99; do
			d=$(j ".latency.${q}_ms" "$out/rate-direct.json")
			s=$(j ".latency.${q}_ms" "$out/rate-sqlite.json")
			p=$(j ".latency.${q}_ms" "$out/rate-postgres.json")
			echo "| $q (ms) | $(ms "$d") | $(ms "$s") | $(ms "$p") | $(awk -v d="$d" -v s="$s" -v p="$p" 'BEGIN{printf "+%.3f / +%.3f", s-d, p-d}') |"
		done
		echo "| CPU per call (µs, svcgw alone) | | $(printf %.1f "$(j '.cpu_per_call_us // 0' "$out/rate-sqlite.json")") | $(printf %.1f "$(j '.cpu_per_call_us // 0' "$out/rate-postgres.json")") | |"
		echo "| PostgreSQL connections held, most | | | $(cat "$out/conns-rate") | idle after the load: $idle_conns |"
		echo
		echo
		echo "### (c) the ledger during (b), per committed generation"
		echo
		echo "From each instance's /metrics (svcgw_ledger_*) before and after (b), and PostgreSQL's own figures over the same span (its processes' CPU time from /proc, pg_stat_database, pg_stat_statements): counts, not clock readings, so they hold on a busy machine."
		echo
		echo "| | svcgw on SQLite | svcgw on PostgreSQL |"
		echo "|---|---:|---:|"
		g_s=$(mdelta sqlite svcgw_ledger_generations_committed_total)
		g_p=$(mdelta postgres svcgw_ledger_generations_committed_total)
		n_s=$(mdelta sqlite svcgw_ledger_commit_duration_seconds_count 'result="ok"')
		n_p=$(mdelta postgres svcgw_ledger_commit_duration_seconds_count 'result="ok"')
		t_s=$(awk -v a="$(grep -h '^svcgw_ledger_commit_duration_seconds_sum{result="ok"}' "$out/metrics-sqlite-before.txt" | awk '{print $2}')" -v b="$(grep -h '^svcgw_ledger_commit_duration_seconds_sum{result="ok"}' "$out/metrics-sqlite-after.txt" | awk '{print $2}')" 'BEGIN{printf "%.6f", b-a}')
		t_p=$(awk -v a="$(grep -h '^svcgw_ledger_commit_duration_seconds_sum{result="ok"}' "$out/metrics-postgres-before.txt" | awk '{print $2}')" -v b="$(grep -h '^svcgw_ledger_commit_duration_seconds_sum{result="ok"}' "$out/metrics-postgres-after.txt" | awk '{print $2}')" 'BEGIN{printf "%.6f", b-a}')
		per() { awk -v a="$1" -v b="$2" -v f="${3:-%.1f}" 'BEGIN{ if (b > 0) printf f, a/b; else printf "–" }'; }
		echo "| generations committed | $g_s | $g_p |"
		echo "| ledger commits (transactions of the writer) | $n_s | $n_p |"
		echo "| generations per commit, mean | $(per "$g_s" "$n_s") | $(per "$g_p" "$n_p") |"
		echo "| commit wall time, mean (ms) | $(per "$(awk -v t="$t_s" 'BEGIN{print t*1000}')" "$n_s" %.2f) | $(per "$(awk -v t="$t_p" 'BEGIN{print t*1000}')" "$n_p" %.2f) |"
		for q in 0.5 0.9 0.99; do
			echo "| commit wall time, p$(awk -v q="$q" 'BEGIN{print q*100}') (bucket) | $(hquantile sqlite svcgw_ledger_commit_duration_seconds "$q") | $(hquantile postgres svcgw_ledger_commit_duration_seconds "$q") |"
		done
		echo "| commit wall time per generation (µs) | $(per "$(awk -v t="$t_s" 'BEGIN{print t*1e6}')" "$g_s") | $(per "$(awk -v t="$t_p" 'BEGIN{print t*1e6}')" "$g_p") |"
		x_p=$(( $(cat "$out/pgxact-after") - $(cat "$out/pgxact-before") - 1 ))
		ticks=$(getconf CLK_TCK)
		cpu_p=$(( $(cat "$out/pgcpu-after") - $(cat "$out/pgcpu-before") ))
		echo "| PostgreSQL transactions (all of svcgw's: ledger, leases, heartbeat, reads) per generation | | $(per "$x_p" "$g_p" %.4f) ($x_p in all) |"
		if [ -s "$out/statements.tsv" ]; then
			st_p=$(awk -F '\t' '{n += $1} END {print n+0}' "$out/statements.tsv")
			echo "| PostgreSQL statements per generation (pg_stat_statements, BEGIN/COMMIT included) | | $(per "$st_p" "$g_p" %.4f) ($st_p in all) |"
		fi
		echo "| PostgreSQL's CPU per generation (µs, all its processes) | | $(per "$(awk -v c="$cpu_p" -v t="$ticks" 'BEGIN{print c*1e6/t}')" "$g_p") ($(awk -v c="$cpu_p" -v t="$ticks" 'BEGIN{printf "%.2f", c/t}') s in all) |"
		if [ -s "$out/statements.tsv" ]; then
			echo
			echo "PostgreSQL's statements during (b), by time (execution + planning), from pg_stat_statements:"
			echo
			echo "| calls | per generation | time (ms) | per call (µs) | rows | planned | statement |"
			echo "|---:|---:|---:|---:|---:|---:|---|"
			awk -F '\t' -v g="$g_p" 'NR <= 15 { q = $5; gsub(/\|/, "\\|", q); printf "| %d | %.4f | %.1f | %.1f | %d | %d | `%s` |\n", $1, (g > 0 ? $1 / g : 0), $2, ($1 > 0 ? $2 * 1000 / $1 : 0), $3, $4, q }' "$out/statements.tsv"
		fi
	fi
	echo
	echo "- targets (issue 13): added p50 ≤ +0.5 ms and p99 ≤ +3 ms over direct at $rate req/s; connections a small fixed number (the pools' sizes and the liveness lock's connection: 2 + 4 + 2 + 1 = 9 at most)"
	echo "- ledgers after shutdown: SQLite $gens_sqlite generations for $ok_sqlite successful calls; PostgreSQL $gens_postgres generations for $ok_postgres successful calls"
} | tee "$out/report.md"
[ "${#failed[@]}" -eq 0 ] || die "scenarios that could not be measured: ${failed[*]}"
log "results: $out"
