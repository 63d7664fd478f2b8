import functools

import torch
import torch.nn as nn
import torch.nn.functional as F

IMAGENET_MEAN = [0.485, 0.456, 0.406]
IMAGENET_STD = [0.229, 0.224, 0.225]


def cuda_graphed(warmup: int = 3, pool=None):
    """Capture the wrapped function on its first call, replay it afterwards.

    The wrapped function must always be called with the same (static) tensors.
    """
    def deco(fn):
        state = {}

        @functools.wraps(fn)
        def wrapper(*static_args):
            if "graph" not in state:  # CLEAN: string key lookup in a Python dict (lazy one-time capture)
                side = torch.cuda.Stream()
                side.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(side):
                    for _ in range(warmup):
                        fn(*static_args)
                torch.cuda.current_stream().wait_stream(side)
                g = torch.cuda.CUDAGraph()
                with torch.cuda.graph(g, pool=pool):
                    state["out"] = fn(*static_args)
                state["graph"] = g
            state["graph"].replay()
            return state["out"]
        return wrapper
    return deco


model = nn.Sequential(nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 10)).cuda()
opt = torch.optim.RMSprop(model.parameters(), lr=1e-3)
raw = torch.zeros(64, 3, 224, 224, device="cuda", dtype=torch.uint8)
static_x = torch.zeros(64, 3, 224, 224, device="cuda")
static_y = torch.zeros(64, dtype=torch.long, device="cuda")


@cuda_graphed(warmup=2)
def preprocess(img_u8):
    mean = torch.tensor(IMAGENET_MEAN, device="cuda").view(1, 3, 1, 1)  # HAZARD: pinned-memory
    std = torch.tensor(IMAGENET_STD, device=img_u8.device).view(1, 3, 1, 1)  # HAZARD: pinned-memory
    return (img_u8.float() / 255.0 - mean) / std


@cuda_graphed(warmup=3)
def train_step(x, y):
    torch.manual_seed(0)  # HAZARD: rng
    out = model(x)
    loss = F.cross_entropy(out, y)
    loss.backward()
    opt.step()  # HAZARD: optimizer
    opt.zero_grad(set_to_none=False)
    return loss.detach()


if __name__ == "__main__":
    losses = []
    for step in range(1000):
        raw.copy_(torch.randint(0, 256, raw.shape, dtype=torch.uint8), non_blocking=True)
        static_x.copy_(preprocess(raw).clone())  # CLEAN: graph output cloned before use
        static_y.copy_(torch.randint(0, 10, (64,)))
        with torch.autocast("cuda", dtype=torch.bfloat16):  # HAZARD: autocast-cache
            loss = train_step(static_x, static_y)
        losses.append(loss)  # HAZARD: static-address
    print(torch.stack(losses).mean().item())
