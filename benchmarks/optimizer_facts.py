"""Facts the references state about optimizers and schedules in a captured training step, measured.

One JSON line per fact (run on a GPU; `python benchmarks/optimizer_facts.py`):
- scheduler_in_place: an LRScheduler writes a tensor learning rate in place (the same tensor, a new
  value), so a captured step that reads the tensor follows the schedule;
- capturable_rounding: AdamW with capturable=True (and fused=True) against the default AdamW, the
  same 50 eager steps from the same start: how far the parameters drift apart;
- capturable_eager_warning: does a capturable optimizer stepping eagerly warn (the source has a
  warning), and is its once-flag already set by the constructor;
- batchnorm_in_graph: a captured training step with BatchNorm against the same eager steps: running
  statistics and the step counter after 20 steps.
"""

from __future__ import annotations

import inspect
import json
import sys
import warnings


def _model(torch, seed=0):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.BatchNorm1d(64), torch.nn.ReLU(),
                               torch.nn.Linear(64, 8)).cuda()


def _batches(torch, n=8):
    g = torch.Generator().manual_seed(3)
    return [(torch.randn(32, 64, generator=g).cuda(), torch.randn(32, 8, generator=g).cuda()) for _ in range(n)]


def scheduler_in_place(torch) -> dict:
    model = _model(torch)
    lr = torch.tensor(1e-3, device="cuda")
    opt = torch.optim.AdamW(model.parameters(), lr=lr, capturable=True)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=10)
    before = opt.param_groups[0]["lr"]
    values = []
    for _ in range(5):
        model(torch.randn(32, 64, device="cuda")).sum().backward()
        opt.step()
        sched.step()
        values.append(float(opt.param_groups[0]["lr"]))
    from torch.optim import lr_scheduler

    source = inspect.getsource(lr_scheduler)
    return {"fact": "scheduler_in_place", "same_tensor": opt.param_groups[0]["lr"] is before,
            "values": [round(v, 8) for v in values], "fills_in_place_in_source": ".fill_(" in source}


def capturable_rounding(torch) -> dict:
    data = _batches(torch)
    results = {}
    models = {}
    for name, kwargs in (("default", {}), ("capturable", {"capturable": True}), ("fused", {"fused": True})):
        model = _model(torch)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3, **kwargs)
        for step in range(50):
            x, y = data[step % len(data)]
            opt.zero_grad(set_to_none=True)
            torch.nn.functional.mse_loss(model(x), y).backward()
            opt.step()
        models[name] = torch.cat([p.detach().flatten() for p in model.parameters()])
    for name in ("capturable", "fused"):
        diff = (models[name] - models["default"]).abs()
        results[name] = {"max_abs_diff": float(diff.max()),
                         "max_rel_diff": float((diff / models["default"].abs().clamp_min(1e-6)).max()),
                         "bitwise_equal": bool(torch.equal(models[name], models["default"]))}
    return {"fact": "capturable_rounding", "steps": 50, **results}


def capturable_eager_warning(torch) -> dict:
    model = _model(torch)
    opt = torch.optim.AdamW(model.parameters(), lr=torch.tensor(1e-3, device="cuda"), capturable=True)
    flag = getattr(opt, "_warned_capturable_if_run_uncaptured", None)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            model(torch.randn(32, 64, device="cuda")).sum().backward()
            opt.step()
    seen = [str(w.message)[:120] for w in caught if "capturable" in str(w.message)]
    return {"fact": "capturable_eager_warning", "warnings": len(seen), "first": seen[:1],
            "flag_set_by_constructor": flag}


def batchnorm_in_graph(torch) -> dict:
    data = _batches(torch)

    def train(graphed: bool):
        model = _model(torch)
        opt = torch.optim.SGD(model.parameters(), lr=torch.tensor(0.01, device="cuda"), momentum=0.9, fused=True)
        static_x, static_y = (t.clone() for t in data[0])

        def step():
            torch.nn.functional.mse_loss(model(static_x), static_y).backward()
            opt.step()

        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for i in range(3):  # the first real steps are the warm-up
                static_x.copy_(data[i][0])
                static_y.copy_(data[i][1])
                opt.zero_grad(set_to_none=True)
                step()
        torch.cuda.current_stream().wait_stream(side)
        graph = None
        for i in range(3, 20):
            static_x.copy_(data[i % len(data)][0])
            static_y.copy_(data[i % len(data)][1])
            if not graphed:
                opt.zero_grad(set_to_none=True)
                step()
                continue
            if graph is None:
                opt.zero_grad(set_to_none=True)
                graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(graph):
                    step()
            graph.replay()
        torch.cuda.synchronize()
        bn = model[1]
        return bn.running_mean.clone(), bn.running_var.clone(), int(bn.num_batches_tracked)

    eager, graphed = train(False), train(True)
    return {"fact": "batchnorm_in_graph", "steps": 20,
            "running_mean_max_diff": float((eager[0] - graphed[0]).abs().max()),
            "running_var_max_diff": float((eager[1] - graphed[1]).abs().max()),
            "num_batches_tracked": {"eager": eager[2], "graphed": graphed[2]}}


def main() -> int:
    import torch

    if not torch.cuda.is_available():
        print("optimizer_facts.py needs a CUDA device", file=sys.stderr)
        return 2
    for fact in (scheduler_in_place, capturable_rounding, capturable_eager_warning, batchnorm_in_graph):
        print(json.dumps({"torch": torch.__version__, **fact(torch)}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
