"""DDIM text-to-image pipeline whose whole denoising step is one captured CUDA graph.

UNet on the CFG batch + guidance + DDIM update are captured once (after warm-up on
a side stream) and replayed for every timestep; the timestep and latents live in
static tensors that are refreshed with copy_/fill_.
"""
import torch


class GraphedDDIMStep:
    def __init__(self, unet, scheduler, latent_shape, text_len=77, text_dim=768, eta=0.3, device="cuda"):
        self.unet, self.scheduler, self.device = unet, scheduler, device
        self.num_train_timesteps = scheduler.config.num_train_timesteps
        self.num_inference_steps = 50
        self.static_guidance = torch.full((), 7.5, device=device)
        self.eta = eta
        self.alphas_cumprod = scheduler.alphas_cumprod.to(device)
        self.static_latents = torch.zeros(latent_shape, device=device, dtype=torch.float16)
        self.static_t = torch.zeros((), dtype=torch.long, device=device)
        self.static_text = torch.zeros(2 * latent_shape[0], text_len, text_dim, device=device, dtype=torch.float16)
        self.generator = None
        self.graph = None

    def _step(self):
        x = torch.cat([self.static_latents] * 2)
        eps = self.unet(x, self.static_t, encoder_hidden_states=self.static_text).sample
        u, c = eps.chunk(2)
        eps = u + self.static_guidance * (c - u)  # CLEAN: guidance read from a static device tensor
        prev_t = self.static_t - self.num_train_timesteps // self.num_inference_steps  # HAZARD: python-scalar
        a_t = self.alphas_cumprod.gather(0, self.static_t.view(1))  # CLEAN: gather with a CUDA index
        a_prev = torch.where(prev_t >= 0, self.alphas_cumprod.gather(0, prev_t.clamp(min=0).view(1)), torch.ones_like(a_t))  # CLEAN: torch.where instead of a host branch
        x0 = (self.static_latents - (1 - a_t).sqrt() * eps) / a_t.sqrt()
        sigma = self.eta * ((1 - a_prev) / (1 - a_t) * (1 - a_t / a_prev)).sqrt()  # CLEAN: eta fixed at construction, never changed after capture
        noise = torch.randn(self.static_latents.shape, generator=self.generator, device=self.device, dtype=eps.dtype)  # HAZARD: rng
        out = a_prev.sqrt() * x0 + (1 - a_prev - sigma ** 2).sqrt() * eps + sigma * noise
        self.static_latents.copy_(out)  # CLEAN: in-place update of the static latents

    def capture(self):
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.autocast("cuda", dtype=torch.float16):  # HAZARD: autocast-cache
            with torch.cuda.stream(s):
                for _ in range(3):
                    self._step()
                self.graph = torch.cuda.CUDAGraph()
                self.graph.capture_begin()
                self._step()
                self.graph.capture_end()
        torch.cuda.current_stream().wait_stream(s)


class DDIMPipeline:
    def __init__(self, unet, vae, text_encoder, tokenizer, scheduler, safety_checker=None, device="cuda"):
        self.vae, self.text_encoder, self.tokenizer = vae, text_encoder, tokenizer
        self.scheduler, self.safety_checker, self.device = scheduler, safety_checker, device
        self.step = GraphedDDIMStep(unet, scheduler, (1, 4, 64, 64), device=device)
        self.captured = False

    def set_scheduler(self, scheduler):
        self.scheduler = scheduler
        self.step.alphas_cumprod = scheduler.alphas_cumprod.to(self.device)  # HAZARD: static-address

    @torch.inference_mode()
    def __call__(self, prompt, num_inference_steps=50, guidance_scale=7.5, generator=None):
        ids = self.tokenizer(["", prompt], padding="max_length", max_length=77, return_tensors="pt").input_ids
        self.step.static_text.copy_(self.text_encoder(ids.to(self.device))[0])  # CLEAN: copy into the static input
        self.step.static_guidance.fill_(guidance_scale)
        self.step.generator = generator
        self.step.num_inference_steps = num_inference_steps
        self.scheduler.set_timesteps(num_inference_steps)
        init = torch.randn((1, 4, 64, 64), generator=generator, device=self.device, dtype=torch.float16)
        self.step.static_latents.copy_(init)
        if not self.captured:
            self.step.capture()
            self.captured = True
            self.step.static_latents.copy_(init)
        for t in self.scheduler.timesteps:
            self.step.static_t.fill_(int(t))  # CLEAN: fill_ into the static timestep before replay
            self.step.graph.replay()
        image = self.vae.decode(self.step.static_latents / 0.18215).sample
        image = (image / 2 + 0.5).clamp(0, 1)
        if self.safety_checker is not None and self.safety_checker(image).any().item():  # CLEAN: eager check after the replays
            image = torch.zeros_like(image)
        return image
