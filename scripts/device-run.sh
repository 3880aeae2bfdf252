#!/usr/bin/env bash
# One call on a GPU machine: what BENCHMARKS.md records. Every output lands in $OUT (as one
# tarball, results.tar.gz, plus the summary log). Steps are chosen with STEPS (default: all):
#   facts   facts-only audit timed 5 times
#   collect collect a snapshot, audit it, compare with the live findings (scripts/parity.py)
#   quick   the default audit (facts + quick measurements), timed
#   full    gpuaudit --full (all measurements and a 60 s burn), timed
#   bench   scripts/bench-device.sh: gpuaudit bench and the anchors side by side, the ratio table
#   burn    gpuaudit burn $BURN_SECS
#   health  issue 21's checks (kernel log, AER, ACS, placement, fabric, security versions) live,
#           as root and as nobody, beside the raw files they read
#
#   STEPS="facts collect quick" OUT=/tmp/o scripts/device-run.sh .dev/gpuaudit
#   BABELSTREAM=/path/to/babelstream STEPS=bench scripts/device-run.sh .dev/gpuaudit
#     (optional: a BabelStream binary built by hand on the GPU machine, run by the bench step
#     beside gpuaudit's memory figures; see scripts/bench-device.sh)
set -u
cd "$(dirname "$0")/.." || exit 2
BIN=${1:-.dev/gpuaudit}
# Absolute: some steps run it from another directory.
BIN=$(realpath "$BIN")
OUT=${OUT:-$(mktemp -d /tmp/gpuaudit-dev.XXXXXX)}
W=$OUT/w
mkdir -p "$W"
STEPS=${STEPS:-facts collect quick full bench}
# Never NVLink multicast on these machines.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1
has() { case " $STEPS " in *" $1 "*) return 0 ;; esac; return 1; }
# The timing lines again at the very end: with 8 GPUs the per-pair lines push them out of view.
TIMES=$W/timings.txt
: >"$TIMES"
timed() { echo "$*" | tee -a "$TIMES"; }
now() { date +%s.%N; }
secs() { python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.3f}')" "$1" "$(now)"; }

echo "== machine"
nvidia-smi -L
nvidia-smi --query-gpu=index,name,driver_version,persistence_mode,power.limit,clocks.sm,clocks.max.sm --format=csv
git log -1 --format='commit %H %cd' 2>/dev/null || true
date -u

if has facts; then
  echo "== facts-only audit, 5 runs"
  for i in 1 2 3 4 5; do
    t=$(now); "$BIN" --facts-only --format json >"$W/facts-only.json" 2>"$W/facts-only.err"; rc=$?
    timed "facts-only run $i: $(secs "$t") s, exit $rc"
  done
  "$BIN" --facts-only --format table --color never >"$W/facts-only.txt" 2>&1
fi

if has collect; then
  echo "== collect, audit the snapshot, compare"
  t=$(now); "$BIN" collect --out "$W/snap" 2>"$W/collect.err"; rc=$?; timed "collect: $(secs "$t") s, exit $rc"
  cat "$W/collect.err"
  "$BIN" --root "$W/snap" --format json >"$W/snap-audit.json" 2>"$W/snap-audit.err"
  tar -C "$W" -czf "$OUT/snapshot.tar.gz" snap
fi

if has quick; then
  echo "== quick audit (facts + quick measurements)"
  t=$(now); timeout 300 "$BIN" --format json >"$W/quick.json" 2>"$W/quick.err"; rc=$?
  timed "quick audit: $(secs "$t") s, exit $rc"
  tail -5 "$W/quick.err"
  # The live findings (read before the measurements) against the snapshot's.
  [ -s "$W/snap-audit.json" ] && python3 scripts/parity.py "$W/quick.json" "$W/snap-audit.json"
  python3 - "$W/quick.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
for f in r["findings"]:
    if f["status"] != "pass":
        print(f'  {f["status"]:4} {f["check"]:22} {f["gpu"] if f["gpu"] is not None else "-"}  {f["message"][:200]}')
pairs = {}
for m in r["measurements"]:
    if m.get("peer") is not None:
        pairs.setdefault(m["name"], []).append(m)
        continue
    print(f'  m {m["name"]:32} gpu={m["gpu"]} peer={m.get("peer")} {m["value"]:.2f} {m["unit"]} exp={m.get("expected")} ratio={m.get("ratio")}')
# One line per kind of GPU-pair figure (56 ordered pairs on 8 GPUs): count, lowest, median, highest.
for name, ms in pairs.items():
    ms.sort(key=lambda m: m["value"])
    lo, mid, hi = ms[0], ms[len(ms) // 2], ms[-1]
    print(f'  m {name:32} {len(ms)} pairs: min {lo["value"]:.2f} ({lo["gpu"]}->{lo["peer"]}) '
          f'median {mid["value"]:.2f} max {hi["value"]:.2f} {lo["unit"]} exp={lo.get("expected")}')
PY
fi

if has full; then
  echo "== full audit (all measurements, 60 s burn)"
  t=$(now); timeout 400 "$BIN" --full --format json >"$W/full.json" 2>"$W/full.err"; rc=$?
  timed "full audit: $(secs "$t") s, exit $rc"
  tail -5 "$W/full.err"
  python3 - "$W/full.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
for f in r["findings"]:
    if f["status"] != "pass":
        print(f'  {f["status"]:4} {f["check"]:22} {f["gpu"] if f["gpu"] is not None else "-"}  {f["message"][:200]}')
PY
fi

if has burn; then
  echo "== burn ${BURN_SECS:-15} s"
  t=$(now); timeout 300 "$BIN" burn "${BURN_SECS:-15}" --format table >"$W/burn.txt" 2>"$W/burn.err"; rc=$?
  timed "burn: $(secs "$t") s, exit $rc"; tail -40 "$W/burn.txt"; tail -5 "$W/burn.err"
fi

if has health; then
  echo "== issue 21's checks as root and as nobody"
  echo "dmesg_restrict=$(cat /proc/sys/kernel/dmesg_restrict 2>&1) kptr_restrict=$(cat /proc/sys/kernel/kptr_restrict 2>&1)"
  for d in $(nvidia-smi --query-gpu=pci.bus_id --format=csv,noheader 2>/dev/null); do
    # nvidia-smi's 00000000:18:00.0 is sysfs's 0000:18:00.0.
    b=/sys/bus/pci/devices/$(echo "$d" | tr 'A-F' 'a-f' | sed 's/^0000//')
    echo "GPU $d -> $b -> $(readlink -f "$b" 2>&1)"
    if [ -e "$b" ]; then
      for f in "$b"/aer_* "$b"/numa_node; do [ -e "$f" ] && printf '%s ' "${f##*/}"; done
      echo
    fi
    p=$(readlink -f "$b")
    while [ -n "$p" ] && [ "$p" != /sys/devices ]; do
      [ -e "$p/aer_dev_correctable" ] && echo "  ${p##*/}: $(head -c 300 "$p/aer_dev_correctable" | tr '\n' ' ')"
      p=${p%/*}
    done
    [ -e "$b" ] && echo "config: $(stat -c %s "$b/config") bytes; as nobody readable: $(runuser -u nobody -- head -c 4096 "$b/config" 2>/dev/null | wc -c) bytes"
  done
  echo "journalctl -k lines (root): $(journalctl -k --since=-7d -o short-iso --no-pager 2>&1 | wc -l)"
  echo "dpkg: $(dpkg-query -W -f '${Package} ${Version}\n' 2>/dev/null | grep -Ei 'nvidia|cuda|runc|containerd|docker' | tr '\n' ';' | head -c 1500)"
  for f in /dev/nvidia-nvswitch* /var/log/fabricmanager.log; do
    if [ -e "$f" ]; then echo "present: $f"; else echo "absent: $f"; fi
  done | head -5
  NB=$(mktemp -d /tmp/gpuaudit-nobody.XXXXXX); chmod 755 "$NB"; cp "$BIN" "$NB/gpuaudit"; chmod 755 "$NB/gpuaudit"
  for who in root nobody; do
    if [ $who = root ]; then run=("$BIN"); else run=(runuser -u nobody -- "$NB/gpuaudit"); fi
    (cd "$NB" && "${run[@]}" --facts-only --format json >"$W/health-$who.json" 2>"$W/health-$who.err"); echo "$who: exit $?"
    (cd "$NB" && "${run[@]}" --facts-only -v --format table --color never >"$W/health-$who.txt" 2>&1)
    python3 - "$W/health-$who.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
new = ("health.", "pcie.aer", "pcie.acs", "net.placement", "nvlink.fabric", "security.")
for f in r["findings"]:
    if f["check"].startswith(new):
        print(f'  {f["status"]:4} {f["check"]:16} {f["gpu"] if f["gpu"] is not None else "-"}  {f["message"][:300]}')
PY
  done
  for id in health.xid pcie.aer pcie.acs net.placement nvlink.fabric security.versions; do
    "$BIN" explain "$id" >"$W/explain-$id.txt" 2>&1 || echo "explain $id: exit $?"
  done
fi

if has bench; then
  echo "== bench and anchors"
  OUT="$W/bench" RUN_QUICK=0 scripts/bench-device.sh "$BIN" 2>&1 | tail -100
  cat "$W/bench/gpuaudit.time" >>"$TIMES" 2>/dev/null
fi

echo "== timings"
cat "$TIMES"
tar -C "$OUT" -czf "$OUT/results.tar.gz" w 2>/dev/null && rm -rf "$W"
ls -la "$OUT"
