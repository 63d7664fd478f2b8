"""IP-Adapter (image prompt) for an SD-1.5 UNet with the denoiser captured as a CUDA graph.

Decoupled cross-attention adds an image-prompt branch next to the text branch,
weighted by `scale`. Image embeddings come from a CLIP vision encoder and a small
projection model; the UNet + CFG step is captured with capture_begin/capture_end
on a side stream.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class IPAttnProcessor(nn.Module):
    def __init__(self, hidden_size, cross_dim, num_tokens=4, scale=1.0):
        super().__init__()
        self.to_k_ip = nn.Linear(cross_dim, hidden_size, bias=False)
        self.to_v_ip = nn.Linear(cross_dim, hidden_size, bias=False)
        self.num_tokens, self.scale = num_tokens, scale
        self.attn_maps, self.save_maps = [], False

    def __call__(self, attn, hidden, encoder_hidden_states):
        text, ip = encoder_hidden_states[:, : -self.num_tokens], encoder_hidden_states[:, -self.num_tokens:]
        q = attn.head_to_batch_dim(attn.to_q(hidden))
        k, v = attn.head_to_batch_dim(attn.to_k(text)), attn.head_to_batch_dim(attn.to_v(text))
        out = F.scaled_dot_product_attention(q, k, v)
        ip_k, ip_v = attn.head_to_batch_dim(self.to_k_ip(ip)), attn.head_to_batch_dim(self.to_v_ip(ip))
        ip_out = F.scaled_dot_product_attention(q, ip_k, ip_v)
        if self.save_maps:
            self.attn_maps.append((q @ ip_k.transpose(-1, -2)).softmax(-1).mean(0))  # HAZARD: host-code
        out = out + self.scale * ip_out  # HAZARD: python-scalar
        return attn.to_out[0](attn.batch_to_head_dim(out))


class IPAdapterGraphPipeline:
    def __init__(self, unet, image_encoder, image_proj, processors, device="cuda"):
        self.unet, self.image_encoder, self.device = unet, image_encoder, device
        self.processors = processors
        unet.set_attn_processor(processors)
        self.proj_fn = torch.compile(image_proj)
        self.static_latents = torch.zeros(2, 4, 64, 64, device=device, dtype=torch.float16)
        self.static_t = torch.zeros((), dtype=torch.long, device=device)
        self.static_text = torch.zeros(2, 77, 768, device=device, dtype=torch.float16)
        self.static_clip = torch.zeros(2, 1024, device=device, dtype=torch.float16)
        self.static_guidance = torch.zeros((), device=device)
        self.graph = None

    def set_ip_adapter_scale(self, scale):
        for p in self.processors.values():
            if isinstance(p, IPAttnProcessor):
                p.scale = scale

    def _eps(self):
        ip_tokens = self.proj_fn(self.static_clip)  # HAZARD: api-misuse
        cond = torch.cat([self.static_text, ip_tokens], dim=1)
        eps = self.unet(self.static_latents, self.static_t, encoder_hidden_states=cond).sample
        u, c = eps.chunk(2)
        return u + self.static_guidance * (c - u)  # CLEAN: guidance read from a static device tensor

    def capture(self):
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.autocast("cuda", dtype=torch.float16, cache_enabled=False):  # CLEAN: autocast cache disabled
            with torch.cuda.stream(s):
                warm_cond = torch.cat([self.static_text, self.static_text[:, :4]], dim=1)
                for _ in range(2):
                    self.unet(self.static_latents, self.static_t, encoder_hidden_states=warm_cond)
            torch.cuda.current_stream().wait_stream(s)
            self.graph = torch.cuda.CUDAGraph()
            self.graph.capture_begin()  # HAZARD: stream
            self.static_eps = self._eps()
            self.graph.capture_end()

    @torch.inference_mode()
    def encode_image(self, pixel_values):
        emb = self.image_encoder(pixel_values.to(self.device, torch.float16)).image_embeds
        return torch.cat([torch.zeros_like(emb), emb])

    @torch.inference_mode()
    def denoise(self, scheduler, latents, text_emb, clip_emb, guidance_scale=7.5, ip_scale=0.6):
        self.set_ip_adapter_scale(ip_scale)
        self.static_text.copy_(text_emb)  # CLEAN: copy into the static input
        self.static_clip = clip_emb  # HAZARD: static-address
        self.static_guidance.fill_(guidance_scale)
        if self.graph is None:
            self.capture()
        for t in scheduler.timesteps:
            self.static_latents.copy_(scheduler.scale_model_input(torch.cat([latents] * 2), t))
            self.static_t.fill_(int(t))
            self.graph.replay()
            latents = scheduler.step(self.static_eps.float(), t, latents).prev_sample
        return latents
