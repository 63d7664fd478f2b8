"""sd-webui extension: "VAE Turbo Decode".

Replaces the VAE decode used by hires-fix previews with a max-autotune compiled decoder.
Reads the user's settings from shared.opts (changed from the Settings tab at any time).
"""
import logging

import torch
import torch.nn as nn
import torch.nn.functional as F

log = logging.getLogger("vae_turbo")


class _Opts:  # stand-in for modules.shared.opts when testing outside the webui
    vae_turbo_contrast = 1.0
    vae_turbo_nan_check = True


try:
    from modules import shared
    opts = shared.opts
except ImportError:
    opts = _Opts()


class TinyDecoder(nn.Module):
    def __init__(self, ch=64):
        super().__init__()
        self.conv_in = nn.Conv2d(4, ch, 3, padding=1)
        self.ups = nn.ModuleList([nn.Conv2d(ch, ch, 3, padding=1) for _ in range(3)])
        self.conv_out = nn.Conv2d(ch, 3, 3, padding=1)
        self.register_buffer("scale", torch.tensor(1 / 0.18215))

    def forward(self, z):
        h = self.conv_in(z * self.scale)  # CLEAN: registered buffer, fixed
        for up in self.ups:
            h = F.silu(up(F.interpolate(h, scale_factor=2.0, mode="nearest")))
        img = torch.tanh(self.conv_out(h))
        contrast = opts.vae_turbo_contrast  # HAZARD: python-scalar
        img = (img * contrast).clamp(-1, 1)
        if opts.vae_turbo_nan_check and torch.isnan(img).any():  # HAZARD: dynamic-control-flow
            log.warning("VAE produced NaNs, retry in fp32")
            img = torch.nan_to_num(img)
        log.debug("decoded %s", tuple(img.shape))  # HAZARD: host-code
        return (img + 1) / 2


_decoder = TinyDecoder().cuda().eval()
decode_fast = torch.compile(_decoder, mode="max-autotune")
decode_safe = torch.compile(_decoder, mode="max-autotune-no-cudagraphs")
_preview_history = []


@torch.no_grad()
def hires_preview(latents_per_step):
    """Called by the sampler callback with the current latent at each step."""
    z = latents_per_step.to(torch.float32)
    img = decode_fast(z)
    _preview_history.append(img)  # HAZARD: static-address
    return img.clone()  # CLEAN: clone handed to the UI


@torch.no_grad()
def final_decode(latents):
    img = decode_safe(latents)  # CLEAN: no-cudagraphs build
    _preview_history.clear()
    return img


@torch.no_grad()
def export_gif(latents_list):
    frames = []
    for z in latents_list:
        frames.append(decode_fast(z).clone())  # CLEAN: cloned before keeping
    grid = torch.stack(frames)
    if torch.isnan(grid).any():  # CLEAN: eager check outside the compiled decoder
        log.warning("gif has NaNs")
    return (grid * 255).byte().cpu()


def on_ui_settings():
    try:
        from modules import script_callbacks  # noqa: F401
    except ImportError:
        return
    shared.opts.add_option("vae_turbo_contrast", shared.OptionInfo(1.0, "VAE Turbo contrast"))
    shared.opts.add_option("vae_turbo_nan_check", shared.OptionInfo(True, "VAE Turbo NaN check"))
