"""The PyTorch twin of examples/diabetes.dl: linear regression on the diabetes CSV with float targets,
standardised columns, Adam(lr=0.03), a per-step cosine decay to 0 over the run, batches of 32 shuffled
each epoch (the last one partial), 200 epochs; then mean squared error (in the target's units) and R²
over all 442 rows. Reports `train_s` (the loop alone) and `load_s` (reading and standardising).
"""
import argparse, time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from common import DATA, emit, set_threads

# The same constants as the DL program (each column's mean and standard deviation over the file).
MEAN_X = [48.518, 1.4683, 26.376, 94.647, 189.14, 115.44, 49.788, 4.0702, 4.6414, 91.26]
STD_X = [13.094, 0.499, 4.4131, 13.816, 34.569, 30.379, 12.92, 1.289, 0.5218, 11.483]
MEAN_Y, STD_Y = 152.13348, 77.005746


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--epochs", type=int, default=200)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--data", default=str(DATA))
    args = ap.parse_args()
    set_threads(args.threads)
    torch.manual_seed(0)
    t0 = time.perf_counter()
    raw = np.loadtxt(f"{args.data}/sklearn/diabetes.csv", delimiter=",", skiprows=1, dtype=np.float32)
    x = (torch.from_numpy(raw[:, :10]) - torch.tensor(MEAN_X)) / torch.tensor(STD_X)
    y = (torch.from_numpy(raw[:, 10]) - MEAN_Y) / STD_Y
    load_s = time.perf_counter() - t0

    model = nn.Linear(10, 1)
    opt = torch.optim.Adam(model.parameters(), lr=0.03)
    per_epoch = (len(x) + 31) // 32
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=args.epochs * per_epoch)
    t0 = time.perf_counter()
    for _ in range(args.epochs):
        order = torch.randperm(len(x))
        for i in range(0, len(x), 32):
            idx = order[i:i + 32]
            loss = F.mse_loss(model(x[idx]).squeeze(-1), y[idx])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sched.step()
    train_s = time.perf_counter() - t0
    with torch.no_grad():
        mse = F.mse_loss(model(x).squeeze(-1), y).item()
    emit("diabetes_train", "eager", {"epochs": args.epochs, "batch": 32},
         train_s=round(train_s, 3), load_s=round(load_s, 4), steps=args.epochs * per_epoch,
         mse=round(mse * STD_Y * STD_Y, 2), r2=round(1.0 - mse, 5))


if __name__ == "__main__":
    main()
