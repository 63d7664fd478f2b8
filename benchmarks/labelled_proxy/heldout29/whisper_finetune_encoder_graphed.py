"""Fine-tuning a Whisper-small-style model on accented English with a graphed encoder.

The audio encoder (conv stem + transformer blocks + SpecAugment) is graphed with
torch.cuda.make_graphed_callables on fixed 30 s log-mel inputs; the text decoder
and loss run eagerly. SpecAugment follows the transformers implementation
(time masks from `_compute_mask_indices`, feature masks).
"""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


def _compute_mask_indices(shape, mask_prob, mask_length, min_masks=2):
    bsz, seq_len = shape
    n = max(min_masks, int(mask_prob * seq_len / mask_length))
    mask = np.zeros(shape, dtype=bool)
    starts = np.random.randint(0, seq_len - mask_length, size=(bsz, n))  # HAZARD: host-code
    for b in range(bsz):
        for s in starts[b]:
            mask[b, s: s + mask_length] = True
    return mask


class AugmentedWhisperEncoder(nn.Module):
    def __init__(self, encoder, mask_time_prob=0.05, mask_time_length=10, mask_feature_prob=0.05,
                 mask_feature_length=10, clip_value=20.0):
        super().__init__()
        self.encoder = encoder
        self.mask_time_prob, self.mask_time_length = mask_time_prob, mask_time_length
        self.mask_feature_prob, self.mask_feature_length = mask_feature_prob, mask_feature_length
        self.clip_value = clip_value
        self.feat_stats = np.array([0.0, 1.0], dtype=np.float32)

    def forward(self, input_features):
        stats = torch.from_numpy(self.feat_stats).to(input_features.device)  # HAZARD: pinned-memory
        x = (input_features - stats[0]) / stats[1]
        if x.abs().amax() > self.clip_value:  # HAZARD: dynamic-control-flow
            x = x.clamp(-self.clip_value, self.clip_value)
        if self.training:
            b, n_mels, frames = x.shape
            tmask = _compute_mask_indices((b, frames), self.mask_time_prob, self.mask_time_length)
            tmask = torch.as_tensor(tmask, device=x.device)[:, None, :]
            starts = torch.rand(b, 1, device=x.device) * (n_mels - self.mask_feature_length)  # CLEAN: default-generator CUDA RNG
            bins = torch.arange(n_mels, device=x.device)[None, :]
            fmask = ((bins >= starts) & (bins < starts + self.mask_feature_length))[:, :, None]
            x = torch.where(tmask | fmask, torch.zeros_like(x), x)  # CLEAN: masks applied with torch.where
        return self.encoder(x).last_hidden_state


class WhisperFineTuner:
    def __init__(self, model, processor, batch_size=16, lr=1e-5, device="cuda"):
        self.model, self.processor, self.device = model.to(device), processor, device
        enc = AugmentedWhisperEncoder(model.model.encoder).to(device).train()
        sample = torch.randn(batch_size, 80, 3000, device=device, requires_grad=False)
        with torch.autocast("cuda", dtype=torch.float16, cache_enabled=False):  # CLEAN: autocast cache disabled while graphing
            self.encoder = torch.cuda.make_graphed_callables(enc, (sample,), num_warmup_iters=3)
        self.opt = torch.optim.AdamW(model.parameters(), lr=lr)
        self.opt_step = torch.compile(self.opt.step, mode="max-autotune")

    def set_normalization(self, dataset_stats):
        self.encoder.feat_stats[:] = (dataset_stats["mean"], dataset_stats["std"])

    def set_lr(self, lr):
        for g in self.opt.param_groups:
            g["lr"] = lr  # HAZARD: optimizer

    def train_step(self, batch):
        feats = batch["input_features"].to(self.device, non_blocking=True)
        labels = batch["labels"].to(self.device, non_blocking=True)
        with torch.autocast("cuda", dtype=torch.float16, cache_enabled=False):
            memory = self.encoder(input_features=feats)  # HAZARD: api-misuse
            dec_in = self.model.model.decoder(input_ids=labels[:, :-1], encoder_hidden_states=memory).last_hidden_state
            logits = self.model.proj_out(dec_in).float()
        loss = F.cross_entropy(logits.flatten(0, 1), labels[:, 1:].flatten(), ignore_index=-100)
        loss.backward()
        self.opt_step()
        self.opt.zero_grad(set_to_none=True)
        return loss.item()  # CLEAN: eager read after backward, outside the graph

    @torch.no_grad()
    def wer_eval(self, loader, metric):
        self.encoder.eval()
        for batch in loader:
            memory = self.encoder(batch["input_features"].to(self.device))  # CLEAN: eval mode runs the original forward
            ids = self.model.generate(encoder_outputs=(memory,), max_new_tokens=225)
            metric.add_batch(predictions=self.processor.batch_decode(ids, skip_special_tokens=True),
                             references=batch["text"])
        self.encoder.train()
        return metric.compute()
