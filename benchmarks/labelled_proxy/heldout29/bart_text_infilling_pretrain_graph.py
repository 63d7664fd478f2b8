"""BART denoising pretraining (text infilling) with the whole step in one CUDA graph.

Noising happens on the GPU inside the step: tokens are masked at `mask_ratio`,
span lengths follow Poisson(3) as in the BART paper, and the decoder reconstructs
the original text. Forward, backward, clipping and AdamW are captured together.
"""
import numpy as np
import torch
import torch.nn.functional as F


class InfillingGraphTrainer:
    def __init__(self, model, config, batch_size=32, seq_len=512, lr=4e-4, device="cuda"):
        self.model, self.config, self.device = model.to(device).train(), config, device
        self.mask_ratio = 0.3
        self.poisson_lambda = 3.0
        self.label_smoothing = config.label_smoothing  # fixed for the whole run
        self.opt = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.98), weight_decay=0.01)
        self.static_ids = torch.full((batch_size, seq_len), config.pad_token_id, device=device)
        self.static_attn = torch.ones(batch_size, seq_len, dtype=torch.long, device=device)
        self.static_loss = None
        self.graph = torch.cuda.CUDAGraph()
        self.losses = []

    def _noise(self, ids):
        special = (ids == self.config.pad_token_id) | (ids == self.config.bos_token_id) | (ids == self.config.eos_token_id)
        starts = (torch.rand(ids.shape, device=ids.device) < self.mask_ratio / self.poisson_lambda) & ~special  # HAZARD: python-scalar
        lengths = np.random.poisson(self.poisson_lambda, size=ids.shape)  # HAZARD: host-code
        lengths = torch.as_tensor(lengths, device=ids.device).clamp(max=10)
        idx = torch.arange(ids.shape[1], device=ids.device)
        start_pos = torch.where(starts, idx, torch.full_like(ids, -100))
        end_pos = torch.where(starts, idx + lengths, torch.full_like(ids, -100))
        covered = ((idx[None, :, None] >= start_pos[:, None, :]) & (idx[None, :, None] < end_pos[:, None, :])).any(-1)
        return torch.where(covered & ~special, torch.full_like(ids, self.config.mask_token_id), ids)  # CLEAN: fixed-shape where, no mask indexing

    def _step(self):
        noised = self._noise(self.static_ids)
        dec_in = torch.roll(self.static_ids, 1, dims=1)
        dec_in[:, 0] = self.config.decoder_start_token_id
        logits = self.model(input_ids=noised, attention_mask=self.static_attn, decoder_input_ids=dec_in).logits
        loss = F.cross_entropy(logits.float().view(-1, logits.shape[-1]), self.static_ids.view(-1),
                               ignore_index=self.config.pad_token_id, label_smoothing=self.label_smoothing)  # CLEAN: smoothing fixed before capture
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)  # CLEAN: capturable after warm-up
        self.opt.step()  # HAZARD: optimizer
        self.opt.zero_grad(set_to_none=False)
        self.losses.append(loss.item())  # HAZARD: host-sync
        return loss

    def capture(self, first_batch):
        self.static_ids.copy_(first_batch["input_ids"])
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                self._step()
        torch.cuda.current_stream().wait_stream(s)
        with torch.cuda.graph(self.graph):
            self.static_loss = self._step()

    def train(self, loader, total_steps, log_every=100):
        for step, batch in enumerate(loader):
            ids = batch["input_ids"].to(self.device, non_blocking=True)  # CLEAN: pinned loader batch, copied outside the capture
            if step == 0:
                self.capture({"input_ids": ids})
            self.static_ids.copy_(ids)  # CLEAN: copy into the static input
            self.static_attn.copy_(ids.ne(self.config.pad_token_id))
            self.mask_ratio = 0.15 + 0.15 * min(1.0, step / (0.1 * total_steps))
            self.graph.replay()
            if step % log_every == 0:
                print(f"step {step} loss {self.static_loss.item():.4f}")  # CLEAN: read after replay, outside the capture
            if step >= total_steps:
                break
