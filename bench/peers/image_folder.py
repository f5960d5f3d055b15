"""One epoch of the bundled JPEG folder (examples/data/cifar-10-jpeg/train, 3,000 CIFAR-10 images,
made by `cargo run --release -p dlc --example image_folder`) through torchvision's ImageFolder and
DataLoader, with the augmentations examples/cifar_jpeg.dl applies on dlc's feed:
RandomResizedCrop(32, scale=(0.6, 1.0)), RandomHorizontalFlip, ColorJitter(0.2, 0.2, 0.2), then
PILToTensor (u8, as dlc's stages keep bytes until `map`); shuffled batches of 64, pin_memory, for
0, 1 and 2 workers. Loading alone, no step. `--size 224` reads a folder made with `--size 224`
(decode-bound) instead."""
import argparse, time

import torch
from torchvision import datasets, transforms

from common import DATA, emit, set_threads


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--workers", type=int, nargs="*", default=[0, 1, 2])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--folder", default=str(DATA / "cifar-10-jpeg" / "train"))
    ap.add_argument("--size", type=int, default=32)
    args = ap.parse_args()
    set_threads(args.threads)
    t = transforms.Compose([
        transforms.Resize((args.size, args.size)),
        transforms.RandomResizedCrop(args.size, scale=(0.6, 1.0)),
        transforms.RandomHorizontalFlip(),
        transforms.ColorJitter(brightness=0.2, contrast=0.2, saturation=0.2),
        transforms.PILToTensor(),
    ])
    ds = datasets.ImageFolder(args.folder, transform=t)
    for workers in args.workers:
        loader = torch.utils.data.DataLoader(ds, batch_size=args.batch, shuffle=True, num_workers=workers,
                                             pin_memory=True, drop_last=True, persistent_workers=workers > 0)
        # The first epoch starts the workers and fills the page cache; the second is timed.
        for epoch in range(2):
            t0, n = time.perf_counter(), 0
            for xb, _ in loader:
                n += len(xb)
        emit("image_folder", f"workers-{workers}", {"batch": args.batch, "samples": n, "size": args.size},
             epoch_s=round(time.perf_counter() - t0, 3))


if __name__ == "__main__":
    main()
