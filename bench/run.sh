#!/usr/bin/env bash
# bench/run.sh — svcgw's benchmark in one command (bench/README.md).
#
# Builds svcgw and the bench programs into a temporary directory, starts an
# OpenAI-compatible mock upstream, a bare reverse proxy to it and svcgw routed
# to it twice (svcgw reaching the mock over HTTP/1.1, svcgw-h2c over h2c),
# runs every scenario against direct-to-mock, the proxy and each svcgw, and
# prints the figures side by side, with issue 19's four figures (ratios to
# the floor measured in the same run) at the end. Loopback only; everything it starts is
# stopped on exit. It exits non-zero when the harness itself fails (a build,
# a process that does not start or dies, a scenario that cannot be measured);
# a target missing the issue's figures is reported, not an error, unless
# BENCH_STRICT=1.
#
# Settings (environment):
#   BENCH_DURATION=10s          measured phase of scenarios a, b, c
#   BENCH_WARMUP=1s             unmeasured warm-up before each of them
#   BENCH_CONNECTIONS=50        closed-loop connections (a, c, e)
#   BENCH_RATE=2000             constant rate, req/s (b)
#   BENCH_STREAM_CHUNKS=16      content chunks per streamed reply (c)
#   BENCH_STREAM_CHUNK_DELAY=0s delay between them (c)
#   BENCH_STREAM_RATE=500       streams per second for time to first token (c)
#   BENCH_STREAMS=1000          streams held open at once (d)
#   BENCH_HOLD_CHUNKS=20        … each with this many chunks
#   BENCH_HOLD_CHUNK_DELAY=500ms … this far apart (so each lasts ~10 s)
#   BENCH_SURFACE_DURATION=5s   measured phase of each surface in (e)
#   BENCH_EMBED_INPUTS=8        texts per embeddings call (h); the mock answers 1,536 floats each
#   BENCH_EMBED_FORMAT=float    encoding_format of each call (h): float, or base64 (the OpenAI SDKs' default)
#   BENCH_TIMEOUT=10s           per-call timeout (bounds a run against a target that hangs)
#   BENCH_SCENARIOS="max max-vegeta rate stream hold surfaces embeddings"
#                               (max: bench/load's closed-loop driver; max-vegeta: the same load by vegeta)
#   BENCH_TARGETS="direct proxy svcgw svcgw-h2c"
#                               also: floor (bench/floor, the least a JSON-reading
#                               gateway does on net/http) and floor-copy (its
#                               ReverseProxy mode), e.g. "direct proxy floor svcgw"
#   BENCH_TARGET_CPU=1          core the target under test is pinned to
#   BENCH_DRIVER_CPU=0          core of the load driver and the upstream mock
#   BENCH_LOG_LEVEL=info        svcgw's --log-level (info: one access line per call)
#   BENCH_SVCGW_ENV=            extra environment for svcgw alone, e.g. "GOMEMLIMIT=48MiB GOGC=50"
#   BENCH_PROFILE=0             1: serve svcgw with pprof (bench/svcgwprof), and the
#                               floors with theirs, and
#                               save a CPU profile of each of its measured phases,
#                               and a heap profile once all of (d)'s streams are open
#   BENCH_TRACE=0               1 (with BENCH_PROFILE=1): also save an execution trace of
#                               svcgw over each measured phase (trace-SCENARIO-TARGET.out;
#                               `go tool trace`, or bench/schedtrace for who held the P)
#   BENCH_SVCGW_BIN=            measure this svcgw binary instead of building the tree's
#   BENCH_KEEP=0                1: keep the binaries, svcgw's database and its full log
#   BENCH_OUT=                  keep the results here (default: results/ in the work dir,
#                               which is kept)
#   BENCH_STRICT=0              1: exit 3 when an svcgw misses a target
#   BENCH_METRICS=1             1: also measure a second svcgw serving its admin
#                               listener (so recording Prometheus metrics) in
#                               scenarios a, b and c, right after the first:
#                               the (f) table is what metrics cost a call
#   BENCH_SCRAPE_INTERVAL=5s    how often /metrics of that svcgw is scraped (sleep(1) syntax)
#   BENCH_METRICS_REPEAT=3      pairs of runs (svcgw, svcgw with metrics) per scenario,
#                               alternating which goes first; (f) shows the medians
#   BENCH_TRACING=0             1: also measure a third svcgw tracing every call
#                               (OTEL_TRACES_SAMPLER=always_on) into a real Jaeger over
#                               OTLP/gRPC, right after svcgw in the scenarios of
#                               BENCH_TRACING_SCENARIOS: the (g) table is what tracing
#                               costs a call, pair by pair (issue 38)
#   BENCH_TRACING_SCENARIOS=rate  which scenarios get that comparison (rate max stream streamrate)
#   BENCH_TRACING_REPEAT=5      pairs of runs (svcgw, svcgw traced) per scenario, alternating
#                               which goes first
#   BENCH_JAEGER=~/.cache/svcgw/jaeger-v1.76.0/jaeger
#                               the Jaeger binary (scripts/test builds it there); it runs
#                               on the driver's core, with in-memory storage
#   BENCH_TRACING_ENDPOINT=     an OTLP/gRPC endpoint to trace into instead of that Jaeger
#                               (none is started), e.g. http://127.0.0.1:1 where nothing
#                               listens: the spans are made and encoded, none delivered
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)

duration=${BENCH_DURATION:-10s}
warmup=${BENCH_WARMUP:-1s}
connections=${BENCH_CONNECTIONS:-50}
rate=${BENCH_RATE:-2000}
stream_chunks=${BENCH_STREAM_CHUNKS:-16}
stream_delay=${BENCH_STREAM_CHUNK_DELAY:-0s}
stream_rate=${BENCH_STREAM_RATE:-500}
streams=${BENCH_STREAMS:-1000}
hold_chunks=${BENCH_HOLD_CHUNKS:-20}
hold_delay=${BENCH_HOLD_CHUNK_DELAY:-500ms}
surface_duration=${BENCH_SURFACE_DURATION:-5s}
call_timeout=${BENCH_TIMEOUT:-10s}
embed_inputs=${BENCH_EMBED_INPUTS:-8}
embed_format=${BENCH_EMBED_FORMAT:-float}
scenarios=${BENCH_SCENARIOS:-max max-vegeta rate stream hold surfaces embeddings}
targets=${BENCH_TARGETS:-direct proxy svcgw svcgw-h2c}
target_cpu=${BENCH_TARGET_CPU:-1}
driver_cpu=${BENCH_DRIVER_CPU:-0}
log_level=${BENCH_LOG_LEVEL:-info}
read -r -a svcgw_env <<<"${BENCH_SVCGW_ENV:-}"
profile=${BENCH_PROFILE:-0}
trace=${BENCH_TRACE:-0}
strict=${BENCH_STRICT:-0}
metrics=${BENCH_METRICS:-1}
scrape_interval=${BENCH_SCRAPE_INTERVAL:-5s}
metrics_repeat=${BENCH_METRICS_REPEAT:-3}
tracing=${BENCH_TRACING:-0}
tracing_scenarios=${BENCH_TRACING_SCENARIOS:-rate}
tracing_repeat=${BENCH_TRACING_REPEAT:-5}
jaeger=${BENCH_JAEGER:-$HOME/.cache/svcgw/jaeger-v1.76.0/jaeger}
tracing_endpoint=${BENCH_TRACING_ENDPOINT:-}
case " $targets " in *" svcgw "*) ;; *) metrics=0 tracing=0 ;; esac

work=$(mktemp -d "${TMPDIR:-/tmp}/svcgw-bench.XXXXXX")
out=${BENCH_OUT:-$work/results}
mkdir -p "$out" "$work/bin"
bin=$work/bin

log() { printf '[bench %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "FAILED: $*"; exit 1; }
has() { case " $scenarios " in *" $1 "*) return 0 ;; esac; return 1; }

# Processes we started, by pid; the trap stops exactly those.
pids=()
cleanup() {
	local code=$?
	for pid in "${pids[@]}"; do
		kill -TERM "$pid" 2>/dev/null || true
	done
	for pid in "${pids[@]}"; do
		for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
		kill -KILL "$pid" 2>/dev/null || true
	done
	wait 2>/dev/null || true
	# The binaries, the database and svcgw's full access log are large;
	# the results keep what matters.
	if [ "${BENCH_KEEP:-0}" != 1 ]; then
		rm -rf "$work/bin" "$work"/svcgw*.db*
		for l in "$work"/svcgw*.log; do
			if [ -s "$out/${l##*/}" ]; then rm -f "$l"; fi
		done
	fi
	exit "$code"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if command -v taskset >/dev/null && [ "$(nproc)" -gt 1 ]; then
	pin_target=(taskset -c "$target_cpu")
	pin_driver=(taskset -c "$driver_cpu")
else
	log "taskset or a second core missing: nothing is pinned"
	pin_target=()
	pin_driver=()
fi
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

# --- build -----------------------------------------------------------------
log "building into $bin"
(
	cd "$repo"
	# Built as released (.goreleaser.yaml): without cgo. With it, the net
	# package's resolver links libc, which alone adds ~1.4 MiB of RSS.
	export CGO_ENABLED=0
	if [ -n "${BENCH_SVCGW_BIN:-}" ]; then
		cp "$BENCH_SVCGW_BIN" "$bin/svcgw"
	else
		go build -o "$bin/svcgw" .
	fi
	# The bench programs are their own module (bench/go.mod).
	go -C bench build -tags bench -o "$bin/" ./mock ./proxy ./load
	case " $targets " in *" floor"*) go -C bench build -tags bench -o "$bin/" ./floor ;; esac
	if [ "$profile" = 1 ]; then go -C bench build -tags bench -o "$bin/" ./svcgwprof; fi
) || die "build"

# waitfile FILE PID: wait for a process to write its address file.
waitfile() {
	for _ in $(seq 100); do
		[ -s "$1" ] && return 0
		kill -0 "$2" 2>/dev/null || return 1
		sleep 0.05
	done
	return 1
}

# alive NAME PID: fail the harness if a process we need has died.
alive() { kill -0 "$2" 2>/dev/null || die "$1 (pid $2) is not running; see $work/$1.log"; }

# --- start: the upstream mock, the direct-target mock, the proxy -------------
mock_flags=(-chunks "$stream_chunks" -chunk-delay "$stream_delay")
# The upstream mock serves the proxy and svcgw; it shares the driver's core so
# that the target under test has its core to itself. It speaks h2c beside
# HTTP/1.1, for svcgw-h2c.
"${pin_driver[@]}" "$bin/mock" -addr-file "$work/upstream.addr" "${mock_flags[@]}" -h2c >"$work/upstream.log" 2>&1 &
upstream_pid=$!
pids+=("$upstream_pid")
waitfile "$work/upstream.addr" "$upstream_pid" || die "upstream mock did not start; see $work/upstream.log"
upstream_addr=$(cat "$work/upstream.addr")

# The direct target is a second mock, pinned like every target.
"${pin_target[@]}" "$bin/mock" -addr-file "$work/direct.addr" "${mock_flags[@]}" >"$work/direct.log" 2>&1 &
direct_pid=$!
pids+=("$direct_pid")
waitfile "$work/direct.addr" "$direct_pid" || die "direct mock did not start; see $work/direct.log"
direct_addr=$(cat "$work/direct.addr")

"${pin_target[@]}" "$bin/proxy" -addr-file "$work/proxy.addr" -upstream "http://$upstream_addr" >"$work/proxy.log" 2>&1 &
proxy_pid=$!
pids+=("$proxy_pid")
waitfile "$work/proxy.addr" "$proxy_pid" || die "proxy did not start; see $work/proxy.log"
proxy_addr=$(cat "$work/proxy.addr")

declare -A addr_of=([direct]=$direct_addr [proxy]=$proxy_addr)
declare -A pid_of=([direct]=$direct_pid [proxy]=$proxy_pid)
declare -A key_of=() pprof_of=()

# --- start the JSON floors (BENCH_TARGETS with floor or floor-copy) ----------
# bench/floor, pinned like every target: floor in its JSON mode, floor-copy
# in its ReverseProxy mode, each with one caller key in memory.
floor_addrs=""
for t in $targets; do
	case $t in
	floor) mode=json ;;
	floor-copy) mode=copy ;;
	*) continue ;;
	esac
	key_of[$t]=llm_live_bench-floor
	pargs=()
	if [ "$profile" = 1 ]; then pargs=(-pprof-addr-file "$work/$t.pprof.addr"); fi
	"${pin_target[@]}" "$bin/floor" -mode "$mode" -addr-file "$work/$t.addr" -upstream "http://$upstream_addr" \
		-key "${key_of[$t]}" "${pargs[@]}" >"$work/$t.log" 2>&1 &
	pid_of[$t]=$!
	pids+=("$!")
	waitfile "$work/$t.addr" "${pid_of[$t]}" || die "$t did not start; see $work/$t.log"
	addr_of[$t]=$(cat "$work/$t.addr")
	if [ "$profile" = 1 ]; then
		waitfile "$work/$t.pprof.addr" "${pid_of[$t]}" || die "$t wrote no pprof address"
		pprof_of[$t]=http://$(cat "$work/$t.pprof.addr")
	fi
	floor_addrs+=" · $t ${addr_of[$t]}"
done

# --- start svcgw ---------------------------------------------------------------
# Each svcgw target is its own process with its own database and key:
# svcgw reaches the mock over HTTP/1.1, svcgw-h2c over h2c (h2c: true).
svcgw_targets=()
for t in $targets; do case $t in svcgw*) svcgw_targets+=("$t") ;; esac; done

backend="the OpenAI-protocol mock"
# Only serve and init create a database (binaries from before init let
# keys create do it).
svcgw_help=$("$bin/svcgw" --help 2>&1 || true)
# (Not a pipe into grep -q: under pipefail, svcgw's EPIPE when grep exits
# early would read as "no --config".)
serve_help=$("$bin/svcgw" serve --help 2>&1 || true)
if [[ $serve_help != *--config* ]]; then
	backend="svcgw's built-in fixture backend (this svcgw has no --config)"
	log "svcgw serve has no --config: svcgw is measured on its fixture backend"
fi

# start_svcgw NAME: create NAME's database, key and credits, and serve it.
start_svcgw() {
	local name=$1 db=$work/$1.db
	if [[ $svcgw_help == *" init "* ]]; then
		"$bin/svcgw" --db "$db" init 2>>"$work/keys.log" || die "init $name; see $work/keys.log"
	fi
	"$bin/svcgw" --db "$db" keys create --account bench >"$work/$name.key" 2>>"$work/keys.log" || die "keys create $name; see $work/keys.log"
	key_of[$name]=$(cat "$work/$name.key")
	"$bin/svcgw" --db "$db" credits add --account bench 1000000 >/dev/null 2>>"$work/keys.log" || die "credits add $name; see $work/keys.log"
	local args=(serve --db "$db" --addr 127.0.0.1:0 --log-level "$log_level" --shutdown-grace 5s)
	if [ "$name" = svcgw-metrics ]; then args+=(--admin-addr 127.0.0.1:0); fi
	local tenv=()
	if [ "$name" = svcgw-traced ]; then
		tenv=("OTEL_EXPORTER_OTLP_ENDPOINT=$jaeger_otlp" OTEL_EXPORTER_OTLP_PROTOCOL=grpc
			OTEL_TRACES_SAMPLER=always_on OTEL_SERVICE_NAME=svcgw-bench)
	fi
	if [[ $serve_help == *--config* ]]; then
		# h2c only where asked: an older svcgw (BENCH_SVCGW_BIN) refuses the key.
		local h2c=
		if [ "$name" = svcgw-h2c ]; then h2c="    h2c: true"; fi
		# Embeddings routed only when measured: an svcgw older than
		# them (BENCH_SVCGW_BIN) refuses the request type.
		local embed=
		if has embeddings; then embed="  embedding: [mock/mock-model]"; fi
		cat >"$work/$name.yaml" <<EOF
upstreams:
  mock:
    protocol: openai
    base_url: http://$upstream_addr/v1
    api_key: bench
$h2c
    models:
      mock-model: {context_length: 128000, max_completion_tokens: 16384}
routes:
  default: [mock/mock-model]
$embed
EOF
		args+=(--config "$work/$name.yaml")
	fi
	local exe=$bin/svcgw penv=()
	if [ "$profile" = 1 ]; then
		exe=$bin/svcgwprof
		penv=("BENCH_PPROF_ADDR_FILE=$work/$name.pprof.addr")
	fi
	env "${svcgw_env[@]}" "${penv[@]}" "${tenv[@]}" "${pin_target[@]}" "$exe" "${args[@]}" >"$work/$name.out" 2>"$work/$name.log" &
	local pid=$!
	pids+=("$pid")
	pid_of[$name]=$pid
	for _ in $(seq 200); do
		grep -q 'svcgw listening' "$work/$name.log" 2>/dev/null && break
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.05
	done
	local addr
	addr=$(grep -o 'msg="svcgw listening" addr=[0-9.:]*' "$work/$name.log" | head -1 | sed 's/.*addr=//') || true
	[ -n "$addr" ] || die "$name did not start; see $work/$name.log"
	addr_of[$name]=$addr
	if [ "$profile" = 1 ]; then
		waitfile "$work/$name.pprof.addr" "$pid" || die "$name (svcgwprof) wrote no pprof address"
		pprof_of[$name]=http://$(cat "$work/$name.pprof.addr")
	fi
}

# --- start Jaeger and svcgw traced into it (BENCH_TRACING=1) -----------------
# An all-in-one Jaeger with in-memory storage on the driver's core (the
# collector is not what is measured; it shares that core with the driver
# and the upstream mock), and svcgw-traced: the same binary and
# configuration, tracing every call into it over OTLP/gRPC.
jaeger_otlp=$tracing_endpoint
if [ "$tracing" = 1 ] && [ -n "$tracing_endpoint" ]; then
	svcgw_targets+=(svcgw-traced)
elif [ "$tracing" = 1 ]; then
	[ -x "$jaeger" ] || die "BENCH_TRACING=1: no Jaeger binary at $jaeger (scripts/test builds it; or set BENCH_JAEGER)"
	read -r jp_grpc jp_http jp_query jp_qgrpc < <("$bin/load" ports 4)
	cat >"$work/jaeger.yaml" <<EOF
service:
  extensions: [jaeger_storage, jaeger_query]
  pipelines:
    traces:
      receivers: [otlp]
      processors: [batch]
      exporters: [jaeger_storage_exporter]
  telemetry:
    metrics:
      level: none
    logs:
      level: warn
extensions:
  jaeger_query:
    storage:
      traces: memstore
    http:
      endpoint: 127.0.0.1:$jp_query
    grpc:
      endpoint: 127.0.0.1:$jp_qgrpc
  jaeger_storage:
    backends:
      memstore:
        memory:
          max_traces: 20000
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: 127.0.0.1:$jp_grpc
      http:
        endpoint: 127.0.0.1:$jp_http
processors:
  batch:
    timeout: 100ms
exporters:
  jaeger_storage_exporter:
    trace_storage: memstore
EOF
	"${pin_driver[@]}" "$jaeger" --config "$work/jaeger.yaml" >"$work/jaeger.log" 2>&1 &
	jaeger_pid=$!
	pids+=("$jaeger_pid")
	for _ in $(seq 300); do
		curl -fsS -o /dev/null "http://127.0.0.1:$jp_query/api/services" 2>/dev/null && break
		kill -0 "$jaeger_pid" 2>/dev/null || die "Jaeger did not start; see $work/jaeger.log"
		sleep 0.1
	done
	curl -fsS -o /dev/null "http://127.0.0.1:$jp_query/api/services" || die "Jaeger's query API did not answer; see $work/jaeger.log"
	jaeger_otlp=http://127.0.0.1:$jp_grpc
	svcgw_targets+=(svcgw-traced)
fi

for t in "${svcgw_targets[@]}"; do start_svcgw "$t"; done

svcgw_addrs=""
for t in "${svcgw_targets[@]}"; do svcgw_addrs+=" · $t ${addr_of[$t]}"; done
log "upstream mock $upstream_addr (cpu $driver_cpu) · direct mock $direct_addr · proxy $proxy_addr$floor_addrs$svcgw_addrs (targets on cpu $target_cpu)"
log "svcgw backend: $backend; results in $out"

failed=()

# --- start svcgw with metrics (BENCH_METRICS=1) ------------------------------
# The same binary and configuration on a database of its own, serving its
# admin listener, so recording Prometheus metrics; a scraper reads /metrics
# as Prometheus would. It waits idle while the other targets are measured.
if [ "$metrics" = 1 ]; then
	if [[ $serve_help != *--admin-addr* ]]; then
		log "svcgw serve has no --admin-addr: the metrics comparison is skipped"
		metrics=0
	fi
fi
if [ "$metrics" = 1 ]; then
	start_svcgw svcgw-metrics
	admin_addr=$(grep -o 'admin_addr=[0-9.:]*' "$work/svcgw-metrics.log" | head -1 | sed 's/.*=//') || true
	[ -n "$admin_addr" ] || die "svcgw-metrics has no admin listener; see $work/svcgw-metrics.log"
	"${pin_driver[@]}" bash -c 'while kill -0 "$1" 2>/dev/null; do curl -fsS -o /dev/null "http://$2/metrics" || true; sleep "$3"; done' \
		scraper "${pid_of[svcgw-metrics]}" "$admin_addr" "$scrape_interval" &
	pids+=("$!")
	log "svcgw-metrics ${addr_of[svcgw-metrics]}, admin listener $admin_addr, scraped every $scrape_interval"
fi

# withmetrics SCENARIO [flags…]: the metrics comparison's runs of a
# scenario, right after svcgw's own: svcgw with metrics, then
# BENCH_METRICS_REPEAT-1 more pairs (svcgw@k, svcgw-metrics@k), alternating
# which goes first, so that drift in the machine's load favours neither.
withmetrics() {
	[ "$metrics" = 1 ] || return 0
	drive "$1" svcgw-metrics "${@:2}"
	for k in $(seq 2 "$metrics_repeat"); do
		if ((k % 2 == 0)); then
			drive "$1" "svcgw-metrics@$k" "${@:2}"
			drive "$1" "svcgw@$k" "${@:2}"
		else
			drive "$1" "svcgw@$k" "${@:2}"
			drive "$1" "svcgw-metrics@$k" "${@:2}"
		fi
	done
}

# withtracing SCENARIO [flags…]: the tracing comparison's runs of a
# scenario in BENCH_TRACING_SCENARIOS, right after svcgw's own: svcgw
# traced, then BENCH_TRACING_REPEAT-1 more pairs (svcgw@tK,
# svcgw-traced@tK), alternating which goes first.
withtracing() {
	[ "$tracing" = 1 ] || return 0
	case " $tracing_scenarios " in *" $1 "*) ;; *) return 0 ;; esac
	drive "$1" svcgw-traced "${@:2}"
	for k in $(seq 2 "$tracing_repeat"); do
		if ((k % 2 == 0)); then
			drive "$1" "svcgw-traced@t$k" "${@:2}"
			drive "$1" "svcgw@t$k" "${@:2}"
		else
			drive "$1" "svcgw@t$k" "${@:2}"
			drive "$1" "svcgw-traced@t$k" "${@:2}"
		fi
	done
}

# drive SCENARIO TARGET [flags…]: one driver run; a failure is recorded and the
# run goes on, so the report shows everything that could be measured.
drive() {
	local scenario=$1 target=$2
	shift 2
	# svcgw@k and svcgw-metrics@k are repeats of the metrics comparison,
	# against the same processes.
	local extra=() base=${target%@*}
	local kind=$base
	case $base in
	svcgw-metrics | svcgw-traced)
		kind=svcgw
		extra+=(-key "${key_of[$base]}" -name "$target")
		;;
	svcgw* | floor*)
		extra+=(-key "${key_of[$base]}")
		if [ "$target" != "$base" ]; then
			extra+=(-name "$target")
		elif [ "$profile" = 1 ]; then
			extra+=(-cpuprofile-url "${pprof_of[$target]}" -cpuprofile-out "$out/cpu-$scenario-$target.pprof")
			if [ "$trace" = 1 ]; then extra+=(-trace-out "$out/trace-$scenario-$target.out"); fi
			if [ "$scenario" = hold ]; then extra+=(-heapprofile-out "$out/heap-hold-$target.pprof"); fi
		fi
		;;
	esac
	if ! "${pin_driver[@]}" "$bin/load" run -scenario "$scenario" -target "$kind" \
		-base "http://${addr_of[$base]}" -pid "${pid_of[$base]}" \
		-timeout "$call_timeout" -out "$out/$scenario-$target.json" "${extra[@]}" "$@" 2>>"$work/load.log"; then
		failed+=("$scenario/$target")
		log "scenario $scenario against $target failed; see $work/load.log"
	fi
	tail -n 1 "$work/load.log" >&2
	alive "$base" "${pid_of[$base]}"
}

# shape ADDR QUERY: change a mock's stream shape while it runs.
shape() { curl -fsS -X POST "http://$1/_mock/shape?$2" >/dev/null || die "mock shape $1 $2"; }

start=$SECONDS
# Scenarios run target after target within each scenario, so that drift in
# the machine's other load spreads over all targets alike.
if has max; then
	log "(a) max throughput @ $connections connections, $duration (closed-loop driver)"
	for t in $targets; do drive max "$t" -connections "$connections" -duration "$duration" -warmup "$warmup"; done
	withmetrics max -connections "$connections" -duration "$duration" -warmup "$warmup"
	withtracing max -connections "$connections" -duration "$duration" -warmup "$warmup"
fi
if has max-vegeta; then
	log "(a) max throughput @ $connections connections, $duration (vegeta)"
	for t in $targets; do drive max-vegeta "$t" -connections "$connections" -duration "$duration" -warmup "$warmup"; done
fi
if has rate; then
	log "(b) constant $rate req/s, $duration"
	for t in $targets; do drive rate "$t" -rate "$rate" -duration "$duration" -warmup "$warmup"; done
	withmetrics rate -rate "$rate" -duration "$duration" -warmup "$warmup"
	withtracing rate -rate "$rate" -duration "$duration" -warmup "$warmup"
fi
if has stream; then
	log "(c) streaming @ $connections streams in flight, $stream_chunks chunks $stream_delay apart, $duration"
	for t in $targets; do drive stream "$t" -connections "$connections" -duration "$duration" -warmup "$warmup"; done
	withmetrics stream -connections "$connections" -duration "$duration" -warmup "$warmup"
	withtracing stream -connections "$connections" -duration "$duration" -warmup "$warmup"
	log "(c) streaming @ $stream_rate streams/s (time to first token), $duration"
	for t in $targets; do drive streamrate "$t" -rate "$stream_rate" -duration "$duration" -warmup "$warmup"; done
	withmetrics streamrate -rate "$stream_rate" -duration "$duration" -warmup "$warmup"
	withtracing streamrate -rate "$stream_rate" -duration "$duration" -warmup "$warmup"
fi
if has surfaces && case " $targets " in *" svcgw "*) true ;; *) false ;; esac; then
	log "(e) messages and generate-content surfaces through svcgw, $surface_duration each"
	for s in messages gencontent; do drive "$s" svcgw -connections "$connections" -duration "$surface_duration" -warmup "$warmup"; done
fi
if has embeddings; then
	log "(h) embeddings @ $connections connections, $embed_inputs texts a call as $embed_format, $duration"
	for t in $targets; do
		[ "$t" = floor ] && continue # bench/floor serves chat completions only
		drive embeddings "$t" -connections "$connections" -duration "$duration" -warmup "$warmup" -embed-inputs "$embed_inputs" -embed-format "$embed_format"
	done
fi
# Last: 1,000 streams leave memory behind that Go returns to the OS only
# slowly, which would inflate the peak RSS of any scenario after this one.
if has hold; then
	log "(d) $streams streams open at once, $hold_chunks chunks $hold_delay apart"
	for a in "$upstream_addr" "$direct_addr"; do shape "$a" "chunks=$hold_chunks&chunk_delay=$hold_delay"; done
	for t in $targets; do drive hold "$t" -streams "$streams"; done
	for a in "$upstream_addr" "$direct_addr"; do shape "$a" "chunks=$stream_chunks&chunk_delay=$stream_delay"; done
fi
log "scenarios took $((SECONDS - start))s"

# --- svcgw with metrics: its last scrape ---------------------------------------
if [ "$metrics" = 1 ]; then
	curl -fsS "http://$admin_addr/metrics" >"$out/metrics.txt" || log "the last scrape of svcgw's /metrics failed"
	svcgw_targets+=(svcgw-metrics)
fi

# --- stop each svcgw, then count its generation records ---------------------------
# serve drains within --shutdown-grace (5 s) plus its own drain timeout (10 s)
# and then closes the ledger; 30 s is past anything it should need.
stop_failed=
locked=0
errors=0
usage_args=()
mkdir -p "$out/usage"
for t in "${svcgw_targets[@]}"; do
	pid=${pid_of[$t]}
	kill -TERM "$pid"
	for _ in $(seq 300); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
	if kill -0 "$pid" 2>/dev/null; then
		stop_failed=1
		log "$t did not stop within 30 s of SIGTERM: goroutine dump (SIGQUIT) in $out/$t.log"
		kill -QUIT "$pid" 2>/dev/null || true
		sleep 1
		kill -KILL "$pid" 2>/dev/null || true
	fi
	wait "$pid" 2>/dev/null || log "$t exited with status $?"
	"$bin/svcgw" --db "$work/$t.db" usage --account bench --json >"$out/usage/$t.json" 2>>"$work/keys.log" || die "$t usage; see $work/keys.log"
	usage_args+=(-usage-json "$t=$out/usage/$t.json")
	locked=$((locked + $(grep -c 'database is locked' "$work/$t.log" || true)))
	errors=$((errors + $(grep -c 'level=ERROR' "$work/$t.log" || true)))
	# Keep everything but the access lines (one per call), and a few of those.
	{
		grep -v 'msg=request ' "$work/$t.log" || true
		echo "… $(grep -c 'msg=request ' "$work/$t.log" || true) access lines; the last 3:"
		grep 'msg=request ' "$work/$t.log" | tail -n 3 || true
	} >"$out/$t.log"
done

# --- what Jaeger received (BENCH_TRACING=1) --------------------------------------
# svcgw-traced says at shutdown how many spans it exported and dropped;
# Jaeger's query API, which services it holds traces of.
tracing_spans=
if [ "$tracing" = 1 ]; then
	tracing_spans="svcgw-traced at shutdown: $(grep -o 'exported=[0-9]* dropped_queue_full=[0-9]* dropped_export_failed=[0-9]*' "$work/svcgw-traced.log" | tail -1 || true)"
	if [ -z "$tracing_endpoint" ]; then
		tracing_spans+="; Jaeger's services: $(curl -fsS "http://127.0.0.1:$jp_query/api/services" 2>/dev/null || echo unreadable)"
	fi
fi

# --- report --------------------------------------------------------------------
{
	echo "## svcgw benchmark, $(date -u +%Y-%m-%dT%H:%MZ)"
	echo
	echo "- machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(free -g | awk '/Mem:/{print $2}') GiB, $(uname -sr), $(go version | cut -d' ' -f3)"
	echo "- load average at the end: $(cut -d' ' -f1-3 /proc/loadavg) (other work on the machine shifts every figure)"
	echo "- targets pinned to cpu $target_cpu; driver and upstream mock on cpu $driver_cpu; svcgw routed to $backend (svcgw over HTTP/1.1, svcgw-h2c over h2c), log level $log_level${BENCH_SVCGW_ENV:+, environment $BENCH_SVCGW_ENV}"
	if [ -n "${BENCH_SVCGW_BIN:-}" ]; then echo "- svcgw binary: $BENCH_SVCGW_BIN (prebuilt, not the tree's)"; fi
	echo "- svcgw logs: $errors ERROR lines, $locked \"database is locked\""
	if [ "$profile" = 1 ]; then echo "- svcgw ran with pprof (bench/svcgwprof); CPU profiles and (d)'s heap profiles in $out"; fi
	if [ "$tracing" = 1 ]; then
		echo "- (g): svcgw-traced, the same binary and configuration with OTEL_EXPORTER_OTLP_ENDPOINT (OTLP/gRPC) and OTEL_TRACES_SAMPLER=always_on, into ${tracing_endpoint:-Jaeger ($jaeger, in-memory storage, on cpu $driver_cpu)}; $tracing_repeat runs of each in $tracing_scenarios, in alternating order; $tracing_spans"
	fi
	if [ "$metrics" = 1 ]; then echo "- (f): svcgw-metrics, the same binary and configuration with --admin-addr (metrics recorded), /metrics scraped every $scrape_interval; $metrics_repeat runs of each per scenario, in alternating order; its last scrape is metrics.txt"; fi
	"$bin/load" report "${usage_args[@]}" -db-locked "$locked" "$out"/*-*.json
} | tee "$out/report.md"

if [ "$profile" = 1 ]; then
	for p in "$out"/cpu-*.pprof "$out"/heap-*.pprof; do
		[ -s "$p" ] || continue
		exe=$bin/svcgwprof
		case ${p##*/} in *-floor*) exe=$bin/floor ;; esac
		go tool pprof -top -nodecount=40 "$exe" "$p" >"${p%.pprof}.top.txt" 2>/dev/null || true
		log "profile: $p (top: ${p%.pprof}.top.txt)"
	done
fi

log "results: $out"
[ -z "$stop_failed" ] || die "svcgw did not stop on SIGTERM"
if [ "${#failed[@]}" -gt 0 ]; then
	die "scenarios that could not be measured: ${failed[*]}"
fi
if [ "$strict" = 1 ] && grep -q '| FAIL |' "$out/report.md"; then
	log "an svcgw misses a target (BENCH_STRICT=1)"
	exit 3
fi
