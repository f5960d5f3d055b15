"""Training examples/cifar_jpeg.dl's SmallNet on the bundled JPEG folder
(examples/data/cifar-10-jpeg/train, 3,000 CIFAR-10 images): how long the training loop waits for
its data, as a share of the epoch, with torchvision's ImageFolder and DataLoader for 0, 1 and 2
workers.

The same job as `dlc run examples/cifar_jpeg.dl --set epochs=2`: conv 3->16 and 16->32 (3x3,
padding 1), relu, max-pool 2 after each, fc 2048->128->10; cross-entropy; SGD lr 0.05, momentum
0.9, weight decay 5e-4, a cosine schedule over the recipe's 10 epochs stepped each step; shuffled
batches of 64 (drop_last); the augmentations of image_folder.py (RandomResizedCrop(32, scale=(0.6,
1.0)), RandomHorizontalFlip, ColorJitter(0.2, 0.2, 0.2)) then ToTensor and Normalize(0.47, 0.25),
in the workers as dlc maps on its feed's; pin_memory, persistent workers (so the timed epoch
reuses them, as dlc's feed threads are reused); the test folder (800 images) evaluated after each
epoch, outside its time, as dlc's `evaluate test_set every epoch` is.

Timed: the second epoch (the first starts the workers, fills the page cache and warms the
kernels; dlc's figure is its second epoch too). `epoch_s` runs from `iter(loader)` to the last
optimiser step; `data_wait_s` is the time spent in `next()` on the loader's iterator, what dlc's
`data_wait_s` counts (the step blocked on the feed); `data_wait_pct` = data_wait_s / epoch_s."""
import argparse, math, time

import torch
import torch.nn as nn
import torch.nn.functional as F
from torchvision import datasets, transforms

from common import DATA, emit, set_threads


class SmallNet(nn.Module):
    def __init__(self, classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 3, padding=1)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        self.fc1 = nn.Linear(2048, 128)
        self.fc2 = nn.Linear(128, classes)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc2(F.relu(self.fc1(torch.flatten(x, 1))))


def loaders(folder, batch, workers):
    normalize = [transforms.ToTensor(), transforms.Normalize([0.47] * 3, [0.25] * 3)]
    train_t = transforms.Compose([
        transforms.Resize((32, 32)),
        transforms.RandomResizedCrop(32, scale=(0.6, 1.0)),
        transforms.RandomHorizontalFlip(),
        transforms.ColorJitter(brightness=0.2, contrast=0.2, saturation=0.2),
        *normalize,
    ])
    test_t = transforms.Compose([transforms.Resize((32, 32)), *normalize])
    common = dict(num_workers=workers, pin_memory=True, persistent_workers=workers > 0)
    train = torch.utils.data.DataLoader(datasets.ImageFolder(f"{folder}/train", transform=train_t),
                                        batch_size=batch, shuffle=True, drop_last=True, **common)
    test = torch.utils.data.DataLoader(datasets.ImageFolder(f"{folder}/test", transform=test_t),
                                       batch_size=200, **common)
    return train, test


def train_epoch(model, opt, sched, loader):
    """One epoch; (epoch_s, data_wait_s, steps, mean loss)."""
    model.train()
    waited, steps, total = 0.0, 0, 0.0
    t0 = time.perf_counter()
    it = iter(loader)
    while True:
        w0 = time.perf_counter()
        try:
            x, y = next(it)
        except StopIteration:
            waited += time.perf_counter() - w0
            break
        waited += time.perf_counter() - w0
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        sched.step()
        steps, total = steps + 1, total + loss.item()
    return time.perf_counter() - t0, waited, steps, total / max(steps, 1)


@torch.no_grad()
def accuracy(model, loader):
    model.eval()
    right = n = 0
    for x, y in loader:
        right += (model(x).argmax(1) == y).sum().item()
        n += len(y)
    return right / n


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--workers", type=int, nargs="*", default=[0, 1, 2])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--epochs", type=int, default=2, help="the last one is reported")
    ap.add_argument("--folder", default=str(DATA / "cifar-10-jpeg"))
    args = ap.parse_args()
    set_threads(args.threads)
    for workers in args.workers:
        torch.manual_seed(0)
        train, test = loaders(args.folder, args.batch, workers)
        model = SmallNet()
        opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4)
        # cifar_jpeg.dl's cosine() spans its 10 epochs (`--set epochs=2` keeps the horizon).
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 0.5 * (1 + math.cos(math.pi * min(s / (10 * len(train)), 1))))
        for _ in range(args.epochs):
            epoch_s, wait_s, steps, loss = train_epoch(model, opt, sched, train)
            acc = accuracy(model, test)
        emit("train_folder", f"workers-{workers}", {"batch": args.batch, "steps": steps, "epoch": args.epochs},
             epoch_s=round(epoch_s, 4), data_wait_s=round(wait_s, 4), data_wait_pct=round(100 * wait_s / epoch_s, 2),
             loss=round(loss, 4), test_accuracy=round(acc, 4))


if __name__ == "__main__":
    main()
