"""Quick, Draw! Doodle Recognition -- latency benchmark for the inference kernel.

Strokes (padded to 256 points) are rasterised on the GPU and classified by a ResNet-18 at
64 px.  Each case is a functools.partial handed to `bench`, which warms up, captures a CUDA
graph and times replays.  Kaggle notebook cells dumped into one file, lightly cleaned.
"""
import functools
import json

import numpy as np
import torch
import torch.nn as nn
import torchvision

IMG, PTS, N_CLASSES = 64, 256, 340
CFG = {"line_width": 2.0, "country": "US", "batch": 128}
COUNTRY_PRIOR = {c: np.random.dirichlet(np.ones(N_CLASSES)).astype(np.float32) for c in ("US", "DE", "BR", "JP")}
PRIOR_PINNED = torch.from_numpy(COUNTRY_PRIOR["US"]).pin_memory()
WORDS = json.load(open("categories.json"))
ANIMALS = [i for i, w in enumerate(WORDS) if w in set(json.load(open("animals.json")))]

def bench(fn, *args, warmup=3, iters=100):
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.autocast("cuda", dtype=torch.float16):  # HAZARD: autocast-cache
        with torch.cuda.stream(s):
            for _ in range(warmup):
                fn(*args)
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            out = fn(*args)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        g.replay()
    end.record()
    torch.cuda.synchronize()  # CLEAN: synchronize after the timed replays, outside the capture
    return start.elapsed_time(end) / iters, g, out

def first_look(fn, *args):
    """One capture + replay, to eyeball the output of a new case quickly."""
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):  # HAZARD: api-misuse
        out = fn(*args)
    g.replay()
    return out

def rasterize(strokes, width):
    """strokes: B x PTS x 3 (x, y in [0, 1], pen-down flag) -> B x 1 x IMG x IMG soft raster."""
    grid = torch.linspace(0, 1, IMG, device=strokes.device)
    gy, gx = torch.meshgrid(grid, grid, indexing="ij")
    p = strokes[..., :2]
    d2 = (gx.reshape(1, 1, -1) - p[..., :1]) ** 2 + (gy.reshape(1, 1, -1) - p[..., 1:2]) ** 2
    ink = torch.exp(-d2 * (IMG / width) ** 2) * strokes[..., 2:3]
    return ink.amax(1).view(-1, 1, IMG, IMG)

def case_raster_classify(model, strokes):
    width = CFG["line_width"]  # HAZARD: python-scalar
    return model(rasterize(strokes, width))

def case_country_prior(model, strokes):
    logits = model(rasterize(strokes, 2.0))
    prior = torch.from_numpy(COUNTRY_PRIOR[CFG["country"]]).cuda()  # HAZARD: pinned-memory
    return logits.log_softmax(-1) + prior.log()

def case_country_prior_pinned(model, strokes):
    logits = model(rasterize(strokes, 2.0))
    prior = PRIOR_PINNED.to("cuda", non_blocking=True)  # CLEAN: copy from pinned host memory is recorded in the graph
    return logits.log_softmax(-1) + prior.log()

def case_animals_only(model, strokes):
    logits = model(rasterize(strokes, 2.0))
    return logits[:, ANIMALS].topk(3, dim=-1).indices  # HAZARD: host-sync

def case_top3(model, strokes):
    return model(rasterize(strokes, 2.0)).topk(3, dim=-1).indices  # CLEAN: fixed-k topk, no host round trip

if __name__ == "__main__":
    model = torchvision.models.resnet18(num_classes=N_CLASSES)
    model.conv1 = nn.Conv2d(1, 64, 3, 1, 1, bias=False)
    model.load_state_dict(torch.load("doodle_r18_64px.pt", map_location="cpu"))
    model = model.cuda().eval()
    B = CFG["batch"]
    strokes = torch.cat([torch.rand(B, PTS, 2), (torch.rand(B, PTS, 1) > 0.1).float()], -1).cuda()
    cases = {
        "raster+classify": functools.partial(case_raster_classify, model, strokes),
        "country prior": functools.partial(case_country_prior, model, strokes),
        "country prior (pinned)": functools.partial(case_country_prior_pinned, model, strokes),
        "animals only": functools.partial(case_animals_only, model, strokes),
        "top3": functools.partial(case_top3, model, strokes),
    }
    with torch.no_grad():
        for name, fn in cases.items():
            ms, g, out = bench(fn)
            print(f"{name:24s} {ms:7.3f} ms/batch")
            if name == "raster+classify":
                for w in (1.0, 3.0, 4.0):                 # stroke-width sweep on the same graph
                    CFG["line_width"] = w
                    g.replay()
                    print(f"   width {w}: top1 {out.argmax(-1)[:8].tolist()}")  # CLEAN: host read after the replay
        preview = first_look(functools.partial(case_top3, model, strokes[:16]))
        print("preview:", [[WORDS[i] for i in row] for row in preview.tolist()])
