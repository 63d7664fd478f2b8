"""SDXL base + refiner "ensemble of experts" with compiled denoiser calls.

The base model denoises the first `denoising_end` fraction of the schedule and
hands its latents to the refiner. Each expert's CFG noise prediction is compiled
with mode="reduce-overhead"; the scheduler runs eagerly between calls.
Micro-conditioning time ids carry sizes, crops and, for the refiner, the
aesthetic score.
"""
import torch


class SDXLEnsemble:
    def __init__(self, base_unet, refiner_unet, scheduler, text_encoders, vae, device="cuda"):
        self.base_unet, self.refiner_unet, self.scheduler = base_unet, refiner_unet, scheduler
        self.text_encoders, self.vae, self.device = text_encoders, vae, device
        self.aesthetic_score = 6.0
        self.base_eps = torch.compile(self._base_eps, mode="reduce-overhead")
        self.refiner_eps = torch.compile(self._refiner_eps, mode="reduce-overhead")

    def _cfg(self, noise, guidance):
        u, c = noise.chunk(2)
        return u + guidance * (c - u)

    def _base_eps(self, x, t, prompt_embeds, pooled, time_ids, guidance):
        cond = {"text_embeds": pooled, "time_ids": time_ids}
        noise = self.base_unet(x, t, encoder_hidden_states=prompt_embeds, added_cond_kwargs=cond).sample
        if torch.isnan(noise).any().item():  # HAZARD: host-sync
            noise = torch.nan_to_num(noise)
        return self._cfg(noise, guidance)

    def _refiner_eps(self, x, t, prompt_embeds, pooled, orig_size, guidance):
        ids = list(orig_size) + [0, 0] + [self.aesthetic_score]  # HAZARD: python-scalar
        time_ids = torch.tensor([ids, ids], dtype=prompt_embeds.dtype, device=x.device)
        cond = {"text_embeds": pooled, "time_ids": time_ids}
        noise = self.refiner_unet(x, t, encoder_hidden_states=prompt_embeds, added_cond_kwargs=cond).sample
        return self._cfg(noise, guidance)

    def encode(self, prompt, negative=""):
        embeds, pooled = [], None
        for tok, enc in self.text_encoders:
            ids = tok([negative, prompt], padding="max_length", max_length=77, return_tensors="pt").input_ids
            out = enc(ids.to(self.device), output_hidden_states=True)
            embeds.append(out.hidden_states[-2])
            pooled = out[0]
        return torch.cat(embeds, dim=-1), pooled

    @torch.inference_mode()
    def __call__(self, prompt, height=1024, width=1024, steps=40, denoising_end=0.8, guidance_scale=5.0,
                 aesthetic_score=6.0, generator=None, callback=None):
        self.aesthetic_score = aesthetic_score
        prompt_embeds, pooled = self.encode(prompt)
        time_ids = torch.tensor([[height, width, 0, 0, height, width]] * 2, device=self.device, dtype=prompt_embeds.dtype)  # CLEAN: built eagerly, outside the compiled calls
        guidance = torch.tensor(guidance_scale, device=self.device)  # CLEAN: guidance passed as a device tensor
        self.scheduler.set_timesteps(steps, device=self.device)
        latents = torch.randn((1, 4, height // 8, width // 8), generator=generator, device=self.device)
        latents = latents * self.scheduler.init_noise_sigma
        n_base = int(round(denoising_end * steps))
        for i, t in enumerate(self.scheduler.timesteps[:n_base]):
            x = self.scheduler.scale_model_input(torch.cat([latents] * 2), t)
            eps = self.base_eps(x, t, prompt_embeds, pooled, time_ids, guidance)  # HAZARD: dynamic-shape
            latents = self.scheduler.step(eps, t, latents).prev_sample  # CLEAN: eager scheduler step consumes eps at once
            if callback is not None:
                callback(i, t, latents.float().cpu())  # CLEAN: eager host copy between compiled calls
        ref_embeds, ref_pooled = self.encode(prompt)
        ref_embeds = ref_embeds[..., 768:]
        for t in self.scheduler.timesteps[n_base:]:
            x = self.scheduler.scale_model_input(torch.cat([latents] * 2), t)
            eps = self.refiner_eps(x, t, ref_embeds, ref_pooled, (height, width), guidance)
            latents = self.scheduler.step(eps, t, latents).prev_sample
        image = self.vae.decode(latents.float() / self.vae.config.scaling_factor).sample
        return (image / 2 + 0.5).clamp(0, 1)

    @torch.inference_mode()
    def compare_experts(self, latents, t, prompt):
        emb, pooled = self.encode(prompt)
        guidance = torch.tensor(5.0, device=self.device)
        h, w = latents.shape[-2] * 8, latents.shape[-1] * 8
        tid = torch.tensor([[h, w, 0, 0, h, w]] * 2, device=self.device, dtype=emb.dtype)
        x = torch.cat([latents] * 2)
        a = self.base_eps(x, t, emb, pooled, tid, guidance)
        b = self.refiner_eps(x, t, emb[..., 768:], pooled, (h, w), guidance)
        return (a - b).abs().mean()  # HAZARD: static-address
