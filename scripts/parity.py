#!/usr/bin/env python3
"""Compare the findings of two gpuaudit reports (e.g. a live audit and the audit of the snapshot
`gpuaudit collect` took at the same time): same check, GPU, status and message, for every check
that is judged from facts. Measured checks are left out (a snapshot measures nothing).

    python3 scripts/parity.py live.json snapshot.json
Exit status 0 when they agree, 1 otherwise."""
import json
import sys

MEASURED = {
    "pcie.bandwidth", "p2p.bandwidth", "nccl.allreduce", "cuda.context-latency",
    "memory.bandwidth", "compute.gemm", "stability.burn", "net.loopback", "storage.throughput",
}


def rows(path):
    with open(path) as f:
        r = json.load(f)
    return [
        (x["check"], x["gpu"], x["status"], x["message"])
        for x in r["findings"]
        if x["check"] not in MEASURED
    ]


def main():
    a, b = rows(sys.argv[1]), rows(sys.argv[2])
    only_a = [x for x in a if x not in b]
    only_b = [x for x in b if x not in a]
    print(f"parity: {len(a)} facts findings live, {len(b)} from the snapshot, "
          f"{len(only_a)} only live, {len(only_b)} only in the snapshot")
    for x in only_a:
        print("  live only:    ", x)
    for x in only_b:
        print("  snapshot only:", x)
    return 0 if not only_a and not only_b else 1


if __name__ == "__main__":
    sys.exit(main())
