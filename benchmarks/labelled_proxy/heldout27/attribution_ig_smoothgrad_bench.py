"""Integrated Gradients (Sundararajan et al., ICML 2017) and SmoothGrad (Smilkov
et al. 2017) attribution kernels for an ImageNet ResNet-50, timed as CUDA-graph
replays through a small capture/replay benchmark helper."""
import argparse
import functools
import numpy as np
import torch
import torchvision

parser = argparse.ArgumentParser()
parser.add_argument("--steps_sweep", type=str, default="16,32,64")
parser.add_argument("--sg_samples", type=int, default=25)
parser.add_argument("--sg_sigma", type=float, default=0.15)
parser.add_argument("--iters", type=int, default=20)
parser.add_argument("--check_completeness", type=bool, default=True)
parser.add_argument("--tol", type=float, default=1e-2)
parser.add_argument("--baseline", type=str, default="blurred_baseline.npy")
args = parser.parse_args()

def capture(case, warmup=3, generators=()):
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(warmup):
            case()
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    for gen in generators:
        g.register_generator_state(gen)  # CLEAN: private generators registered before capture
    with torch.cuda.graph(g):
        out = case()
    return g, out

def time_replays(g, iters):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        g.replay()
    end.record()
    torch.cuda.synchronize()  # CLEAN: synchronize after the replays, outside capture
    return start.elapsed_time(end) / iters

class IntegratedGradients:
    def __init__(self, model, x, target, steps, baseline_np):
        self.model, self.x, self.target, self.steps, self.baseline_np = model, x, target, steps, baseline_np

    def __call__(self):
        steps = self.steps  # HAZARD: python-scalar
        alphas = torch.linspace(0, 1, steps, device=self.x.device).view(-1, 1, 1, 1)
        baseline = torch.from_numpy(self.baseline_np).cuda()  # HAZARD: pinned-memory
        path = (baseline + alphas * (self.x - baseline)).requires_grad_(True)
        out = self.model(path).gather(1, self.target.expand(steps, 1)).squeeze(1)  # CLEAN: target gathered with a device index
        grads, = torch.autograd.grad(out.sum(), path)
        attr = (self.x - baseline) * grads.mean(0, keepdim=True)
        if args.check_completeness:
            assert torch.allclose(attr.sum(), out[-1] - out[0], atol=args.tol), "IG completeness violated"  # HAZARD: host-sync
        return attr

class SmoothGrad:
    def __init__(self, model, x, target):
        self.model, self.x, self.target = model, x, target
        self.gen = torch.Generator(device="cuda")
        self.gen.manual_seed(1234)

    def __call__(self):
        noise = torch.randn((args.sg_samples,) + self.x.shape[1:], device=self.x.device, generator=self.gen) * args.sg_sigma  # HAZARD: rng
        noisy = (self.x + noise).requires_grad_(True)
        out = self.model(noisy).gather(1, self.target.expand(args.sg_samples, 1)).sum()
        grads, = torch.autograd.grad(out, noisy)
        return grads.mean(0, keepdim=True)

def main(x):
    model = torchvision.models.resnet50(weights="IMAGENET1K_V2").cuda().eval()
    for p in model.parameters():
        p.requires_grad_(False)
    with torch.no_grad():
        target = model(x).argmax(1, keepdim=True)  # CLEAN: eager forward before any capture
    baseline_np = np.load(args.baseline).astype(np.float32)
    bench = functools.partial(capture, warmup=3)
    ig = IntegratedGradients(model, x, target, 32, baseline_np)
    g_ig, attr = bench(ig)
    results = {}
    for steps in map(int, args.steps_sweep.split(",")):
        ig.steps = steps
        results[steps] = (time_replays(g_ig, args.iters), attr.clone())
    g_sg, sg_attr = bench(SmoothGrad(model, x, target))
    results["smoothgrad"] = (time_replays(g_sg, args.iters), sg_attr.clone())
    return results
