"""ControlNet (canny edges) + SD UNet, both compiled with mode="reduce-overhead".

The control branch produces down/mid residuals that are added inside the UNet.
Edge maps are computed with OpenCV on the host and uploaded once per request.
"""
import cv2
import numpy as np
import torch
import torch.nn as nn


class ControlNetWrapper(nn.Module):
    def __init__(self, controlnet, config):
        super().__init__()
        self.controlnet, self.config = controlnet, config
        self.conditioning_scale = config.default_conditioning_scale

    def _check_inputs(self, cond):
        if cond.shape[-1] % 8:
            print("control image width is not a multiple of 8:", cond.shape)  # HAZARD: host-code
        if torch.isnan(cond).any():  # HAZARD: dynamic-control-flow
            raise ValueError("NaN in control image")

    def forward(self, sample, t, text_emb, cond):
        self._check_inputs(cond)
        down, mid = self.controlnet(sample, t, encoder_hidden_states=text_emb, controlnet_cond=cond,
                                    return_dict=False)
        scale = self.conditioning_scale  # HAZARD: python-scalar
        return [d * scale for d in down], mid * scale


class ControlNetPipeline:
    def __init__(self, unet, controlnet, vae, text_encoder, tokenizer, scheduler, config, device="cuda"):
        self.device, self.scheduler, self.tokenizer = device, scheduler, tokenizer
        self.control = ControlNetWrapper(controlnet, config).to(device).eval()
        self.control_fn = torch.compile(self.control, mode="reduce-overhead")
        self.unet_fn = torch.compile(unet, mode="reduce-overhead")
        self.text_encoder, self.vae = text_encoder, vae
        self.debug_maps = []

    def prepare_control_image(self, image, low=100, high=200):
        edges = cv2.Canny(np.asarray(image), low, high)[:, :, None].repeat(3, axis=2)
        cond = torch.from_numpy(edges).permute(2, 0, 1).float().div(255.0)[None]
        return cond.to(self.device)  # CLEAN: eager upload before the compiled calls

    @torch.inference_mode()
    def __call__(self, prompt, image, steps=20, guidance_scale=7.5, conditioning_scale=1.0,
                 control_guidance_end=1.0, debug=False, generator=None):
        self.control.conditioning_scale = conditioning_scale
        cond = self.prepare_control_image(image)
        cond = torch.cat([cond, cond])
        ids = self.tokenizer(["", prompt], padding="max_length", max_length=77, return_tensors="pt").input_ids
        text_emb = self.text_encoder(ids.to(self.device))[0]
        self.scheduler.set_timesteps(steps, device=self.device)
        latents = torch.randn((1, 4, 64, 64), generator=generator, device=self.device) * self.scheduler.init_noise_sigma
        for i, t in enumerate(self.scheduler.timesteps):
            x = self.scheduler.scale_model_input(torch.cat([latents, latents]), t)
            if i / len(self.scheduler.timesteps) <= control_guidance_end:  # CLEAN: host-side schedule between compiled calls
                down, mid = self.control_fn(x, t, text_emb, cond)
                down, mid = [d.clone() for d in down], mid.clone()  # CLEAN: cloned before the UNet's compiled call
            else:
                down, mid = None, None
            noise = self.unet_fn(x, t, encoder_hidden_states=text_emb, down_block_additional_residuals=down,
                                 mid_block_additional_residual=mid).sample
            if debug and mid is not None:
                self.debug_maps.append(mid.abs().mean(1).cpu())  # CLEAN: mid was cloned, so it is not graph-owned
            u, c = noise.chunk(2)
            latents = self.scheduler.step(u + guidance_scale * (c - u), t, latents).prev_sample  # CLEAN: guidance applied eagerly
        image = self.vae.decode(latents / 0.18215).sample
        return (image / 2 + 0.5).clamp(0, 1)

    @torch.inference_mode()
    def control_strength_report(self, image, prompt_emb, t):
        cond = self.prepare_control_image(image)
        x = torch.zeros((2, 4, 64, 64), device=self.device)
        down, mid = self.control_fn(x, t, prompt_emb, torch.cat([cond, cond]))
        self.unet_fn(x, t, encoder_hidden_states=prompt_emb, down_block_additional_residuals=[d.clone() for d in down],
                     mid_block_additional_residual=mid.clone())
        return [float(d.abs().mean()) for d in down]  # HAZARD: static-address
