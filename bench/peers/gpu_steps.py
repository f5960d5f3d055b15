"""The training-step peers on a CUDA GPU: the MLP AdamW step (b128, b1024), PyTorch's MNIST net
(Adam, b128) and the conv-BN-relu SGD step (b64), each eager, eager under bf16 autocast, and
torch.compile; one JSON line per measurement, as the CPU peers print them.

Those three keep one batch on the GPU for every step. `eager-h2d` is eager with the batch copied
from host memory each step as a training loop gets it from a DataLoader (pinned, `non_blocking`),
which is what dlc's steps do (each step's batch is uploaded).

The models are the CPU peers' own (mlp.py, cnn.py, conv_bn.py), moved to the GPU. A step is timed
from launch to `torch.cuda.synchronize()`, so a figure is the step's whole time on the GPU, not
the host's time to enqueue it. Used by bench/gpu_compare.py (run by scripts/gpu-check.sh).
"""
import argparse, contextlib, time

import torch
import torch.nn.functional as F

from cnn import Net
from common import emit
from conv_bn import ConvBn
from mlp import make as make_mlp

VARIANTS = ["eager", "eager-h2d", "eager-bf16", "compile"]


def time_cuda(fn, warmup=5, iters=30):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    samples = []
    for _ in range(iters):
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        samples.append((time.perf_counter() - t0) * 1e6)
    samples.sort()
    return {"median_us": samples[len(samples) // 2], "min_us": samples[0], "max_us": samples[-1]}


def workloads(dev):
    g = torch.Generator().manual_seed(1)

    def mlp(batch):
        model, opt, _ = make_mlp(fused=True)
        x, y = torch.randn(batch, 784, generator=g), torch.randint(0, 10, (batch,), generator=g)
        return model.to(dev), lambda m: torch.optim.AdamW(m.parameters(), lr=1e-3, fused=True), F.cross_entropy, x.to(dev), y.to(dev)

    def cnn():
        torch.manual_seed(0)
        x, y = torch.randn(128, 1, 28, 28, generator=g), torch.randint(0, 10, (128,), generator=g)
        return Net().to(dev), lambda m: torch.optim.Adam(m.parameters(), lr=1e-3, fused=True), F.nll_loss, x.to(dev), y.to(dev)

    def conv_bn():
        torch.manual_seed(0)
        x, y = torch.randn(64, 3, 32, 32, generator=g), torch.randint(0, 10, (64,), generator=g)
        return ConvBn().to(dev), lambda m: torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9), F.cross_entropy, x.to(dev), y.to(dev)

    return {"mlp_step_128": lambda: mlp(128), "mlp_step_1024": lambda: mlp(1024),
            "mnist_cnn_step": cnn, "conv_bn_step": conv_bn}


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--only", nargs="*", help="workloads by name (default: all)")
    ap.add_argument("--variants", nargs="*", default=VARIANTS, choices=VARIANTS)
    ap.add_argument("--iters", type=int, default=50)
    args = ap.parse_args()
    dev = torch.device("cuda")
    torch.backends.cudnn.benchmark = True  # the guide's setting; dlc's cuDNN path uses the heuristic
    for name, make in workloads(dev).items():
        if args.only and name not in args.only:
            continue
        for variant in args.variants:
            model, make_opt, loss_fn, x, y = make()
            opt = make_opt(model)
            bf16 = variant.endswith("-bf16")
            run = torch.compile(model) if variant == "compile" else model

            # Eight pinned host batches, taken in turn (a DataLoader's pinned queue).
            host = [(x.cpu().pin_memory(), y.cpu().pin_memory()) for _ in range(8)] if variant == "eager-h2d" else None
            turn = [0]

            def step():
                xs, ys = x, y
                if host:
                    hx, hy = host[turn[0] % len(host)]
                    turn[0] += 1
                    xs, ys = hx.to(dev, non_blocking=True), hy.to(dev, non_blocking=True)
                opt.zero_grad(set_to_none=True)
                with torch.autocast("cuda", dtype=torch.bfloat16) if bf16 else contextlib.nullcontext():
                    loss = loss_fn(run(xs), ys)
                loss.backward()
                opt.step()

            t0 = time.perf_counter(); step(); torch.cuda.synchronize(); first_s = time.perf_counter() - t0
            t = time_cuda(step, iters=args.iters)
            emit(name, variant, {"batch": x.shape[0], "device": torch.cuda.get_device_name()}, **t,
                 samples_per_s=round(x.shape[0] / (t["median_us"] * 1e-6), 1), first_step_s=round(first_s, 3))


if __name__ == "__main__":
    main()
