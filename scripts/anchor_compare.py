#!/usr/bin/env python3
"""gpuaudit against the tools a user would reach for by hand, measured side by side.

  anchor_compare.py anchor [--ctx-bin PATH] [--out FILE]   PyTorch / driver-API anchors, JSON
  anchor_compare.py compare GPUAUDIT.json ANCHOR.json [--babelstream BS.json]
                                                           the comparison table (last)
  anchor_compare.py babelstream BINARY [--out FILE]        run a BabelStream binary, JSON
  anchor_compare.py selftest                               the parsers' own tests

BabelStream is optional and never part of this repository: point BABELSTREAM at a binary
built by hand on the GPU machine. It runs with --arraysize 536870912 --numtimes 50 (2^29
doubles, 4 GiB an array, as gpuaudit's full buffers), with --csv where the binary has it, and
its Copy/Add/Triad/Dot stand beside gpuaudit's copy/add/triad/read on GPU 0.

The anchor follows ../shared/tools/torch_anchor.py (1 GiB host copies timed with events over 10
repeats, 8192^3 GEMMs, device copy counted as bytes read + written over a 4 GiB buffer, 1 GiB
P2P copy and 4-byte copy latency, all-reduce float32 sums timed with events, context creation
in fresh processes) with two fixes: every figure is timed with events recorded on the current
stream of the device that runs the work (the original timed GPU 1 on the wrong device), and
P2P is measured in both directions. All-reduce reports the slowest rank's time. Each section is
guarded: a failing section is reported and the others still run. Read-only: changes no GPU
setting.
"""
import json
import os
import subprocess
import sys
import time
import traceback

GIB = 1 << 30
MIB = 1 << 20


def log(*a):
    print(*a, file=sys.stderr, flush=True)


# ------------------------------------------------------------------------------- anchors

def ev_time(torch, fn, iters, warm=3, dev=0):
    """Seconds per call of fn, timed with events on the current stream of device `dev`."""
    d = torch.device("cuda", dev)
    with torch.cuda.device(d):
        stream = torch.cuda.current_stream(d)
        for _ in range(warm):
            fn()
        torch.cuda.synchronize(d)
        s = torch.cuda.Event(enable_timing=True)
        e = torch.cuda.Event(enable_timing=True)
        s.record(stream)
        for _ in range(iters):
            fn()
        e.record(stream)
        e.synchronize()
        torch.cuda.synchronize(d)
        return s.elapsed_time(e) / 1e3 / iters


def copies(torch, i):
    r = {}
    dev = torch.device("cuda", i)
    n = GIB
    d = torch.empty(n, dtype=torch.uint8, device=dev)
    for pinned in (True, False):
        h = torch.empty(n, dtype=torch.uint8, pin_memory=pinned)
        h.fill_(1)  # touch every page before timing
        k = "pinned" if pinned else "pageable"
        r[f"h2d_{k}_GBps"] = n / ev_time(torch, lambda: d.copy_(h, non_blocking=True), 10, dev=i) / 1e9
        r[f"d2h_{k}_GBps"] = n / ev_time(torch, lambda: h.copy_(d, non_blocking=True), 10, dev=i) / 1e9
        del h
    del d
    n2 = 4 * GIB
    a = torch.empty(n2, dtype=torch.uint8, device=dev)
    b = torch.empty_like(a)
    r["d2d_rw_GBps"] = 2 * n2 / ev_time(torch, lambda: b.copy_(a), 10, dev=i) / 1e9
    del a, b
    torch.cuda.empty_cache()
    return r


def gemms(torch, i):
    r = {}
    n = 8192
    dev = torch.device("cuda", i)
    cases = (("bf16", torch.bfloat16, False), ("fp16", torch.float16, False),
             ("tf32", torch.float32, True), ("fp32", torch.float32, False),
             ("fp64", torch.float64, False))
    for name, dt, tf32 in cases:
        try:
            torch.backends.cuda.matmul.allow_tf32 = tf32
            a = torch.randn(n, n, device=dev, dtype=dt)
            b = torch.randn(n, n, device=dev, dtype=dt)
            it = 20 if dt in (torch.bfloat16, torch.float16) else 5
            t = ev_time(torch, lambda: a @ b, it, dev=i)
            r[f"gemm_{name}_TFLOPs"] = 2 * n ** 3 / t / 1e12
            del a, b
        except Exception as e:  # noqa: BLE001
            r[f"gemm_{name}_error"] = repr(e)
    torch.backends.cuda.matmul.allow_tf32 = False
    # fp8 e4m3 where the GPU has it (compute capability 8.9 and later), fast accumulation.
    try:
        cap = torch.cuda.get_device_capability(i)
        if cap >= (8, 9) and hasattr(torch, "_scaled_mm"):
            a = torch.randn(n, n, device=dev).to(torch.float8_e4m3fn)
            b = torch.randn(n, n, device=dev).to(torch.float8_e4m3fn).t()  # column-major
            one = torch.tensor(1.0, device=dev)
            f = lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one,
                                         out_dtype=torch.bfloat16, use_fast_accum=True)
            t = ev_time(torch, f, 20, dev=i)
            r["gemm_fp8_TFLOPs"] = 2 * n ** 3 / t / 1e12
    except Exception as e:  # noqa: BLE001
        r["gemm_fp8_error"] = repr(e)
    torch.cuda.empty_cache()
    return r


def p2p(torch, src, dst):
    r = {f"can_access_peer_{src}_{dst}": torch.cuda.can_device_access_peer(src, dst)}
    n = GIB
    a = torch.empty(n, dtype=torch.uint8, device=f"cuda:{src}")
    b = torch.empty(n, dtype=torch.uint8, device=f"cuda:{dst}")
    # PyTorch runs a cross-device copy on the source's stream and makes the destination's
    # current stream wait for it: events on the destination's stream see the whole copy.
    r[f"p2p_{src}to{dst}_GBps"] = n / ev_time(torch, lambda: b.copy_(a, non_blocking=True), 10, dev=dst) / 1e9
    s = torch.empty(4, dtype=torch.uint8, device=f"cuda:{src}")
    t = torch.empty(4, dtype=torch.uint8, device=f"cuda:{dst}")
    r[f"p2p_{src}to{dst}_small_copy_us"] = ev_time(torch, lambda: t.copy_(s, non_blocking=True), 200, dev=dst) * 1e6
    del a, b
    torch.cuda.empty_cache()
    return r


def allreduce_worker(rank, world, q, sizes):
    import torch
    import torch.distributed as dist
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT="29533", NCCL_NVLS_ENABLE="0")
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", rank=rank, world_size=world, device_id=torch.device(f"cuda:{rank}"))
    out = {}
    for size in sizes:
        x = torch.ones(size // 4, dtype=torch.float32, device=f"cuda:{rank}")
        dist.barrier()
        t = ev_time(torch, lambda: dist.all_reduce(x), 20 if size < GIB else 10, warm=5, dev=rank)
        tt = torch.tensor([t], device=f"cuda:{rank}", dtype=torch.float64)
        dist.all_reduce(tt, op=dist.ReduceOp.MAX)  # the slowest rank, as gpuaudit reports
        t = float(tt.item())
        algbw = size / t / 1e9
        out[f"allreduce_{size}"] = {"size": size, "time_us": t * 1e6, "algbw_GBps": algbw,
                                    "busbw_GBps": algbw * 2 * (world - 1) / world}
    if rank == 0:
        q.put(out)
    dist.destroy_process_group()


def allreduce(torch, world):
    import torch.multiprocessing as mp
    os.environ["NCCL_NVLS_ENABLE"] = "0"
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    sizes = [MIB, 8 * MIB, 64 * MIB, GIB]
    ps = [ctx.Process(target=allreduce_worker, args=(r, world, q, sizes)) for r in range(world)]
    for p in ps:
        p.start()
    try:
        res = q.get(timeout=300)
    finally:
        for p in ps:
            p.join(timeout=60)
            if p.is_alive():
                p.kill()
    return res


def ctx_anchor(ctx_bin, runs=10):
    samples, errors = [], []
    for _ in range(runs):
        if ctx_bin and os.path.exists(ctx_bin):
            cmd = [ctx_bin]
        else:
            cmd = [sys.executable, __file__, "ctx-probe"]
        try:
            out = subprocess.run(cmd, capture_output=True, text=True, timeout=60).stdout
            line = [l for l in out.splitlines() if l.strip().startswith("{")][-1]
            d = json.loads(line)
            if "error" in d:
                errors.append(d["error"])
            else:
                samples.append(d)
        except Exception as e:  # noqa: BLE001
            errors.append(repr(e))
    res = {"runs": len(samples), "tool": "C" if cmd[0] == ctx_bin else "python ctypes", "errors": errors}
    for k in ("init_ms", "context_ms", "alloc_ms", "total_ms"):
        v = sorted(s[k] for s in samples)
        if v:
            m = len(v)
            res[f"{k}_median"] = v[m // 2] if m % 2 else (v[m // 2 - 1] + v[m // 2]) / 2
            res[f"{k}_max"] = v[-1]
    return res


def ctx_probe_ctypes():
    """Fallback context probe (when no C compiler): the same phases through ctypes."""
    import ctypes
    c = ctypes.CDLL("libcuda.so.1")
    fns = [c.cuInit, c.cuDeviceGet, c.cuDevicePrimaryCtxRetain, c.cuCtxSetCurrent, c.cuMemAlloc_v2]
    del fns  # resolved before the clock starts
    dev, ctx, p = ctypes.c_int(), ctypes.c_void_p(), ctypes.c_uint64()
    t0 = time.monotonic()
    r = c.cuInit(0)
    t1 = time.monotonic()
    r = r or c.cuDeviceGet(ctypes.byref(dev), 0)
    r = r or c.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev)
    r = r or c.cuCtxSetCurrent(ctx)
    t2 = time.monotonic()
    r = r or c.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(1 << 20))
    t3 = time.monotonic()
    if r:
        print(json.dumps({"error": f"CUDA error {r}"}))
        return 1
    ms = lambda a, b: (b - a) * 1e3
    print(json.dumps({"init_ms": ms(t0, t1), "context_ms": ms(t1, t2), "alloc_ms": ms(t2, t3),
                      "total_ms": ms(t0, t3)}))
    return 0


def pci_bus_id(torch, i):
    """The GPU's PCI address as CUDA gives it ("0000:00:06.0"), where this PyTorch tells it."""
    p = torch.cuda.get_device_properties(i)
    bus, dev, dom = (getattr(p, k, None) for k in ("pci_bus_id", "pci_device_id", "pci_domain_id"))
    if bus is None or dev is None:
        return None
    return f"{dom or 0:04x}:{bus:02x}:{dev:02x}.0"


def section(res, name, fn, *args):
    t = time.time()
    try:
        res[name] = fn(*args)
        log(f"anchor: {name} done in {time.time() - t:.1f} s")
    except Exception as e:  # noqa: BLE001
        res[name] = {"error": repr(e), "traceback": traceback.format_exc(limit=3)}
        log(f"anchor: {name} FAILED: {e!r}")


def run_anchor(ctx_bin):
    # CUDA's own order (fastest first) need not be NVML's on a machine of identical GPUs;
    # gpuaudit numbers GPUs as NVML does (PCI bus order), and the table pairs GPU i with GPU i.
    os.environ["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
    res = {"started": time.strftime("%Y-%m-%dT%H:%M:%S")}
    # Context creation first, in fresh processes, before this one holds any GPU.
    section(res, "ctx", ctx_anchor, ctx_bin, 10)
    try:
        import torch
    except Exception as e:  # noqa: BLE001
        res["torch_error"] = repr(e)
        return res
    n = torch.cuda.device_count()
    res.update(torch=torch.__version__, cuda=torch.version.cuda, gpus=n,
               name=torch.cuda.get_device_name(0) if n else None,
               pci_bus_ids=[pci_bus_id(torch, i) for i in range(n)])
    for i in range(n):
        section(res, f"gpu{i}_copies", copies, torch, i)
        section(res, f"gpu{i}_gemm", gemms, torch, i)
    if n >= 2:
        for a in range(n):
            for b in range(n):
                if a != b:
                    section(res, f"p2p_{a}_{b}", p2p, torch, a, b)
        section(res, "nccl", allreduce, torch, n)
    return res


# ------------------------------------------------------------------------------- BabelStream

BABELSTREAM_ARGS = ["--arraysize", "536870912", "--numtimes", "50"]
# BabelStream's kernels and the gpuaudit figure each stands beside.
BABELSTREAM_PAIRS = [("Copy", "memory_copy_bandwidth", "copy"),
                     ("Add", "memory_add_bandwidth", "add"),
                     ("Triad", "memory_triad_bandwidth", "triad"),
                     ("Dot", "memory_read_bandwidth", "read")]


def rate_to_gbps(value, unit):
    """A BabelStream rate in GB/s (10^9 bytes/s) from its unit (MB/s, GB/s, MiB/s, GiB/s)."""
    u = unit.lower().replace("bytes", "b").replace("/sec", "").replace("_per_sec", "")
    u = u.replace("max_", "").strip()
    scale = {"mb": 1e-3, "gb": 1.0, "mib": (1 << 20) / 1e9, "gib": (1 << 30) / 1e9}
    if u not in scale:
        raise ValueError(f"unknown BabelStream unit {unit!r}")
    return float(value) * scale[u]


def parse_babelstream(text):
    """{"Copy": GB/s, ...} from BabelStream's output, CSV (--csv) or its table."""
    out = {}
    lines = [l.strip() for l in text.splitlines() if l.strip()]
    for i, l in enumerate(lines):
        cells = [c.strip() for c in l.split(",")]
        if len(cells) > 4 and cells[0].lower() == "function":
            # CSV: function,num_times,n_elements,sizeof,max_MB_per_sec,min_runtime,... (5.0
            # writes max_MB_per_sec, older versions max_mbytes_per_sec; GB/MiB/GiB with --gb/--mibibytes)
            col = next((k for k, c in enumerate(cells) if c.lower().endswith("_per_sec")), None)
            if col is None:
                raise ValueError("BabelStream CSV without a bytes-per-second column")
            for row in lines[i + 1:]:
                r = [c.strip() for c in row.split(",")]
                if len(r) > col and r[0] in {p[0] for p in BABELSTREAM_PAIRS}:
                    out[r[0]] = rate_to_gbps(r[col], cells[col])
            return out
        words = l.split()
        if len(words) >= 2 and words[0] == "Function" and "bytes/sec" in words[1].lower():
            # The table: Function MBytes/sec Min (sec) Max Average
            for row in lines[i + 1:]:
                r = row.split()
                if len(r) >= 2 and r[0] in {p[0] for p in BABELSTREAM_PAIRS}:
                    out[r[0]] = rate_to_gbps(r[1], words[1])
            return out
    return out


def run_babelstream(binary):
    res = {"binary": binary}
    try:
        helptext = subprocess.run([binary, "--help"], capture_output=True, text=True,
                                  timeout=60)
        has_csv = "--csv" in (helptext.stdout + helptext.stderr)
    except Exception as e:  # noqa: BLE001
        res["error"] = f"{binary} --help: {e!r}"
        return res
    cmd = [binary] + BABELSTREAM_ARGS + (["--csv"] if has_csv else [])
    res["command"] = " ".join(cmd)
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    except Exception as e:  # noqa: BLE001
        res["error"] = repr(e)
        return res
    res["exit"] = r.returncode
    res["output"] = r.stdout[-4000:]
    try:
        res["GBps"] = parse_babelstream(r.stdout)
    except ValueError as e:
        res["error"] = str(e)
    if not res.get("GBps") and "error" not in res:
        res["error"] = "no Copy/Add/Triad/Dot figure in BabelStream's output"
    return res


def selftest():
    csv = ("function,num_times,n_elements,sizeof,max_mbytes_per_sec,min_runtime,max_runtime,"
           "avg_runtime\nCopy,50,536870912,8,4060123.5,0.002,0.003,0.0025\n"
           "Mul,50,536870912,8,4000000,0.002,0.003,0.0025\n"
           "Add,50,536870912,8,4374000,0.002,0.003,0.0025\n"
           "Triad,50,536870912,8,4373000.0,0.002,0.003,0.0025\n"
           "Dot,50,536870912,8,4448000,0.002,0.003,0.0025\n")
    got = parse_babelstream(csv)
    assert set(got) == {"Copy", "Add", "Triad", "Dot"}, got
    assert abs(got["Copy"] - 4060.1235) < 1e-6, got
    # BabelStream 5.0's own --csv header, as it printed it on an H200 (2026-12-01).
    v5 = ("function,num_times,n_elements,sizeof,max_MB_per_sec,min_runtime,max_runtime,avg_runtime\n"
          "Copy,50,536870912,8,4.00869e+06,0.00214283,0.00216088,0.00214491\n"
          "Dot,50,536870912,8,4.52922e+06,0.00189656,0.00190973,0.00190352\n")
    got = parse_babelstream(v5)
    assert abs(got["Copy"] - 4008.69) < 1e-6 and abs(got["Dot"] - 4529.22) < 1e-6, got
    table = ("BabelStream\nVersion: 5.0\nRunning kernels 50 times\n"
             "Function    MBytes/sec  Min (sec)   Max         Average\n"
             "Copy        4060123.500 0.00211     0.00230     0.00220\n"
             "Triad       4373000.000 0.00295     0.00300     0.00297\n")
    got = parse_babelstream(table)
    assert got == {"Copy": 4060.1235, "Triad": 4373.0}, got
    gib = "Function    GiBytes/sec  Min\nDot 4000.0 0.1\n"
    assert abs(parse_babelstream(gib)["Dot"] - 4000.0 * (1 << 30) / 1e9) < 1e-6
    try:
        rate_to_gbps(1, "furlongs/sec")
        raise AssertionError("an unknown unit must not parse")
    except ValueError:
        pass
    assert parse_babelstream("nothing here") == {}
    # The comparison rows: BabelStream beside gpuaudit's GPU 0 figures, ratio and bar.
    ms = [{"name": "memory_copy_bandwidth", "gpu": 0, "value": 4100.0},
          {"name": "memory_read_bandwidth", "gpu": 0, "value": 4470.0},
          {"name": "memory_copy_bandwidth", "gpu": 1, "value": 1.0}]
    rows = babelstream_rows(ms, {"GBps": {"Copy": 4060.0, "Dot": 4448.0, "Add": 4374.0}})
    assert rows[0] == ("GPU0 copy vs BabelStream Copy GB/s", 4100.0, 4060.0, "hi"), rows
    assert rows[1] == ("GPU0 add vs BabelStream Add GB/s", None, 4374.0, "hi"), rows
    assert rows[2] == ("GPU0 triad vs BabelStream Triad GB/s", None, None, "hi"), rows
    assert rows[3][1:] == (4470.0, 4448.0, "hi"), rows
    assert babelstream_rows(ms, {"error": "x"}) == []
    print("selftest: ok")
    return 0


def babelstream_rows(ms, bs):
    """The table's BabelStream rows (GPU 0, where BabelStream runs by default)."""
    figs = bs.get("GBps") or {}
    if not figs:
        return []
    return [(f"GPU0 {ours} vs BabelStream {theirs} GB/s", find(ms, name, gpu=0),
             figs.get(theirs), "hi") for theirs, name, ours in BABELSTREAM_PAIRS]


# ------------------------------------------------------------------------------- compare

def find(ms, name, gpu=None, peer=None, dtype=None, size=None):
    m = find_m(ms, name, gpu, peer, dtype, size)
    return m["value"] if m else None


def find_m(ms, name, gpu=None, peer=None, dtype=None, size=None):
    """The measurement (largest size where several match)."""
    best = None
    for m in ms:
        if m.get("name") != name:
            continue
        if gpu is not None and m.get("gpu") != gpu:
            continue
        if peer is not None and m.get("peer") != peer:
            continue
        if dtype is not None and m.get("dtype") != dtype:
            continue
        if size is not None and m.get("size_bytes") != size:
            continue
        if best is None or (m.get("size_bytes") or 0) > (best.get("size_bytes") or 0):
            best = m
    return best


def human(b):
    return f"{b // GIB} GiB" if b and b % GIB == 0 else f"{(b or 0) // MIB} MiB"


def measurements_of(doc):
    """The flat list from `gpuaudit bench --format json`, a full report, or the example."""
    if isinstance(doc, dict):
        for k in ("measurements",):
            if isinstance(doc.get(k), list):
                return doc[k]
        for v in doc.values():
            if isinstance(v, dict) and isinstance(v.get("measurements"), list):
                return v["measurements"]
    return []


def compare(ga_path, an_path, bs_path=None):
    ga = json.load(open(ga_path))
    an = json.load(open(an_path))
    ms = measurements_of(ga)
    rows = []  # metric, gpuaudit, anchor, kind ('hi' higher is better, 'lo' lower, None info)

    def add(metric, g, a, kind):
        rows.append((metric, g, a, kind))

    n = an.get("gpus") or 0
    for i in range(n):
        c = an.get(f"gpu{i}_copies", {})
        for d in ("h2d", "d2h"):
            add(f"GPU{i} {d} pinned 1 GiB GB/s", find(ms, f"{d}_pinned_bandwidth", gpu=i, size=GIB),
                c.get(f"{d}_pinned_GBps"), "hi")
        for d in ("h2d", "d2h"):
            add(f"GPU{i} {d} pageable 1 GiB GB/s", find(ms, f"{d}_pageable_bandwidth", gpu=i, size=GIB),
                c.get(f"{d}_pageable_GBps"), None)
        kern = find(ms, "memory_copy_bandwidth", gpu=i)
        memcpy = find(ms, "memory_memcpy_bandwidth", gpu=i)
        best = max([x for x in (kern, memcpy) if x is not None], default=None)
        add(f"GPU{i} device copy r+w GB/s (best)", best, c.get("d2d_rw_GBps"), "hi")
        add(f"GPU{i} device copy kernel r+w GB/s", kern, c.get("d2d_rw_GBps"), None)
        add(f"GPU{i} device memcpy r+w GB/s", memcpy, c.get("d2d_rw_GBps"), None)
        if i == 0 and bs_path:
            bs = json.load(open(bs_path))
            if bs.get("error"):
                print(f"warning: BabelStream: {bs['error']}")
            rows.extend(babelstream_rows(ms, bs))
        g = an.get(f"gpu{i}_gemm", {})
        for dt in ("bf16", "fp16", "tf32", "fp32", "fp64", "fp8"):
            ga_v = find(ms, "gemm_tflops", gpu=i, dtype=dt)
            an_v = g.get(f"gemm_{dt}_TFLOPs")
            if ga_v is not None or an_v is not None:
                add(f"GPU{i} GEMM {dt} TFLOPS", ga_v, an_v, "hi")
    for a in range(n):
        for b in range(n):
            if a == b:
                continue
            p = an.get(f"p2p_{a}_{b}", {})
            # gpuaudit copies less than the anchor's 1 GiB beyond 4 GPUs (the matrix grows as
            # n^2); the label says its size.
            m = find_m(ms, "p2p_bandwidth", gpu=a, peer=b)
            size = f" {human(m.get('size_bytes'))}" if m else ""
            add(f"P2P {a}->{b}{size} GB/s", m["value"] if m else None,
                p.get(f"p2p_{a}to{b}_GBps"), "hi")
            add(f"P2P {a}->{b} 4 B copy us", find(ms, "p2p_latency_us", gpu=a, peer=b),
                p.get(f"p2p_{a}to{b}_small_copy_us"), "lo")
    nc = an.get("nccl", {})
    big = nc.get(f"allreduce_{GIB}", {})
    one = nc.get(f"allreduce_{MIB}", {})
    if n >= 2:
        add("all-reduce busbw 1 GiB GB/s", find(ms, "allreduce_busbw", size=GIB), big.get("busbw_GBps"), "hi")
        add("all-reduce 1 MiB us", find(ms, "allreduce_latency_us", size=MIB), one.get("time_us"), "lo")
    cx = an.get("ctx", {})
    add("context create median ms", find(ms, "context_create_ms"), cx.get("total_ms_median"), "lo")
    add("cuInit median ms", find(ms, "cuinit_ms"), cx.get("init_ms_median"), None)

    # Both sides must number the GPUs alike (gpuaudit: NVML, PCI bus order).
    ga_bus = {d.get("gpu"): d.get("pci_bus_id") for d in devices_of(ga)}
    for i, bus in enumerate(an.get("pci_bus_ids") or []):
        if bus and ga_bus.get(i) and bus.lower() != ga_bus[i].lower():
            print(f"warning: anchor GPU {i} is {bus}, gpuaudit GPU {i} is {ga_bus[i]}: "
                  f"the rows of that GPU compare different GPUs")

    fails = 0
    bad = []
    p2p_ratios = []
    w = max(len(r[0]) for r in rows) if rows else 10
    print()
    print(f"{'metric':<{w}}  {'gpuaudit':>10}  {'anchor':>10}  {'ratio':>6}  {'bar':>6}  result")
    print("-" * (w + 52))
    for metric, g, a, kind in rows:
        fg = "-" if g is None else f"{g:10.2f}"
        fa = "-" if a is None else f"{a:10.2f}"
        ratio = (g / a) if (g is not None and a not in (None, 0)) else None
        fr = "-" if ratio is None else f"{ratio:6.3f}"
        if kind == "hi":
            bar, ok = ">=0.97", ratio is not None and ratio >= 0.97
        elif kind == "lo":
            bar, ok = "<=1.05", ratio is not None and ratio <= 1.05
        else:
            bar, ok = "", None
        if ok is None:
            res = "info"
        elif ratio is None:
            res, fails = "MISSING", fails + 1
        else:
            res = "PASS" if ok else "FAIL"
            fails += 0 if ok else 1
        if res in ("MISSING", "FAIL"):
            bad.append(f"{metric} ({res.lower()}{'' if ratio is None else f', {ratio:.3f}'})")
        if metric.startswith("P2P") and metric.endswith("GB/s") and ratio is not None:
            p2p_ratios.append(ratio)
        print(f"{metric:<{w}}  {fg:>10}  {fa:>10}  {fr:>6}  {bar:>6}  {res}")
    # With 8 GPUs the table has over 200 rows: the gist again, at the end.
    if p2p_ratios:
        r = sorted(p2p_ratios)
        print(f"\nP2P bandwidth over {len(r)} ordered pairs: ratio min {r[0]:.3f}, "
              f"median {r[len(r) // 2]:.3f}, max {r[-1]:.3f}")
    for b in bad:
        print(f"  below the bar or missing: {b}")
    print(f"\n{fails} figure(s) below the bar or missing")
    return 1 if fails else 0


def devices_of(doc):
    """The CUDA devices gpuaudit measured ({gpu, pci_bus_id, ...}), where the document has them."""
    if isinstance(doc, dict):
        for k in ("devices",):
            v = doc.get(k)
            if isinstance(v, list):
                return [d for d in v if isinstance(d, dict)]
            if isinstance(v, dict) and isinstance(v.get("value"), list):
                return [d for d in v["value"] if isinstance(d, dict)]
        for v in doc.values():
            if isinstance(v, dict):
                found = devices_of(v)
                if found:
                    return found
    return []


def main():
    a = sys.argv[1:]
    if not a:
        print(__doc__)
        return 2
    if a[0] == "ctx-probe":
        return ctx_probe_ctypes()
    if a[0] == "anchor":
        ctx_bin, out = None, None
        if "--ctx-bin" in a:
            ctx_bin = a[a.index("--ctx-bin") + 1]
        if "--out" in a:
            out = a[a.index("--out") + 1]
        res = run_anchor(ctx_bin)
        text = json.dumps(res, indent=1)
        if out:
            with open(out, "w") as f:
                f.write(text)
        print(text)
        return 0
    if a[0] == "compare" and len(a) == 3:
        return compare(a[1], a[2])
    if a[0] == "compare" and len(a) == 5 and a[3] == "--babelstream":
        return compare(a[1], a[2], a[4])
    if a[0] == "babelstream" and len(a) >= 2:
        res = run_babelstream(a[1])
        text = json.dumps(res, indent=1)
        if "--out" in a:
            with open(a[a.index("--out") + 1], "w") as f:
                f.write(text)
        print(text)
        return 0 if "error" not in res else 1
    if a[0] == "selftest":
        return selftest()
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main())
