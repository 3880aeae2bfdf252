#!/usr/bin/env bash
# Mutation testing of the gpuaudit-core files a change touches: every Rust file under
# crates/gpuaudit-core/src that differs from BASE (default: main), with the core library's own
# tests (fast; no GPU needed). The score is in mutants.out/ (not committed):
#   caught.txt, missed.txt (a judgment no test pins), timeout.txt, unviable.txt.
#
#   scripts/mutants.sh [BASE] [extra cargo-mutants options, e.g. --iterate]
set -euo pipefail
base="${1:-main}"
shift || true
cd "$(git rev-parse --show-toplevel)"
mapfile -t files < <(git diff --name-only "$base"... -- 'crates/gpuaudit-core/src/*.rs' |
    grep -v '/testing/' || true)
if [ "${#files[@]}" -eq 0 ]; then
    echo "no gpuaudit-core file differs from $base" >&2
    exit 0
fi
args=()
for f in "${files[@]}"; do
    [ -f "$f" ] && args+=(--file "$f")
done
exec cargo mutants -p gpuaudit-core "${args[@]}" --timeout 120 -j "${JOBS:-1}" "$@" -- --lib
