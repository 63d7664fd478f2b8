"""ComfyUI custom node "TurboCFG": patches the model function used by KSampler with a
reduce-overhead compiled CFG combine + model call.

Usage: MODEL -> TurboCFG -> KSampler. The patch is installed with set_model_unet_function_wrapper.
"""
import logging
import time

import torch

log = logging.getLogger("turbocfg")

_COMPILED = {}
STATE = {"rescale": 0.7, "last_step_ms": 0.0}


def _cfg_combine(cond, uncond, cfg_scale):
    guided = uncond + cfg_scale * (cond - uncond)  # HAZARD: python-scalar
    std_c = cond.std(dim=(1, 2, 3), keepdim=True)
    std_g = guided.std(dim=(1, 2, 3), keepdim=True)
    rescaled = guided * (std_c / std_g)
    phi = STATE["rescale"]  # HAZARD: python-scalar
    print("cfg combine", guided.shape)  # HAZARD: host-code
    return phi * rescaled + (1 - phi) * guided


def _cfg_combine_plain(cond, uncond, cfg_scale):
    return uncond + cfg_scale * (cond - uncond)


def _get_compiled(apply_model):
    key = id(apply_model)
    if key not in _COMPILED:
        _COMPILED[key] = (
            torch.compile(apply_model, mode="reduce-overhead"),
            torch.compile(_cfg_combine, mode="reduce-overhead"),
            torch.compile(_cfg_combine_plain),  # default compile, no CUDA graphs
        )
    return _COMPILED[key]


class TurboCFG:
    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"model": ("MODEL",),
                             "rescale": ("FLOAT", {"default": 0.7, "min": 0.0, "max": 1.0}),
                             "use_rescale": ("BOOLEAN", {"default": True})}}

    RETURN_TYPES = ("MODEL",)
    FUNCTION = "patch"
    CATEGORY = "sampling/custom"

    def patch(self, model, rescale, use_rescale):
        STATE["rescale"] = rescale
        m = model.clone()

        def wrapper(apply_model, args):
            unet, combine, combine_plain = _get_compiled(apply_model)
            x, t, c = args["input"], args["timestep"], args["c"]
            cond_scale = args.get("cond_scale", 7.0)
            t0 = time.perf_counter()
            both = unet(torch.cat([x, x]), torch.cat([t, t]), **c)  # HAZARD: dynamic-shape
            cond, uncond = both.clone().chunk(2)  # CLEAN: cloned before handing to the next compiled call
            if use_rescale:
                out = combine(cond, uncond, cond_scale)
            else:
                out = combine_plain(cond, uncond, cond_scale)  # CLEAN: default torch.compile, no CUDA graphs
            sigma = float(t[0])  # CLEAN: eager host read of the timestep in the wrapper
            STATE["last_step_ms"] = 1e3 * (time.perf_counter() - t0)
            if sigma < 0.05:
                log.info("TurboCFG final step %.1f ms", STATE["last_step_ms"])  # CLEAN: eager logging
            return out.clone()  # CLEAN: clone before KSampler keeps it across steps

        m.set_model_unet_function_wrapper(wrapper)
        return (m,)


class TurboCFGStats:
    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"latent": ("LATENT",)}}

    RETURN_TYPES = ("STRING",)
    FUNCTION = "stats"
    CATEGORY = "sampling/custom"

    def stats(self, latent):
        s = latent["samples"]
        return (f"mean={s.mean().item():.3f} last_step={STATE['last_step_ms']:.1f}ms",)


NODE_CLASS_MAPPINGS = {"TurboCFG": TurboCFG, "TurboCFGStats": TurboCFGStats}
