"""MusicGen-style text-to-music with the codebook delay pattern.

Four EnCodec codebooks are predicted in parallel with a one-step delay per
codebook. The decoder step (with classifier-free guidance over a doubled batch)
is compiled with mode="max-autotune"; EnCodec decoding uses default torch.compile.
"""
import torch
import torch.nn as nn


def build_delay_pattern_mask(bsz, num_codebooks, max_length, pad_token_id, device):
    mask = torch.full((bsz, num_codebooks, max_length), -1, dtype=torch.long)
    for k in range(num_codebooks):
        mask[:, k, :k] = pad_token_id  # CLEAN: host-side loop run once, before the compiled step
    return mask.to(device)


class MusicgenStep(nn.Module):
    def __init__(self, decoder, heads, cfg):
        super().__init__()
        self.decoder, self.heads, self.cfg = decoder, heads, cfg
        self.top_k = cfg.top_k

    def forward(self, codes, cache_position, text_states, guidance, delay_mask, cache):
        h = self.decoder(codes.repeat(2, 1, 1), encoder_hidden_states=text_states,
                         cache_position=cache_position, past_key_values=cache)
        logits = torch.stack([head(h[:, -1]) for head in self.heads], dim=1).float()
        cond, uncond = logits.chunk(2)
        logits = uncond + guidance * (cond - uncond)  # CLEAN: guidance scale passed as a device tensor
        v, _ = torch.topk(logits, self.top_k, dim=-1)
        logits = logits.masked_fill(logits < v[..., -1:], -float("inf"))
        nxt = torch.multinomial(logits.softmax(-1).flatten(0, 1), 1).view(codes.shape[0], -1)  # CLEAN: default-generator sampling
        forced = delay_mask.index_select(2, cache_position).squeeze(-1)  # CLEAN: column picked with a device index
        nxt = torch.where(forced >= 0, forced, nxt)
        if nxt.eq(self.cfg.pad_token_id).all():  # HAZARD: dynamic-control-flow
            nxt = torch.full_like(nxt, self.cfg.eos_token_id)
        self.frames_with_audio = int(nxt[:, 0].ne(self.cfg.pad_token_id).sum())  # HAZARD: host-sync
        return nxt


class MusicGenerator:
    def __init__(self, model, processor, device="cuda"):
        self.model, self.processor, self.device = model.eval(), processor, device
        self.cfg = model.generation_config
        self.step = torch.compile(MusicgenStep(model.decoder.model, model.decoder.lm_heads, self.cfg),
                                  mode="max-autotune")
        self.decode_audio = torch.compile(model.audio_encoder.decode)
        self.frame_rate = model.config.audio_encoder.frame_rate

    @torch.inference_mode()
    def generate(self, descriptions, duration_s=10.0, guidance_scale=3.0, keep_steps=False):
        inputs = self.processor(text=descriptions + [""] * len(descriptions), padding="longest",
                                return_tensors="pt").to(self.device)
        text_states = self.model.text_encoder(**inputs).last_hidden_state
        text_states = self.model.enc_to_dec_proj(text_states)
        bsz, K = len(descriptions), self.cfg.num_codebooks
        max_len = int(duration_s * self.frame_rate) + K
        delay_mask = build_delay_pattern_mask(bsz, K, max_len, self.cfg.pad_token_id, self.device)
        guidance = torch.tensor(guidance_scale, device=self.device)
        cache = self.model.decoder.new_static_cache(2 * bsz, max_len=1503)
        codes = torch.full((bsz, K, 1), self.cfg.decoder_start_token_id, device=self.device)
        frames, steps = [], []
        for t in range(max_len):
            cache_position = torch.full((1,), t, device=self.device)
            nxt = self.step(codes, cache_position, text_states, guidance, delay_mask, cache)  # HAZARD: dynamic-shape
            if keep_steps:
                steps.append(nxt)  # HAZARD: static-address
            frames.append(nxt.clone())
            codes = frames[-1].unsqueeze(-1)
        seq = torch.stack(frames, dim=-1)
        aligned = torch.stack([seq[:, k, k: k + max_len - K] for k in range(K)], dim=1)  # CLEAN: undelay with static slices, eager
        audio = self.decode_audio(aligned[None], [None]).audio_values  # CLEAN: default torch.compile
        return audio.float().cpu(), steps
