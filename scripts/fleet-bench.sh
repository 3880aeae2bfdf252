#!/usr/bin/env bash
# gpuaudit fleet at scale (issue 22): N generated reports (default 100,000) summarised by the
# release binary under /usr/bin/time -v; prints the wall time and the peak resident memory, and
# whether they are within the bar: 30 s and 1 GiB for 100,000 reports (BENCHMARKS.md).
#
#   scripts/fleet-bench.sh [N]
#
# The reports are written by crates/gpuaudit/examples/fleet_reports.rs (the real 1×H200 --full
# report of fixtures/reports with noise on every figure, a few nodes slow, hot, failing, on
# another driver, one file not JSON) into a directory outside the repository, removed at the
# end: 100,000 compact reports are about 10 GB, so check the disk first.
#
# Environment:
#   GPUAUDIT          the binary to time (default: target/release/gpuaudit, built here)
#   FLEET_BENCH_DIR   where the reports are written (default: a new directory under $TMPDIR);
#                     an existing one that already holds N reports is reused and kept
#   FLEET_BENCH_KEEP  1: keep the generated directory
#   FLEET_BENCH_OUT   where the fleet's JSON is written (default: in a temporary directory),
#                     to compare two binaries' output byte for byte
#   PRETTY            1: write the reports as gpuaudit --format json does (about 1.8× the bytes)
set -euo pipefail
cd "$(dirname "$0")/.."

N=${1:-100000}
case $N in
'' | *[!0-9]*)
	echo "usage: $0 [N]" >&2
	exit 2
	;;
esac
WALL_BAR=30
RSS_BAR_KIB=$((1024 * 1024))

cargo build --release --quiet -p gpuaudit --example fleet_reports
GEN=target/release/examples/fleet_reports
if [[ -z ${GPUAUDIT:-} ]]; then
	cargo build --release --quiet -p gpuaudit --bin gpuaudit
	GPUAUDIT=target/release/gpuaudit
fi

WORK=$(mktemp -d "${TMPDIR:-/tmp}/fleet-bench.XXXXXX")
DIR=${FLEET_BENCH_DIR:-$WORK/reports}
cleanup() {
	if [[ -z ${FLEET_BENCH_DIR:-} && ${FLEET_BENCH_KEEP:-0} != 1 ]]; then
		rm -rf "$WORK"
	else
		rm -f "$WORK/time.txt" "$WORK/fleet.json" "$WORK/stderr.txt"
		rmdir "$WORK" 2>/dev/null || true
		echo "reports kept in $DIR"
	fi
}
trap cleanup EXIT

# Reuse a directory that already holds exactly N reports (written by the same generator).
have=0
if [[ -d $DIR ]]; then
	have=$(find "$DIR" -maxdepth 1 -name 'gpu-*.json' | wc -l)
fi
if [[ $have -ne $N ]]; then
	rm -rf "$DIR"
	pretty=()
	if [[ ${PRETTY:-0} == 1 ]]; then
		pretty=(--pretty)
	fi
	start=$(date +%s)
	"$GEN" "$N" "$DIR" "${pretty[@]}"
	echo "written in $(($(date +%s) - start)) s"
fi

OUTFILE=${FLEET_BENCH_OUT:-$WORK/fleet.json}
# Exit 1 is expected (a node fails, one file is not a report); anything else is an error.
set +e
/usr/bin/time -v -o "$WORK/time.txt" "$GPUAUDIT" fleet "$DIR" --format json \
	--output "$OUTFILE" 2>"$WORK/stderr.txt"
code=$?
set -e
if [[ $code -ne 0 && $code -ne 1 ]]; then
	echo "gpuaudit fleet exited $code:" >&2
	cat "$WORK/stderr.txt" "$WORK/time.txt" >&2
	exit 1
fi

wall=$(sed -n 's/.*Elapsed (wall clock) time (h:mm:ss or m:ss): //p' "$WORK/time.txt")
rss=$(sed -n 's/.*Maximum resident set size (kbytes): //p' "$WORK/time.txt")
user=$(sed -n 's/.*User time (seconds): //p' "$WORK/time.txt")
sys=$(sed -n 's/.*System time (seconds): //p' "$WORK/time.txt")
# m:ss.ss or h:mm:ss to seconds.
secs=$(awk -F: '{ s = 0; for (i = 1; i <= NF; i++) s = s * 60 + $i; printf "%.2f", s }' <<<"$wall")
summary=$(python3 -c 'import json,sys; c=json.load(open(sys.argv[1]))["counts"]; print(", ".join(f"{k} {v}" for k, v in c.items()))' "$OUTFILE" 2>/dev/null || echo "counts not read")

echo "reports:      $N ($(du -sh "$DIR" | cut -f1) in $DIR)"
echo "binary:       $GPUAUDIT ($(git rev-parse --short HEAD 2>/dev/null || echo '?') checked out)"
echo "exit status:  $code"
echo "counts:       $summary"
echo "wall:         ${secs} s (user ${user} s, system ${sys} s)"
echo "max RSS:      $((rss / 1024)) MiB"
if [[ $N -eq 100000 ]]; then
	ok_wall=$(awk -v s="$secs" -v b="$WALL_BAR" 'BEGIN { print (s <= b) ? "yes" : "no" }')
	ok_rss=$([[ $rss -le $RSS_BAR_KIB ]] && echo yes || echo no)
	echo "within 30 s:  $ok_wall"
	echo "within 1 GiB: $ok_rss"
fi
