"""PixArt-alpha-style DiT text-to-image pipeline with callbacks fired inside a captured step.

`CapturedStep` warms up a step function on a side stream and captures it into a
CUDA graph; the pipeline's step calls `callback_on_step_end(pipe, i, t, kwargs)`
like diffusers does, so every callback body runs inside the capture.
"""
import time

import torch


class CapturedStep:
    def __init__(self, fn, warmup=3):
        self.fn, self.warmup, self.graph = fn, warmup, None

    def __call__(self):
        if self.graph is None:
            s = torch.cuda.Stream()
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                for _ in range(self.warmup):
                    self.fn()
            torch.cuda.current_stream().wait_stream(s)
            self.graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self.graph):  # CLEAN: warmed up on a side stream, captured on torch.cuda.graph's own stream
                self.fn()
        self.graph.replay()


class DynamicCFGCallback:
    def __init__(self, cutoff_step=8):
        self.cutoff_step = cutoff_step

    def __call__(self, pipe, i, t, kw):
        if i >= self.cutoff_step:
            pipe.guidance.fill_(1.0)
        return kw


class PreviewCallback:
    def __init__(self, sink):
        self.sink = sink

    def __call__(self, pipe, i, t, kw):
        self.sink.append(kw["latents"][0, :3].float().cpu())  # HAZARD: host-sync
        return kw


class SafetyCallback:
    def __call__(self, pipe, i, t, kw):
        if torch.isnan(kw["latents"]).any():  # HAZARD: dynamic-control-flow
            raise FloatingPointError(f"NaN latents at step {i}")
        pipe.step_times.append(time.perf_counter())  # HAZARD: host-code
        return kw


class SnapshotCallback:
    def __init__(self, buf):
        self.buf = buf

    def __call__(self, pipe, i, t, kw):
        self.buf.copy_(kw["latents"])  # CLEAN: copy into a preallocated buffer, replayed every step
        return kw


class PixArtGraphPipeline:
    def __init__(self, transformer, vae, text_encoder, scheduler, callbacks=(), device="cuda"):
        self.transformer, self.vae, self.text_encoder, self.scheduler = transformer, vae, text_encoder, scheduler
        self.callbacks, self.device, self.step_times = list(callbacks), device, []
        self.latents = torch.zeros(1, 4, 128, 128, device=device, dtype=torch.float16)
        self.t = torch.zeros(1, device=device, dtype=torch.float16)
        self.dt = torch.zeros(1, device=device, dtype=torch.float16)
        self.prompt_embeds = torch.zeros(2, 120, 4096, device=device, dtype=torch.float16)
        self.guidance = torch.full((), 4.5, device=device)
        self.churn = torch.zeros((), device=device, dtype=torch.float16)
        self.num_timesteps, self.generator = 20, None
        self.i = 0
        self.step = CapturedStep(self._denoise)

    def _denoise(self):
        x = torch.cat([self.latents] * 2)
        v = self.transformer(x, encoder_hidden_states=self.prompt_embeds, timestep=self.t.expand(2)).sample
        u, c = v.chunk(2)
        v = u + self.guidance * (c - u)  # CLEAN: guidance read from a static device tensor
        self.latents.add_(self.dt * v[:, :4])  # CLEAN: in-place Euler update of the static latents
        noise = torch.randn(self.latents.shape, generator=self.generator, device=self.device, dtype=self.latents.dtype)  # HAZARD: rng
        self.latents.add_(self.churn * noise)
        kw = {"latents": self.latents}
        for cb in self.callbacks:
            kw = cb(self, self.i, self.t, kw)  # HAZARD: python-scalar

    @torch.inference_mode()
    def __call__(self, prompt_embeds, guidance_scale=4.5, steps=20, s_churn=0.0, generator=None):
        self.guidance.fill_(guidance_scale)
        self.churn.fill_(s_churn)
        self.num_timesteps, self.generator = steps, generator
        self.prompt_embeds.copy_(prompt_embeds)  # CLEAN: copy into the static input
        self.latents.copy_(torch.randn(self.latents.shape, generator=generator, device=self.device))
        sigmas = torch.linspace(1.0, 0.0, steps + 1, device=self.device)
        for i in range(steps):
            self.i = i
            self.t.fill_(sigmas[i] * 1000)
            self.dt.copy_(sigmas[i + 1] - sigmas[i])
            self.step()
        return self.vae.decode(self.latents / self.vae.config.scaling_factor).sample
