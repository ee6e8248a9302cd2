#!/usr/bin/env bash
# bench/ledger.sh — the ledger at an operator's scale (bench/README.md, "The
# ledger benchmark").
#
# Seeds a database with synthetic calls through svcgw's own ledger writer
# (bench/seed; skipped when the database exists), serves it with svcgw in
# front of the OpenAI-protocol mock, and measures with bench/ledger: the
# latency of every account read (usage in each grouping over a day, a week
# and all time; generation; credits), then chat completions at a constant
# rate, alternately alone and with clients flooding /usage over all time.
# Optionally it times `svcgw backup` of the database too. Loopback only;
# everything it starts is stopped on exit.
#
# Settings (environment):
#   LEDGER_DB=/tmp/svcgw-ledger.db  the database; seeded if missing, kept
#                                   afterwards (seeding 10M calls takes
#                                   minutes) unless LEDGER_KEEP_DB=0
#   LEDGER_CALLS=10000000 LEDGER_DAYS=90 LEDGER_KEYS=1000 LEDGER_APPS=50
#   LEDGER_ACCOUNTS=1               accounts the keys are spread over (1: the
#                                   worst case, every call in one account)
#   LEDGER_BATCH=131072             the seeder's ledger batch size
#   LEDGER_READS=500                requests per kind of read
#   LEDGER_RATE=1000                chat completions per second
#   LEDGER_PHASE=20s                length of each chat phase
#   LEDGER_PHASES=quiet,flood,quiet,flood
#   LEDGER_HAMMER=8                 clients flooding /usage in flood phases
#   LEDGER_HAMMER_ONE_KEY=0         1: all of them with one key
#   LEDGER_ONLY="reads,stalls"      what the driver measures ("none": nothing,
#                                   e.g. to run the upgrade alone; "admin":
#                                   the management reads of the operator's
#                                   page, on the admin listener)
#                                   LEDGER_PHASES may name "mgmt" phases too:
#                                   LEDGER_HAMMER clients send those management
#                                   reads instead of flooding /usage
#   LEDGER_BACKUP=0                 1: also time svcgw backup of the database
#   LEDGER_UPGRADE=0                1: also measure an upgrade: a copy of the
#                                   database without its roll-ups (as made
#                                   before them) is served, and chat phases
#                                   run while its backfill does, until done
#   LEDGER_PIN=1                    pin svcgw to LEDGER_TARGET_CPU (1) and the
#                                   driver and mock to LEDGER_DRIVER_CPU (0),
#                                   as bench/run.sh does; 0: no pinning
#   LEDGER_OUT=                     results directory (default: in a temp dir)
#   LEDGER_SVCGW_ENV=               extra environment for svcgw, e.g. "GOMAXPROCS=2"
#   LEDGER_SVCGW_BIN=               measure this svcgw binary instead of building the tree's
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)

db=${LEDGER_DB:-/tmp/svcgw-ledger.db}
calls=${LEDGER_CALLS:-10000000}
days=${LEDGER_DAYS:-90}
nkeys=${LEDGER_KEYS:-1000}
apps=${LEDGER_APPS:-50}
accounts=${LEDGER_ACCOUNTS:-1}
batch=${LEDGER_BATCH:-131072}
reads=${LEDGER_READS:-500}
rate=${LEDGER_RATE:-1000}
phase=${LEDGER_PHASE:-20s}
phases=${LEDGER_PHASES:-quiet,flood,quiet,flood}
hammer=${LEDGER_HAMMER:-8}
one_key=${LEDGER_HAMMER_ONE_KEY:-0}
only=${LEDGER_ONLY:-reads,stalls}
backup=${LEDGER_BACKUP:-0}
upgrade=${LEDGER_UPGRADE:-0}
pin=${LEDGER_PIN:-1}
read -r -a svcgw_env <<<"${LEDGER_SVCGW_ENV:-}"
target_cpu=${LEDGER_TARGET_CPU:-1}
driver_cpu=${LEDGER_DRIVER_CPU:-0}

work=$(mktemp -d "${TMPDIR:-/tmp}/svcgw-ledger.XXXXXX")
out=${LEDGER_OUT:-$work/results}
mkdir -p "$out" "$work/bin"
bin=$work/bin

log() { printf '[ledger %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "FAILED: $*"; exit 1; }

pids=()
cleanup() {
	local code=$?
	for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
	for pid in "${pids[@]}"; do
		for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
		kill -KILL "$pid" 2>/dev/null || true
	done
	wait 2>/dev/null || true
	rm -rf "$work/bin" "$work/backup.db" "$work/upgrade.db" "$work/upgrade.db-wal" "$work/upgrade.db-shm"
	if [ "${LEDGER_KEEP_DB:-1}" = 0 ]; then
		rm -f "$db" "$db-wal" "$db-shm" "$db-bulkload" "$db.keys" "$db.ids" "$db.seed.json"
	fi
	exit "$code"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

pin_target=()
pin_driver=()
if [ "$pin" = 1 ] && command -v taskset >/dev/null && [ "$(nproc)" -gt 1 ]; then
	pin_target=(taskset -c "$target_cpu")
	pin_driver=(taskset -c "$driver_cpu")
fi
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

log "building into $bin"
(
	cd "$repo"
	export CGO_ENABLED=0
	if [ -n "${LEDGER_SVCGW_BIN:-}" ]; then
		cp "$LEDGER_SVCGW_BIN" "$bin/svcgw"
	else
		go build -o "$bin/svcgw" .
	fi
	go -C bench build -tags bench -o "$bin/" ./mock ./seed ./ledger # their own module
) || die "build"

# --- seed --------------------------------------------------------------------
if [ ! -e "$db" ]; then
	log "seeding $db: $calls calls over $days days, $nkeys keys, $apps applications, $accounts account(s); load average $(cut -d' ' -f1-3 /proc/loadavg)"
	"$bin/seed" -db "$db" -calls "$calls" -days "$days" -keys "$nkeys" -apps "$apps" -accounts "$accounts" \
		-batch "$batch" -secrets "$db.keys" -sample "$db.ids" -json "$db.seed.json" >"$work/seed.out" 2>"$work/seed.log" ||
		die "seed; see $work/seed.log"
	echo "load average after seeding: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$work/seed.log"
	cp "$work/seed.log" "$out/seed.log"
else
	log "using the existing $db (seeded as $db.seed.json says)"
fi
[ -s "$db.seed.json" ] || die "$db.seed.json is missing (the seeding did not finish): delete $db, $db-wal, $db-shm and $db-bulkload to seed again"
cp "$db.seed.json" "$out/seed.json"
end=$(sed -n 's/.*"end": "\(.*\)".*/\1/p' "$db.seed.json")

# --- serve -------------------------------------------------------------------
# A read-only admin token for the management reads (made while nothing
# serves the database; a token of its own each run).
admin_token=$("$bin/svcgw" --db "$db" admin tokens create --name "ledger-bench-$(date +%s)-$$" --read-only 2>>"$work/admin.log") ||
	die "admin tokens create; see $work/admin.log"
"${pin_driver[@]}" "$bin/mock" -addr-file "$work/upstream.addr" >"$work/mock.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do [ -s "$work/upstream.addr" ] && break; sleep 0.05; done
[ -s "$work/upstream.addr" ] || die "mock did not start"
cat >"$work/svcgw.yaml" <<EOF
upstreams:
  mock:
    protocol: openai
    base_url: http://$(cat "$work/upstream.addr")/v1
    api_key: bench
    models:
      mock-model: {context_length: 128000, max_completion_tokens: 16384}
routes:
  default: [mock/mock-model]
EOF
env "${svcgw_env[@]}" "${pin_target[@]}" "$bin/svcgw" serve --db "$db" --config "$work/svcgw.yaml" --addr 127.0.0.1:0 \
	--admin-addr 127.0.0.1:0 --log-level info --shutdown-grace 5s >"$work/svcgw.out" 2>"$work/svcgw.log" &
svcgw_pid=$!
pids+=("$svcgw_pid")
for _ in $(seq 600); do
	grep -q 'svcgw listening' "$work/svcgw.log" 2>/dev/null && break
	kill -0 "$svcgw_pid" 2>/dev/null || break
	sleep 0.05
done
addr=$(grep -o 'msg="svcgw listening" addr=[0-9.:]*' "$work/svcgw.log" | head -1 | sed 's/.*addr=//') || true
[ -n "$addr" ] || die "svcgw did not start; see $work/svcgw.log"
admin_addr=$(grep -o 'admin_addr=[0-9.:]*' "$work/svcgw.log" | head -1 | sed 's/.*=//') || true
[ -n "$admin_addr" ] || die "svcgw did not say its admin address; see $work/svcgw.log"
log "svcgw on $addr, admin listener on $admin_addr (pid $svcgw_pid), database $(du -h "$db" | cut -f1)"

# --- backup --------------------------------------------------------------------
if [ "$backup" = 1 ]; then
	log "svcgw backup of the served database; load average $(cut -d' ' -f1-3 /proc/loadavg)"
	"$bin/svcgw" --db "$db" backup "$work/backup.db" | tee "$out/backup.txt" >&2 || die "backup"
	rm -f "$work/backup.db"
fi

# --- measure -----------------------------------------------------------------
hammer_flags=()
[ "$one_key" = 1 ] && hammer_flags+=(-hammer-one-key)
log "measuring ($only); load average $(cut -d' ' -f1-3 /proc/loadavg)"
"${pin_driver[@]}" "$bin/ledger" -base "http://$addr" -secrets "$db.keys" -sample "$db.ids" -end "$end" \
	-reads "$reads" -rate "$rate" -phase "$phase" -phases "$phases" -hammer "$hammer" -only "$only" -pid "$svcgw_pid" \
	-admin "http://$admin_addr" -admin-token "$admin_token" "${hammer_flags[@]}" -out "$out/ledger.json" >"$out/ledger.md" 2>>"$work/ledger.log" || die "driver; see $work/ledger.log"

kill -TERM "$svcgw_pid"
wait "$svcgw_pid" 2>/dev/null || true
errors=$(grep -c 'level=ERROR' "$work/svcgw.log" || true)
grep -v 'msg=request ' "$work/svcgw.log" >"$out/svcgw.log" || true

# --- upgrade -------------------------------------------------------------------
if [ "$upgrade" = 1 ]; then
	log "upgrade: copying the database and stripping its roll-ups"
	cp "$db" "$work/upgrade.db"
	"$bin/seed" -db "$work/upgrade.db" -strip-rollups || die "strip roll-ups"
	"${pin_target[@]}" "$bin/svcgw" serve --db "$work/upgrade.db" --config "$work/svcgw.yaml" --addr 127.0.0.1:0 \
		--log-level info --shutdown-grace 5s >"$work/upgrade.out" 2>"$work/upgrade.log" &
	upgrade_pid=$!
	pids+=("$upgrade_pid")
	for _ in $(seq 600); do
		grep -q 'svcgw listening' "$work/upgrade.log" 2>/dev/null && break
		kill -0 "$upgrade_pid" 2>/dev/null || break
		sleep 0.05
	done
	uaddr=$(grep -o 'msg="svcgw listening" addr=[0-9.:]*' "$work/upgrade.log" | head -1 | sed 's/.*addr=//') || true
	[ -n "$uaddr" ] || die "svcgw did not start on the stripped copy; see $work/upgrade.log"
	started=$SECONDS
	log "upgrade: svcgw on $uaddr rolls up the old generations; chat phases of $phase while it does"
	: >"$out/upgrade.md"
	while ! grep -q 'usage roll-ups: complete' "$work/upgrade.log"; do
		kill -0 "$upgrade_pid" 2>/dev/null || die "svcgw died during the backfill; see $work/upgrade.log"
		[ $((SECONDS - started)) -lt 3600 ] || die "the backfill did not complete within an hour"
		"${pin_driver[@]}" "$bin/ledger" -base "http://$uaddr" -secrets "$db.keys" -only stalls -phases quiet \
			-rate "$rate" -phase "$phase" >>"$out/upgrade.md" 2>>"$work/ledger.log" || die "driver during the backfill"
		grep 'backfill progress' "$work/upgrade.log" | tail -n 1 >&2 || true
	done
	"${pin_driver[@]}" "$bin/ledger" -base "http://$uaddr" -secrets "$db.keys" -only stalls -phases quiet \
		-rate "$rate" -phase "$phase" >>"$out/upgrade.md" 2>>"$work/ledger.log" || die "driver after the backfill"
	kill -TERM "$upgrade_pid"
	wait "$upgrade_pid" 2>/dev/null || true
	grep -v 'msg=request ' "$work/upgrade.log" >"$out/upgrade.log" || true
	rm -f "$work/upgrade.db" "$work/upgrade.db-wal" "$work/upgrade.db-shm"
fi

{
	echo "## svcgw ledger benchmark, $(date -u +%Y-%m-%dT%H:%MZ)"
	echo
	echo "- machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(uname -sr), $(go version | cut -d' ' -f3)"
	echo "- load average at the end: $(cut -d' ' -f1-3 /proc/loadavg) (other work on the machine shifts every figure)"
	if [ "${#pin_target[@]}" -gt 0 ]; then
		echo "- svcgw pinned to cpu $target_cpu; driver and mock on cpu $driver_cpu${LEDGER_SVCGW_ENV:+; svcgw environment $LEDGER_SVCGW_ENV}"
	else
		echo "- nothing pinned"
	fi
	echo "- database: $(stat -c %s "$db") bytes ($(du -h "$db" | cut -f1)); seeding: $(sed -n 's/.*"rows_per_sec": \([0-9]*\).*/\1/p' "$db.seed.json") rows/s, $(sed -n 's/.*"cpu_us_per_call": \([0-9]*\.[0-9]\{0,2\}\).*/\1/p' "$db.seed.json") µs of CPU per call (writer busy $(sed -n 's/.*"writer_busy": \([0-9]*\.[0-9]\{0,3\}\).*/\1/p' "$db.seed.json"); Close after the last commit $(sed -n 's/.*"close_seconds": \([0-9]*\.[0-9]\{0,2\}\).*/\1/p' "$db.seed.json") s), $(sed -n 's/.*"bytes_per_call": \([0-9.]*\).*/\1/p' "$db.seed.json") bytes per call"
	echo "- svcgw log: $errors ERROR lines"
	[ -s "$out/backup.txt" ] && echo "- $(cat "$out/backup.txt")"
	echo
	cat "$out/ledger.md"
	if [ -s "$out/upgrade.md" ]; then
		echo "### Upgrade: the backfill of a database made before the roll-ups, while serving"
		echo
		grep 'usage roll-ups' "$out/upgrade.log" | sed 's/^/    /'
		echo
		echo "Chat phases while it ran (the last one after it completed):"
		echo
		grep -m1 '^| chat phase' "$out/upgrade.md"
		grep -m1 '^|---' "$out/upgrade.md"
		grep '^| quiet' "$out/upgrade.md"
	fi
} | tee "$out/report.md"
log "results: $out"
