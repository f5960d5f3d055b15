#!/usr/bin/env python3
"""dlc's training steps on the GPU against PyTorch's on the same GPU, in one run.

Usage (on a machine with an NVIDIA GPU and PyTorch; run by scripts/gpu-check.sh):
    python3 bench/gpu_compare.py --dlc ./dlc-gpu [--runs N] [--steps S] [--out FILE.md]

For each bench program with a GPU peer (bench/peers/gpu_steps.py: eager, eager under bf16
autocast, torch.compile, and eager with each step's batch copied from pinned host memory as
dlc's steps copy theirs), `dlc bench PROGRAM --device cuda --json` runs --runs times in fresh
processes, and the peer once per run. Figures are step times in ms, the median of the runs'
medians; ratios are PyTorch / dlc (above 1: dlc is faster). dlc's row also says what crossed
PCIe per step and how many ops ran on the host, from the device report. The table goes to stdout
and, as markdown, to --out.
"""
import argparse, datetime, json, statistics, subprocess, sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROGRAMS = ["mlp_step_128", "mlp_step_1024", "mnist_cnn_step", "conv_bn_step"]


def json_lines(text):
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def dlc_runs(dlc, name, runs, steps):
    reports = []
    for _ in range(runs):
        out = subprocess.run([dlc, "bench", f"bench/{name}.dl", "--device", "cuda", "--json", "--steps", str(steps)],
                             capture_output=True, text=True, cwd=ROOT, timeout=600)
        if out.returncode != 0:
            raise RuntimeError(f"dlc bench {name} failed: {out.stderr[-800:]}")
        reports.append(json.loads(out.stdout))
    return reports


def peer_runs(name, runs):
    by_variant = {}
    for _ in range(runs):
        out = subprocess.run([sys.executable, "gpu_steps.py", "--only", name], capture_output=True, text=True,
                             cwd=ROOT / "bench" / "peers", timeout=600)
        if out.returncode != 0:
            raise RuntimeError(f"gpu_steps.py {name} failed: {out.stderr[-800:]}")
        for row in json_lines(out.stdout):
            by_variant.setdefault(row["variant"], []).append(row["median_us"] / 1e3)
    return {v: statistics.median(ms) for v, ms in by_variant.items()}


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--dlc", default=str(ROOT / "target" / "release" / "dlc"))
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--out")
    args = ap.parse_args()
    gpu = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True, text=True).stdout.strip()
    lines = [f"GPU step times on {gpu}, {datetime.date.today()}, ms (median of {args.runs} fresh processes' medians);"
             " ratios PyTorch / dlc", "",
             "| program | dlc | eager | eager + batch copy | eager bf16 | compile | vs eager | vs eager + copy | vs best | dlc: up / down a step, round trips through the host |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |"]
    status = 0
    for name in PROGRAMS:
        try:
            reports = dlc_runs(args.dlc, name, args.runs, args.steps)
            peer = peer_runs(name, args.runs)
        except (RuntimeError, subprocess.TimeoutExpired) as e:
            lines.append(f"| {name} | failed: {str(e).splitlines()[0][:120]} | | | | | | | | |")
            status = 1
            continue
        d = statistics.median(r["median_ms"] for r in reports)
        rep = reports[-1].get("device_report") or {}
        steps = reports[-1]["steps"] + reports[-1]["warmup"]
        traffic = (f"{rep.get('bytes_up', 0) / steps / 1e6:.2f} / {rep.get('bytes_down', 0) / steps / 1e6:.2f} MB,"
                   f" {sum(rep.get('host_ops', {}).values())} round trips")
        best = min(peer.values())
        cell = lambda v: f"{peer[v]:.3f}" if v in peer else "-"
        ratio = lambda v: f"{peer[v] / d:.2f}x" if v in peer else "-"
        lines.append(f"| {name} | {d:.3f} | {cell('eager')} | {cell('eager-h2d')} | {cell('eager-bf16')} | {cell('compile')} |"
                     f" {ratio('eager')} | {ratio('eager-h2d')} | {best / d:.2f}x | {traffic} |")
    text = "\n".join(lines)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")
    return status


if __name__ == "__main__":
    sys.exit(main())
