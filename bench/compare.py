#!/usr/bin/env python3
"""Run dlc's benchmarks and the PyTorch peers side by side on this machine and print the ratios.

Usage (after `bash bench/setup.sh`):  bench/.venv/bin/python bench/compare.py [--quick]
Each row: dlc's median time, PyTorch eager's, torch.compile's, PyTorch's best variant (F.gelu,
fused optimizer, torch.compile, channels-last), and the speed-up of dlc over each (above 1: dlc is
faster). 2 threads each. The gelu rows also give the machine's copy bandwidth at that size
(PyTorch's `copy_`) beside the gelu's GB/s. Then the start-up rows: parse + check + compile of each example against `import torch` and
PyTorch's first finished MLP step in a fresh process (eager and torch.compile).
"""
import argparse, json, os, subprocess, sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DLC = ROOT / "target" / "release" / "dlc"


def dlc_bench(file, steps):
    env = dict(os.environ, RAYON_NUM_THREADS="2")
    out = subprocess.run([str(DLC), "bench", str(ROOT / "bench" / file), "--json", "--steps", str(steps)],
                         capture_output=True, text=True, env=env, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def peer(script, *args):
    out = subprocess.run([sys.executable, str(ROOT / "bench" / "peers" / script), "--threads", "2", *args],
                         capture_output=True, text=True, check=True)
    return [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="fewer iterations")
    args = ap.parse_args()
    subprocess.run(["cargo", "build", "--release", "-q", "-p", "dlc"], cwd=ROOT, check=True)
    iters = "10" if args.quick else "30"
    rows = []
    gelu = peer("gelu.py", "--iters", iters)
    for n, file in [(1 << 20, "gelu_1m.dl"), (1 << 24, "gelu_16m.dl")]:
        d = dlc_bench(file, int(iters))
        p = {r["variant"]: r["median_us"] / 1e3 for r in gelu if r["params"]["n"] == n}
        best = min(p["builtin"], p["compile"])
        copy = 8 * n / (p["copy"] * 1e-3) / 1e9
        note = f"{d['gb_per_s']:.1f} GB/s = {d['gb_per_s'] / copy:.0%} of copy ({copy:.1f} GB/s)"
        rows.append((f"guide gelu {n >> 20}M f32", d["median_ms"], p["eager"], p["compile"], best, note))
    mlp = peer("mlp.py", "--iters", iters)
    for batch in (128, 1024):
        d = dlc_bench(f"mlp_step_{batch}.dl", int(iters))
        p = {r["variant"]: r["median_us"] / 1e3 for r in mlp if r["params"]["batch"] == batch}
        best = min(p["eager-fused"], p["compile"])
        rows.append((f"MLP AdamW step, batch {batch}", d["median_ms"], p["eager"], p["compile"], best, f"{d['kernels']} kernels"))
    # PyTorch's best CNN variant is channels-last eager or torch.compile (cnn.py runs both).
    cnn = peer("cnn.py", "--iters", "10" if args.quick else "20")
    d = dlc_bench("mnist_cnn_step.dl", 10 if args.quick else 20)
    p = {r["variant"]: r["median_us"] / 1e3 for r in cnn}
    best = min(v for k, v in p.items() if k != "eager")
    rows.append(("MNIST CNN Adam step, b128", d["median_ms"], p["eager"], p["compile"], best, f"{d['kernels']} kernels"))
    # Batch norm in training: its statistics and their gradients (no target in the issue; shown
    # for the reductions fused with their elementwise input).
    bn = peer("conv_bn.py", "--iters", "10" if args.quick else "20")
    d = dlc_bench("conv_bn_step.dl", 10 if args.quick else 20)
    p = {r["variant"]: r["median_us"] / 1e3 for r in bn}
    best = min(v for k, v in p.items() if k != "eager")
    rows.append(("conv-BN-relu SGD step, b64", d["median_ms"], p["eager"], p["compile"], best, f"{d['kernels']} kernels"))
    print(f"{'workload':<28} {'dlc ms':>9} {'eager':>9} {'compile':>9} {'best':>9} {'vs eager':>9} {'vs compile':>11} {'vs best':>8}  note")
    for name, d, e, c, b, note in rows:
        print(f"{name:<28} {d:>9.3f} {e:>9.3f} {c:>9.3f} {b:>9.3f} {e / d:>8.2f}x {c / d:>10.2f}x {b / d:>7.2f}x  {note}")
    # Peak resident memory of the batch-1024 MLP step, each in a fresh process on synthetic data
    # (the MNIST benchmarks hold the whole data set). The target: dlc at most a quarter of eager.
    d = dlc_bench("mlp_step_1024_memory.dl", 5)
    p = [r for r in peer("mlp.py", "--iters", "5", "--batch", "1024", "--variants", "eager") if r["variant"] == "eager"][0]
    print(f"\npeak RSS, MLP step at batch 1024: dlc {d['peak_rss_mb']:.0f} MiB, PyTorch eager {p['peak_rss_mb']:.0f} MiB"
          f" ({d['peak_rss_mb'] / p['peak_rss_mb']:.2f}x; target at most 0.25x)")
    startup(args)


def startup(args):
    """Time to first work: dlc's compile of each example (parse, check, trace, autodiff, fusion
    and memory plan of the training step: `dlc explain --json` reports it) and the wall time of
    `dlc run` on the small iris example, against PyTorch's import and first MLP step."""
    import time
    torch = {r["variant"]: r["median_s"] for r in peer("startup.py", "--repeat", "2" if args.quick else "3")}
    worst = (0.0, "")
    for f in sorted((ROOT / "examples").glob("*.dl")):
        t0 = time.perf_counter()
        out = subprocess.run([str(DLC), "explain", "--json", str(f)], capture_output=True, text=True)
        wall = time.perf_counter() - t0
        if out.returncode != 0:
            continue
        for item in json.loads(out.stdout)["items"]:
            if "compile_ms" in item:
                worst = max(worst, (item["compile_ms"], f.name))
    t0 = time.perf_counter()
    subprocess.run([str(DLC), "run", str(ROOT / "examples" / "iris.dl"), "--set", "steps=1"], capture_output=True, check=True)
    iris = time.perf_counter() - t0
    print(f"\nslowest training-step compile over examples/*.dl: {worst[0]:.1f} ms ({worst[1]})  (target: under 200 ms)")
    print(f"`dlc run examples/iris.dl --set steps=1`, whole process: {iris * 1e3:.0f} ms  (target: training starts in under 500 ms)")
    print(f"PyTorch: import torch {torch['import-torch'] * 1e3:.0f} ms; first MLP step eager {torch['first-step-eager']:.2f} s,"
          f" torch.compile {torch['first-step-compile']:.2f} s")


if __name__ == "__main__":
    main()
