"""A user's own inference loop, eager: a small transformer classifier over a stream of batches."""

import time

import torch
from torch import nn

import cgkit

BATCHES, BATCH, LENGTH, WIDTH = 50, 4, 32, 128


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        layer = nn.TransformerEncoderLayer(WIDTH, 4, 4 * WIDTH, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, 3, enable_nested_tensor=False)
        self.head = nn.Linear(WIDTH, 10)

    def forward(self, x):
        return self.head(self.encoder(x).mean(1))


def stream():
    g = torch.Generator(device="cpu").manual_seed(2)
    return [torch.randn(BATCH, LENGTH, WIDTH, generator=g).cuda() for _ in range(BATCHES)]


def main():
    torch.manual_seed(0)
    model = Classifier().cuda().eval()
    data = stream()
    outputs = []
    with torch.no_grad():
        torch.cuda.synchronize()
        start = time.perf_counter()
        for x in data:
            outputs.append(model(x))
        torch.cuda.synchronize()
        elapsed = time.perf_counter() - start
    logits = torch.stack(outputs)
    print(f"predicted classes checksum {int(logits.argmax(-1).sum())}")
    cgkit.emit("logits", logits[::10])
    print(f"time per batch {elapsed / BATCHES * 1e3:.3f} ms")


if __name__ == "__main__":
    main()
