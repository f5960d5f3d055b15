"""Shared helpers for the peer benchmarks: threads, timing, memory, one JSON line per measurement."""
import datetime, gzip, json, platform, resource, statistics, struct, time
from pathlib import Path

import numpy as np
import torch

# The repository's bundled data (examples/data), two levels up from bench/peers.
DATA = Path(__file__).resolve().parent.parent.parent / "examples" / "data"


def set_threads(n):
    torch.set_num_threads(n)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:
        pass  # already set in this process


def time_it(fn, warmup=5, iters=30):
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(iters):
        t0 = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t0) * 1e6)
    return {"median_us": statistics.median(samples), "min_us": min(samples), "max_us": max(samples)}


def peak_rss_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # ru_maxrss is KiB on Linux


def allocator():
    """The malloc this process runs on: "jemalloc" or "tcmalloc" when one is mapped in (preloaded
    with LD_PRELOAD by compare.py), else "default" (glibc). Read from the process's own memory map,
    so a row says what really ran, not what was asked for."""
    try:
        maps = Path("/proc/self/maps").read_text()
    except OSError:
        return "default"
    for name in ("jemalloc", "tcmalloc"):
        if f"lib{name}" in maps:
            return name
    return "default"


def cpu_model():
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor()


def emit(bench, variant, params, **figures):
    row = {"bench": bench, "variant": variant, "params": params, **figures,
           "peak_rss_mb": round(peak_rss_mb(), 1), "allocator": allocator(), "torch": torch.__version__,
           "threads": torch.get_num_threads(), "cpu": cpu_model(),
           "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}
    print(json.dumps(row), flush=True)


def load_idx(path):
    """Read an IDX file (raw or gzip) into a numpy array, checking the magic and the size."""
    path = Path(path)
    raw = gzip.open(path).read() if path.suffix == ".gz" else path.read_bytes()
    zero, dtype_code, n_dims = raw[0:2], raw[2], raw[3]
    if zero != b"\0\0" or dtype_code != 0x08:
        raise ValueError(f"{path}: not an unsigned-byte IDX file")
    dims = struct.unpack(f">{n_dims}I", raw[4:4 + 4 * n_dims])
    body = raw[4 + 4 * n_dims:]
    if len(body) != int(np.prod(dims)):
        raise ValueError(f"{path}: header says {dims}, file holds {len(body)} bytes")
    return np.frombuffer(body, dtype=np.uint8).reshape(dims)


def time_conv_variants(bench, make_model, make_opt, loss_fn, x, y, variants, iters):
    """Time one training step of a convolutional net in each variant (NCHW eager, channels-last
    eager, torch.compile), emitting one line each: the harness cnn.py and conv_bn.py share."""
    for variant in variants:
        torch.manual_seed(0)
        model, xs = make_model(), x
        if variant == "channels-last":
            model, xs = model.to(memory_format=torch.channels_last), x.to(memory_format=torch.channels_last)
        opt = make_opt(model.parameters())
        run = torch.compile(model) if variant == "compile" else model

        def step():
            opt.zero_grad(set_to_none=True)
            loss_fn(run(xs), y).backward()
            opt.step()

        t0 = time.perf_counter(); step(); first_s = time.perf_counter() - t0
        t = time_it(step, warmup=3, iters=iters)
        emit(bench, variant, {"batch": x.shape[0]}, **t,
             samples_per_s=round(x.shape[0] / (t["median_us"] * 1e-6), 1), first_step_s=round(first_s, 3))


def step_args(batch):
    """The command line of the training-step peers: --batch, --threads, --iters, --variants."""
    import argparse
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=batch)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--variants", nargs="*", default=["eager", "channels-last", "compile"])
    args = ap.parse_args()
    set_threads(args.threads)
    return args
