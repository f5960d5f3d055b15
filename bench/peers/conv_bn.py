"""One SGD step of a conv -> batch norm -> relu net on CIFAR-sized batches of 64 (the peer of
bench/conv_bn_step.dl): NCHW eager, channels-last eager, torch.compile."""
import argparse, time

import torch
import torch.nn as nn
import torch.nn.functional as F

from common import emit, set_threads, time_it


class ConvBn(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1, self.n1 = nn.Conv2d(3, 32, 3, padding=1, bias=False), nn.BatchNorm2d(32)
        self.c2, self.n2 = nn.Conv2d(32, 32, 3, padding=1, bias=False), nn.BatchNorm2d(32)
        self.fc = nn.Linear(32 * 16 * 16, 10)

    def forward(self, x):
        x = F.relu(self.n1(self.c1(x)))
        x = F.max_pool2d(F.relu(self.n2(self.c2(x))), 2)
        return self.fc(torch.flatten(x, 1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--variants", nargs="*", default=["eager", "channels-last", "compile"])
    args = ap.parse_args()
    set_threads(args.threads)
    g = torch.Generator().manual_seed(1)
    x, y = torch.randn(args.batch, 3, 32, 32, generator=g), torch.randint(0, 10, (args.batch,), generator=g)
    for variant in args.variants:
        torch.manual_seed(0)
        model, xs = ConvBn(), x
        if variant == "channels-last":
            model, xs = model.to(memory_format=torch.channels_last), x.to(memory_format=torch.channels_last)
        opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
        run = torch.compile(model) if variant == "compile" else model

        def step():
            opt.zero_grad(set_to_none=True)
            F.cross_entropy(run(xs), y).backward()
            opt.step()

        t0 = time.perf_counter(); step(); first_s = time.perf_counter() - t0
        t = time_it(step, warmup=3, iters=args.iters)
        emit("conv_bn_step", variant, {"batch": args.batch}, **t,
             samples_per_s=round(args.batch / (t["median_us"] * 1e-6), 1), first_step_s=round(first_s, 3))


if __name__ == "__main__":
    main()
