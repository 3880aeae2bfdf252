#!/bin/bash
# Slurm Prolog (or Epilog): the facts-only audit of this node (about a second, no GPU work);
# where one of the checks named in GPUAUDIT_DRAIN_CHECKS fails, the node is drained with the
# checks and their messages as the reason, so that no new job lands on it.
#
# slurm.conf:   Prolog=/etc/slurm/gpuaudit-prolog.sh     (or Epilog=..., or both)
#
# Environment (set it in the script's copy, or in slurmd's environment):
#   GPUAUDIT                the binary (default: gpuaudit on PATH)
#   GPUAUDIT_DRAIN_CHECKS   check ids, space- or comma-separated (default below)
#   GPUAUDIT_ARGS           extra audit options, e.g. "--expect h100-sxm5-80gb:8"
#   GPUAUDIT_PROLOG_REJECT  1: also exit 1, so that Slurm requeues the job that was to start
#                           here (Slurm then drains the node itself, with its own reason)
#
# It never fails the job on its own account: an audit that could not run (exit 2) is logged,
# and the node is left as it is.
set -uo pipefail

GPUAUDIT=${GPUAUDIT:-gpuaudit}
# The checks whose failure means a job would run wrong or not at all: a GPU missing or not
# answering, the wrong GPU, a PCIe link trained below its width or generation, uncorrectable
# memory errors or retired/remapped pages pending, NVLink links down.
DRAIN_CHECKS=${GPUAUDIT_DRAIN_CHECKS:-gpu.present gpu.identity pcie.link memory.errors nvlink.status}
read -r -a AUDIT_ARGS <<<"${GPUAUDIT_ARGS:-}"
NODE=${SLURMD_NODENAME:-$(hostname -s)}
log() { logger -t gpuaudit-prolog -- "$*" 2>/dev/null || echo "gpuaudit-prolog: $*" >&2; }

report=$(mktemp "${TMPDIR:-/tmp}/gpuaudit-prolog.XXXXXX") || exit 0
trap 'rm -f "$report"' EXIT
rc=0
timeout 120 "$GPUAUDIT" --facts-only --format json --output "$report" "${AUDIT_ARGS[@]}" || rc=$?
if [ "$rc" -ge 2 ]; then
  log "$NODE: the audit could not run (exit $rc); node left as it is"
  exit 0
fi

# "check: message" of each failed finding of the drain checks, one a line.
failed_findings() {
  local checks=${DRAIN_CHECKS//,/ }
  if command -v jq >/dev/null 2>&1; then
    jq -r --arg checks "$checks" '
      ($checks | split(" ") | map(select(. != ""))) as $c
      | .findings[] | select(.status == "fail" and (.check as $k | $c | index($k)))
      | "\(.check): \(.message)"' "$report"
  else
    python3 - "$report" "$checks" <<'PY'
import json, sys
checks = set(sys.argv[2].split())
for f in json.load(open(sys.argv[1]))["findings"]:
    if f["status"] == "fail" and f["check"] in checks:
        print(f"{f['check']}: {f['message']}")
PY
  fi
}

if ! failures=$(failed_findings); then
  log "$NODE: could not read the report (jq or python3 is needed); node left as it is"
  exit 0
fi
[ -z "$failures" ] && exit 0

# One line, short enough for a reason (sinfo -R shows the start of it).
reason="gpuaudit: $(printf '%s' "$failures" | tr '\n' ';' | tr -s ' ' | cut -c1-400)"
log "$NODE: draining: $reason"
scontrol update nodename="$NODE" state=drain reason="$reason" ||
  log "$NODE: scontrol could not drain the node"
if [ "${GPUAUDIT_PROLOG_REJECT:-0}" = 1 ]; then
  exit 1
fi
exit 0
