"""One SGD step of a conv -> batch norm -> relu net on CIFAR-sized batches of 64 (the peer of
bench/conv_bn_step.dl): NCHW eager, channels-last eager, torch.compile."""
import torch
import torch.nn as nn
import torch.nn.functional as F

from common import step_args, time_conv_variants


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
    args = step_args(64)
    g = torch.Generator().manual_seed(1)
    x, y = torch.randn(args.batch, 3, 32, 32, generator=g), torch.randint(0, 10, (args.batch,), generator=g)
    time_conv_variants("conv_bn_step", ConvBn, lambda params: torch.optim.SGD(params, lr=0.01, momentum=0.9), F.cross_entropy,
                       x, y, args.variants, args.iters)


if __name__ == "__main__":
    main()
