"""What Transformer Engine's graphed callables require with weight caching, measured on a GPU.

CG512 reports calls, without `is_first_microbatch=`, of what `te.make_graphed_callables(...,
cache_quantized_params=True)` returns (its source raises ValueError then). The labelled sets disagree on
whether a plain torch module graphed in the same call (a head next to TE layers) needs the keyword too.
This probe graphs a `te.Linear` and an `nn.Linear` head together and calls each graphed callable in turn:
without the keyword, with it, after `.eval()` on the module, and with weight caching off. Each case
prints one JSON line (`ok` with the error's type and first line when it raised).

Run: PYTHONPATH=/tmp/site:$PYTHONPATH python benchmarks/te_weight_caching.py  (a CUDA GPU and
Transformer Engine, scripts/device_te_setup.sh)
"""

from __future__ import annotations

import json


def graph(cache: bool, fp8: bool):
    import torch
    import transformer_engine.pytorch as te
    from transformer_engine.common.recipe import DelayedScaling

    layer = te.Linear(64, 64, params_dtype=torch.bfloat16).cuda()
    head = torch.nn.Linear(64, 16, dtype=torch.bfloat16).cuda()
    x = torch.randn(32, 64, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    h = torch.randn(32, 64, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    graphed = te.make_graphed_callables((layer, head), ((x,), (h,)), enabled=fp8,
                                        recipe=DelayedScaling() if fp8 else None, cache_quantized_params=cache)
    return layer, head, graphed, x, h


def attempt(name: str, fn) -> dict:
    try:
        fn()
        return {"case": name, "ok": True}
    except Exception as exc:  # noqa: BLE001 - the probe records whatever the call raises
        return {"case": name, "ok": False, "error": type(exc).__name__, "message": str(exc).splitlines()[0][:200]}


def probe(fp8: bool) -> None:
    """The cases for one precision: bf16 (quantization off) or FP8 (delayed scaling)."""
    import torch
    import transformer_engine.pytorch as te
    from transformer_engine.common.recipe import DelayedScaling

    tag = "fp8" if fp8 else "bf16"

    def under_autocast(fn):
        with te.autocast(enabled=fp8, recipe=DelayedScaling() if fp8 else None):
            return fn()

    layer, head, (g_layer, g_head), x, h = graph(cache=True, fp8=fp8)
    cases = [
        ("cached: te layer without is_first_microbatch", lambda: g_layer(x)),
        ("cached: torch head without is_first_microbatch", lambda: g_head(h)),
        ("cached: te layer with is_first_microbatch", lambda: g_layer(x, is_first_microbatch=True)),
        ("cached: torch head with is_first_microbatch", lambda: g_head(h, is_first_microbatch=False)),
        ("cached: the graphed module itself, training mode", lambda: layer(x)),
    ]
    for name, fn in cases:
        print(json.dumps(attempt(f"{tag} {name}", lambda fn=fn: under_autocast(fn))))
    layer.eval()
    print(json.dumps(attempt(f"{tag} cached: the graphed module after eval()", lambda: under_autocast(lambda: layer(x)))))
    _layer, _head, (plain_layer, _plain_head), x2, _h2 = graph(cache=False, fp8=fp8)
    print(json.dumps(attempt(f"{tag} not cached: te layer without is_first_microbatch",
                             lambda: under_autocast(lambda: plain_layer(x2)))))
    torch.cuda.synchronize()


def main() -> None:
    import torch
    import transformer_engine

    print(json.dumps({"torch": torch.__version__, "transformer_engine": transformer_engine.__version__,
                      "device": torch.cuda.get_device_name()}))
    for fp8 in (False, True):
        probe(fp8)


if __name__ == "__main__":
    main()
