"""Inference script that captures a ResNet-ish model once and replays it over a dataset."""
import torch
import torch.nn as nn


def make_model():
    return nn.Sequential(
        nn.Conv2d(3, 64, 7, 2, 3), nn.BatchNorm2d(64), nn.ReLU(),
        nn.Conv2d(64, 128, 3, 2, 1), nn.BatchNorm2d(128), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(128, 1000),
    )


@torch.no_grad()
def run(loader, batch=64):
    model = make_model().cuda().eval()
    static_in = torch.zeros(batch, 3, 224, 224, device="cuda")
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            model(static_in)
    torch.cuda.current_stream().wait_stream(s)

    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        static_logits = model(static_in)

    preds, raw = [], []
    for i, (images, _) in enumerate(loader):
        if images.shape[0] != batch:  # CLEAN: host shape check, ragged last batch goes eager
            preds.append(model(images.cuda()).argmax(-1))
            continue
        if i == 0:
            static_in = images.cuda(non_blocking=True)  # HAZARD: static-address
        else:
            static_in.copy_(images, non_blocking=True)  # CLEAN: copy into the captured input buffer
        g.replay()
        raw.append(static_logits)  # HAZARD: static-address
        preds.append(static_logits.argmax(-1))  # CLEAN: argmax allocates a new tensor outside the graph
    return torch.cat(preds), raw
