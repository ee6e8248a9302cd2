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
# BENCH_OUT= (results directory; default: results/ in the work directory).
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
"${pin_pg[@]}" "${as_pg[@]}" "$pgbin/pg_ctl" -D "$pgdata" -l "$work/pglog/server.log" -w \
	-o "-c listen_addresses='' -c unix_socket_directories='$work/pgsock' -p $pgport -c max_connections=50" start >/dev/null ||
	die "PostgreSQL did not start; see $work/pglog/server.log"
psql=("$pgbin/psql" -X -q -h "$work/pgsock" -p "$pgport" -U postgres)
"${psql[@]}" -d postgres -c 'CREATE DATABASE svcgw' || die "createdb"
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
declare -A addr_of pid_of key_of
addr_of[direct]=$direct_addr
pid_of[direct]=$direct_pid
start_svcgw() {
	local name=$1 db=$2
	"$bin/svcgw" --db "$db" init 2>>"$work/keys.log" || die "init $name; see $work/keys.log"
	key_of[$name]=$("$bin/svcgw" --db "$db" keys create --account bench 2>>"$work/keys.log") || die "keys create $name"
	"$bin/svcgw" --db "$db" credits add --account bench 1000000 >/dev/null 2>>"$work/keys.log" || die "credits add $name"
	"${pin_target[@]}" "$bin/svcgw" serve --db "$db" --addr 127.0.0.1:0 --log-level "$log_level" --shutdown-grace 5s \
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
}
start_svcgw sqlite "$work/svcgw.db"
start_svcgw postgres "$pgdsn"
log "direct $direct_addr · svcgw/sqlite ${addr_of[sqlite]} · svcgw/postgres ${addr_of[postgres]} on cpu $target_cpu; PostgreSQL $pgversion on cpu $pg_cpu; driver and upstream mock on cpu $driver_cpu"

# sample_conns FILE: the most connections svcgw holds to PostgreSQL, sampled
# until killed.
sample_conns() {
	local most=0 n
	while :; do
		n=$("${psql[@]}" -d svcgw -At -c "SELECT COUNT(*) FROM pg_stat_activity WHERE application_name = 'svcgw'" 2>/dev/null || echo 0)
		if [ "$n" -gt "$most" ]; then most=$n; echo "$most" >"$1"; fi
		sleep 0.2
	done
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
	if ! "${pin_driver[@]}" "$bin/load" run -scenario "$scenario" -target "$target" \
		-base "http://${addr_of[$name]}" -pid "${pid_of[$name]}" \
		-timeout "$call_timeout" -out "$out/$scenario-$name.json" "${extra[@]}" "$@" 2>>"$work/load.log"; then
		failed+=("$scenario/$name")
		log "scenario $scenario against $name failed; see $work/load.log"
	fi
	if [ -n "$sampler" ]; then kill "$sampler" 2>/dev/null || true; wait "$sampler" 2>/dev/null || true; fi
	tail -n 1 "$work/load.log" >&2
	alive "$name" "${pid_of[$name]}"
}

log "(a) max throughput @ $connections connections, $duration"
for t in sqlite postgres; do drive max "$t" -connections "$connections" -duration "$duration" -warmup "$warmup"; done
log "(b) constant $rate req/s, $duration"
for t in direct sqlite postgres; do drive rate "$t" -rate "$rate" -duration "$duration" -warmup "$warmup"; done
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
	echo "- targets (issue 13): added p50 ≤ +0.5 ms and p99 ≤ +3 ms over direct at $rate req/s; connections a small fixed number (the pools' sizes: 2 + 4 + 2 = 8 at most)"
	echo "- ledgers after shutdown: SQLite $gens_sqlite generations for $ok_sqlite successful calls; PostgreSQL $gens_postgres generations for $ok_postgres successful calls"
} | tee "$out/report.md"
[ "${#failed[@]}" -eq 0 ] || die "scenarios that could not be measured: ${failed[*]}"
log "results: $out"
