# MobileNetV2 ImageNet training adapted from apex/examples/imagenet/main_amp.py (2019): data_prefetcher,
# to_python_float, per-iteration LR warm-up. apex.amp was replaced by torch.autocast, and the train step is
# compiled with mode="reduce-overhead". A --graph-bench path captures the compiled model for a throughput test.
import argparse
import torch
import torch.nn as nn
import torch.nn.functional as F
import torchvision

parser = argparse.ArgumentParser()
parser.add_argument("--batch-size", type=int, default=256)
parser.add_argument("--graph-bench", action="store_true")
args = parser.parse_args([])


def to_python_float(t):
    return t.item() if hasattr(t, "item") else t[0]


class data_prefetcher:
    def __init__(self, loader):
        self.loader = iter(loader)
        self.stream = torch.cuda.Stream()
        self.mean = torch.tensor([0.485 * 255, 0.456 * 255, 0.406 * 255], device="cuda").view(1, 3, 1, 1)
        self.std = torch.tensor([0.229 * 255, 0.224 * 255, 0.225 * 255], device="cuda").view(1, 3, 1, 1)
        self.preload()

    def preload(self):
        try:
            self.next_input, self.next_target = next(self.loader)
        except StopIteration:
            self.next_input = None
            return
        with torch.cuda.stream(self.stream):  # CLEAN: eager prefetch stream, no capture involved
            self.next_input = self.next_input.cuda(non_blocking=True).float()  # CLEAN: pinned loader memory, eager copy
            self.next_target = self.next_target.cuda(non_blocking=True)
            self.next_input = self.next_input.sub_(self.mean).div_(self.std)  # CLEAN: eager in-place normalisation, not a compiled input

    def next(self):
        torch.cuda.current_stream().wait_stream(self.stream)
        inp, target = self.next_input, self.next_target
        if inp is not None:
            inp.record_stream(torch.cuda.current_stream())
            target.record_stream(torch.cuda.current_stream())
        self.preload()
        return inp, target


model = torchvision.models.mobilenet_v2().cuda().to(memory_format=torch.channels_last)
cmodel = torch.compile(model, mode="reduce-overhead")
criterion = nn.CrossEntropyLoss(label_smoothing=0.1).cuda()


@torch.compile(mode="reduce-overhead")
def loss_and_top1(output, target):
    target.clamp_(0, 999)  # HAZARD: static-address
    loss = criterion(output, target)
    prec1 = (output.argmax(1) == target).float().mean() * 100
    return loss, to_python_float(prec1)  # HAZARD: host-sync


def train(train_loader, optimizer, epoch, len_epoch):
    model.train()
    prefetcher = data_prefetcher(train_loader)
    inp, target = prefetcher.next()
    i = 0
    while inp is not None:
        with torch.autocast("cuda", dtype=torch.float16):  # the old loader keeps drop_last=False
            output = cmodel(inp)  # HAZARD: dynamic-shape
            loss, prec1 = loss_and_top1(output, target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if i % 100 == 0:
            print("Epoch %d [%d/%d] loss %.4f prec@1 %.2f" % (epoch, i, len_epoch, to_python_float(loss), prec1))  # CLEAN: eager read after the backward
        inp, target = prefetcher.next()
        i += 1


def graph_bench(iters=200):
    model.eval()
    static_x = torch.randn(args.batch_size, 3, 224, 224, device="cuda").to(memory_format=torch.channels_last)
    g = torch.cuda.CUDAGraph()
    with torch.no_grad(), torch.autocast("cuda", dtype=torch.float16):  # HAZARD: autocast-cache
        with torch.cuda.graph(g):
            static_y = cmodel(static_x)  # HAZARD: api-misuse
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        g.replay()
    end.record()
    torch.cuda.synchronize()  # CLEAN: after the replays, outside the capture
    print("img/s %.1f" % (iters * args.batch_size / (start.elapsed_time(end) / 1000)), static_y.shape)
