#!/usr/bin/env bash
# Ollama's official JavaScript client (npm `ollama`) against `hymba serve`
# on a tiny fresh checkpoint: tools/ollama_client/check.mjs makes the calls.
#   tests/scripts/ollama_client.sh path/to/hymba
# Exits 77 (CTest: skipped) without node or the client; install it with
#   (cd tools/ollama_client && npm ci)
set -euo pipefail
HYMBA=$(realpath "$1")
here=$(cd "$(dirname "$0")/../.." && pwd)
skip() { echo "skipped: $1"; exit 77; }
command -v node > /dev/null || skip "no node"
[ -d "$here/tools/ollama_client/node_modules/ollama" ] || skip "no ollama client (cd tools/ollama_client && npm ci)"

work=$(mktemp -d)
server=""
cleanup() {
  [ -n "$server" ] && kill "$server" 2> /dev/null && wait "$server" 2> /dev/null
  rm -rf "$work"
}
trap cleanup EXIT
printf 'ROMEO: What light through yonder window breaks?\n%.0s' $(seq 200) > "$work/text.txt"
"$HYMBA" --threads 2 train --preset hybrid-official --scale tiny --steps 2 --data "$work/text.txt" --out "$work/run" \
  --quiet > /dev/null
"$HYMBA" serve --ckpt "$work/run" --port 0 --model-name tiny > "$work/out" 2> "$work/log" &
server=$!
for _ in $(seq 100); do
  grep -q "listening on" "$work/out" 2> /dev/null && break
  sleep 0.1
done
url=$(grep -o 'http://[0-9.:]*' "$work/out") || { cat "$work/log"; exit 1; }
node "$here/tools/ollama_client/check.mjs" "$url" tiny
