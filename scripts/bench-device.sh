#!/usr/bin/env bash
# The one script to run on a GPU machine: gpuaudit's measurements and the anchors (PyTorch,
# torch.distributed NCCL, a C driver-API program), side by side in one run, then the
# comparison table, printed last.
#
#   scripts/bench-device.sh [path/to/gpuaudit]          (default: target/release/gpuaudit)
#
# Environment:
#   OUT=DIR                 where every output goes (default: a new /tmp directory)
#   GPUAUDIT_BENCH_CMD=...  the command that prints the measurements JSON (default:
#                           "$BIN bench --format json", else the measure example)
#   RUN_QUICK=0             skip timing the quick audit (default: timed; the bar is 10 s on
#                           2 GPUs, 15 s on 8)
#   RUN_BURN=SECS           also run the burn for SECS seconds
#   RUN_ANCHOR=0            skip the anchors (gpuaudit only)
#   BABELSTREAM=/path/to/binary   also run this BabelStream binary (built by hand on the GPU
#                           machine; never part of the repository) with --arraysize 536870912
#                           --numtimes 50 [--csv]: its Copy/Add/Triad/Dot beside gpuaudit's
#                           copy/add/triad/read on GPU 0 in the comparison table
#   GPUAUDIT_MEMBW_LAUNCH=4x512,8x256   launch shapes the memory kernels sweep
#   GPUAUDIT_GEMM_LAYOUT=nn|tn, GPUAUDIT_GEMM_SIZE=8192   GEMM overrides
#   GPUAUDIT_GPU_ORDER=one-by-one|interleaved|all-at-once   how memory and GEMM go through
#                           the GPUs (default: one by one up to 4 GPUs; beyond, interleaved
#                           GEMM data types in full runs, all GPUs at once in quick ones)
# Every step has a time limit and a failing step does not stop the others.
set -u
cd "$(dirname "$0")/.." || exit 2
BIN=${1:-target/release/gpuaudit}
OUT=${OUT:-$(mktemp -d /tmp/gpuaudit-bench.XXXXXX)}
mkdir -p "$OUT"
EXAMPLE=target/release/examples/measure
say() { echo "== $*" >&2; }
now() { date +%s.%N; }
elapsed() { python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.2f}')" "$1" "$(now)"; }

say "outputs in $OUT"
{ nvidia-smi; nvidia-smi topo -m; nvidia-smi -q -d PERFORMANCE,POWER,CLOCK; } >"$OUT/nvidia-smi.txt" 2>&1
grep -E "Driver Version|CUDA Version" "$OUT/nvidia-smi.txt" | head -1 >&2

# The measuring command.
if [ -n "${GPUAUDIT_BENCH_CMD:-}" ]; then
  CMD=$GPUAUDIT_BENCH_CMD
elif [ -x "$BIN" ] && "$BIN" bench --help >/dev/null 2>&1; then
  CMD="$BIN bench --format json"
else
  if [ ! -x "$EXAMPLE" ] && command -v cargo >/dev/null; then
    say "building the measure example"
    cargo build --release -p gpuaudit-probe --example measure >"$OUT/build.log" 2>&1 || tail -20 "$OUT/build.log" >&2
  fi
  CMD=$EXAMPLE
fi
say "gpuaudit command: $CMD"

# The C context anchor (a Python ctypes probe stands in where there is no C compiler).
CTX_BIN=
for cc in gcc cc clang; do
  if command -v $cc >/dev/null && $cc -O2 -o "$OUT/ctx_anchor" scripts/ctx_anchor.c -ldl 2>"$OUT/ctx_anchor.build.txt"; then
    CTX_BIN="$OUT/ctx_anchor"; break
  fi
done
[ -z "$CTX_BIN" ] && say "no C compiler: the context anchor uses Python ctypes"

# 1. The quick audit's wall time (the bar: under 10 s on 2 GPUs, under 15 s on 8).
if [ "${RUN_QUICK:-1}" != 0 ]; then
  t=$(now)
  if [ -x "$BIN" ] && "$BIN" --help >/dev/null 2>&1 && [ -z "${GPUAUDIT_BENCH_CMD:-}" ] && [ "$CMD" != "$EXAMPLE" ]; then
    timeout 120 "$BIN" --format json >"$OUT/quick-audit.json" 2>"$OUT/quick-audit.stderr"; rc=$?
  else
    timeout 120 "$EXAMPLE" --quick >"$OUT/quick-audit.json" 2>"$OUT/quick-audit.stderr"; rc=$?
  fi
  echo "quick audit: $(elapsed "$t") s wall, exit $rc" | tee "$OUT/quick-audit.time" >&2
fi

# 2. gpuaudit's full measurements (no burn).
t=$(now)
# shellcheck disable=SC2086 # CMD is a command line: split into its words on purpose
timeout 600 $CMD >"$OUT/gpuaudit.json" 2>"$OUT/gpuaudit.stderr"; rc=$?
echo "gpuaudit bench: $(elapsed "$t") s wall, exit $rc" | tee "$OUT/gpuaudit.time" >&2
tail -120 "$OUT/gpuaudit.stderr" >&2

# 3. The anchors.
if [ "${RUN_ANCHOR:-1}" != 0 ]; then
  t=$(now)
  ARGS=(anchor --out "$OUT/anchor.json")
  [ -n "$CTX_BIN" ] && ARGS+=(--ctx-bin "$CTX_BIN")
  NCCL_NVLS_ENABLE=0 timeout 900 python3 scripts/anchor_compare.py "${ARGS[@]}" >/dev/null 2>"$OUT/anchor.stderr"; rc=$?
  echo "anchor: $(elapsed "$t") s wall, exit $rc" >&2
  grep -E "anchor:" "$OUT/anchor.stderr" >&2
fi

# 3b. BabelStream, when given.
if [ -n "${BABELSTREAM:-}" ]; then
  t=$(now)
  timeout 900 python3 scripts/anchor_compare.py babelstream "$BABELSTREAM" --out "$OUT/babelstream.json" >/dev/null 2>"$OUT/babelstream.stderr"; rc=$?
  echo "babelstream: $(elapsed "$t") s wall, exit $rc" >&2
  python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print('babelstream:', d.get('command'), d.get('GBps'), d.get('error', ''))" "$OUT/babelstream.json" >&2 2>/dev/null
fi

# 4. The burn, when asked.
if [ -n "${RUN_BURN:-}" ]; then
  t=$(now)
  if [ "$CMD" = "$EXAMPLE" ]; then
    timeout $((RUN_BURN + 300)) "$EXAMPLE" --burn "$RUN_BURN" burn >"$OUT/burn.json" 2>"$OUT/burn.stderr"; rc=$?
  else
    timeout $((RUN_BURN + 300)) "$BIN" burn "$RUN_BURN" --format json >"$OUT/burn.json" 2>"$OUT/burn.stderr"; rc=$?
  fi
  echo "burn: $(elapsed "$t") s wall, exit $rc" >&2
  tail -30 "$OUT/burn.stderr" >&2
fi

# 5. The comparison, last.
if [ -s "$OUT/anchor.json" ] && [ -s "$OUT/gpuaudit.json" ]; then
  BS_ARGS=()
  [ -s "$OUT/babelstream.json" ] && BS_ARGS=(--babelstream "$OUT/babelstream.json")
  python3 scripts/anchor_compare.py compare "$OUT/gpuaudit.json" "$OUT/anchor.json" ${BS_ARGS[@]+"${BS_ARGS[@]}"} | tee "$OUT/compare.txt"
else
  echo "no comparison: gpuaudit.json or anchor.json is missing or empty (see $OUT)"
fi
