"""Stable-Diffusion-1.5-style text-to-image pipeline with a compiled denoising step.

`denoise_step` (UNet on the CFG batch + guidance + Euler update) is compiled with
mode="max-autotune"; the CLIP text encoder and the VAE decoder run under default
torch.compile. Sigmas follow the k-diffusion convention and live on the host.
"""
import math

import torch


class EulerDiscreteScheduler:
    def __init__(self, num_train_timesteps=1000, beta_start=0.00085, beta_end=0.012):
        betas = torch.linspace(beta_start ** 0.5, beta_end ** 0.5, num_train_timesteps) ** 2
        self.alphas_cumprod = torch.cumprod(1.0 - betas, dim=0)
        self.num_train_timesteps = num_train_timesteps
        self.step_index = 0

    def set_timesteps(self, num_inference_steps, device):
        ts = torch.linspace(self.num_train_timesteps - 1, 0, num_inference_steps).round().long()
        ac = self.alphas_cumprod[ts]
        self.sigmas = (((1 - ac) / ac) ** 0.5).tolist() + [0.0]
        self.timesteps = ts.to(device)
        self.init_noise_sigma = math.sqrt(self.sigmas[0] ** 2 + 1)
        self.step_index = 0

    def step(self, model_output, sample):
        sigma = self.sigmas[self.step_index]  # HAZARD: python-scalar
        sigma_next = self.sigmas[self.step_index + 1]
        self.step_index += 1
        return sample + model_output * (sigma_next - sigma)


class StableDiffusionPipeline:
    def __init__(self, unet, vae, text_encoder, tokenizer, device="cuda"):
        self.unet, self.vae, self.text_encoder, self.tokenizer = unet, vae, text_encoder, tokenizer
        self.scheduler, self.device = EulerDiscreteScheduler(), device
        self.encode_prompt = torch.compile(text_encoder)
        self.decode_latents = torch.compile(vae.decode)
        self.denoise = torch.compile(self.denoise_step, mode="max-autotune")
        self.intermediates = []

    def denoise_step(self, latents, t, text_emb, guidance_scale, c_in):
        latent_in = torch.cat([latents, latents]) * c_in
        noise_uncond, noise_text = self.unet(latent_in, t, encoder_hidden_states=text_emb).sample.chunk(2)
        noise = noise_uncond + guidance_scale * (noise_text - noise_uncond)  # HAZARD: python-scalar
        return self.scheduler.step(noise, latents)

    @torch.inference_mode()
    def __call__(self, prompt, negative_prompt="", height=512, width=512, num_inference_steps=30,
                 guidance_scale=7.5, generator=None, keep_intermediates=False):
        ids = self.tokenizer([negative_prompt, prompt], padding="max_length", max_length=77,
                             truncation=True, return_tensors="pt").input_ids.to(self.device)
        text_emb = self.encode_prompt(ids)[0]  # CLEAN: default torch.compile, no CUDA graphs
        self.scheduler.set_timesteps(num_inference_steps, self.device)
        shape = (1, 4, height // 8, width // 8)
        latents = torch.randn(shape, generator=generator, device=self.device)  # CLEAN: private generator used eagerly, outside the compiled step
        latents = latents * self.scheduler.init_noise_sigma
        for i, t in enumerate(self.scheduler.timesteps):
            c_in = torch.full((), 1.0 / math.sqrt(self.scheduler.sigmas[i] ** 2 + 1), device=self.device)  # CLEAN: per-step scale passed as a device tensor
            out = self.denoise(latents, t, text_emb, guidance_scale, c_in)  # HAZARD: dynamic-shape
            if keep_intermediates:
                self.intermediates.append(out)  # HAZARD: static-address
            latents = out.clone()  # CLEAN: cloned before being fed back into the compiled step
        image = self.decode_latents(latents / 0.18215).sample
        image = (image / 2 + 0.5).clamp(0, 1)
        return image.permute(0, 2, 3, 1).float().cpu().numpy()  # CLEAN: eager host copy after the loop

    def preview_frames(self):
        frames = [self.decode_latents(z / 0.18215).sample for z in self.intermediates]
        self.intermediates.clear()
        return frames
