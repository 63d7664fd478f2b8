"""wav2vec 2.0-style self-supervised speech pretraining written as a Lightning-style module and trained
through a CUDAGraphStrategy that captures training_step + backward + optimizer step once."""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

def compute_mask_indices(shape, mask_prob, mask_length):
    bsz, T = shape
    num_mask = max(1, int(mask_prob * T / mask_length))
    starts = np.random.randint(0, T - mask_length, size=(bsz, num_mask))  # HAZARD: host-code
    mask = np.zeros(shape, dtype=bool)
    np.put_along_axis(mask, (starts[..., None] + np.arange(mask_length)).reshape(bsz, -1), True, axis=1)
    return mask

class GumbelVectorQuantizer(nn.Module):
    def __init__(self, dim, num_vars=320, groups=2, vq_dim=256, temp=(2.0, 0.5, 0.999995)):
        super().__init__()
        self.groups, self.num_vars = groups, num_vars
        self.max_temp, self.min_temp, self.temp_decay = temp
        self.curr_temp = self.max_temp  # annealed by the trainer after every update
        self.weight_proj = nn.Linear(dim, groups * num_vars)
        self.vars = nn.Parameter(torch.randn(groups * num_vars, vq_dim // groups))

    def set_num_updates(self, num_updates):
        self.curr_temp = max(self.max_temp * self.temp_decay ** num_updates, self.min_temp)

    def forward(self, x):
        b, t, _ = x.shape
        logits = self.weight_proj(x).view(b * t * self.groups, -1).float()
        avg_probs = logits.softmax(-1).view(b * t, self.groups, -1).mean(0)
        prob_ppl = torch.exp(-(avg_probs * torch.log(avg_probs + 1e-7)).sum(-1)).sum()
        tau = self.curr_temp  # HAZARD: python-scalar
        onehot = F.gumbel_softmax(logits, tau=tau, hard=True)  # CLEAN: default-generator sampling is capturable
        q = torch.einsum("ngv,gvd->ngd", onehot.view(b * t, self.groups, -1), self.vars.view(self.groups, self.num_vars, -1))
        return q.reshape(b, t, -1), prob_ppl

class LightningModuleLite(nn.Module):
    def log(self, name, value, prog_bar=False):
        self.logged[name] = value

class Wav2Vec2Lite(LightningModuleLite):
    def __init__(self, dim=512, mask_prob=0.65, mask_length=10, n_negatives=100):
        super().__init__()
        self.logged, self.mask_prob, self.mask_length, self.n_negatives = {}, mask_prob, mask_length, n_negatives
        self.feature_extractor = nn.Sequential(nn.Conv1d(1, dim, 10, 5), nn.GELU(), nn.Conv1d(dim, dim, 8, 4),
                                               nn.GELU(), nn.Conv1d(dim, dim, 4, 2), nn.GELU())
        self.mask_emb = nn.Parameter(torch.rand(dim))
        self.encoder = nn.TransformerEncoder(nn.TransformerEncoderLayer(dim, 8, 2048, dropout=0.1, batch_first=True), 4)
        self.quantizer = GumbelVectorQuantizer(dim)
        self.final_proj = nn.Linear(dim, 256)

    def training_step(self, wav, batch_idx):
        feats = self.feature_extractor(wav[:, None]).transpose(1, 2)
        B, T, _ = feats.shape
        mask = torch.from_numpy(compute_mask_indices((B, T), self.mask_prob, self.mask_length)).to(feats.device)
        x = torch.where(mask[..., None], self.mask_emb.to(feats.dtype), feats)  # CLEAN: torch.where keeps the shape
        c = self.final_proj(self.encoder(x))
        q, prob_ppl = self.quantizer(feats)
        neg_idx = torch.randint(0, T, (B, T * self.n_negatives), device=feats.device)  # CLEAN: default CUDA generator
        negs = torch.gather(q, 1, neg_idx[..., None].expand(-1, -1, q.shape[-1])).view(B, T, self.n_negatives, -1)
        targets = torch.cat([q[:, :, None], negs], 2)
        logits = F.cosine_similarity(c[:, :, None].float(), targets.float(), dim=-1) / 0.1
        ce = F.cross_entropy(logits.flatten(0, 1), logits.new_zeros(B * T, dtype=torch.long), reduction="none")
        loss = (ce.view(B, T) * mask).sum() / mask.sum().clamp_min(1)  # CLEAN: masked mean instead of mask indexing
        self.log("train/prob_perplexity", prob_ppl.item(), prog_bar=True)  # HAZARD: host-sync
        return loss + 0.1 * (self.quantizer.groups * self.quantizer.num_vars - prob_ppl) / 640.0

    def configure_optimizers(self):
        opt = torch.optim.AdamW(self.parameters(), lr=5e-4, weight_decay=0.01, capturable=True)  # CLEAN: capturable AdamW
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 32000))
        return opt, sched

class CUDAGraphStrategy:
    def __init__(self, warmup_steps=3):
        self.warmup_steps, self.graph = warmup_steps, torch.cuda.CUDAGraph()

    def _step(self, batch_idx):
        self.optimizer.zero_grad(set_to_none=False)
        loss = self.module.training_step(self.static_batch, batch_idx)
        loss.backward()
        self.optimizer.step()
        return loss.detach()

    def setup(self, module, example_batch):
        self.module = module.cuda().train()
        self.optimizer, self.scheduler = module.configure_optimizers()
        self.static_batch = example_batch.clone()
        side = torch.cuda.Stream()
        with torch.autocast("cuda", dtype=torch.bfloat16):  # HAZARD: autocast-cache
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                for i in range(self.warmup_steps):
                    self._step(i)
            torch.cuda.current_stream().wait_stream(side)
            with torch.cuda.graph(self.graph):
                self.static_loss = self._step(0)

    def fit(self, loader):
        for step, wav in enumerate(loader):
            self.static_batch.copy_(wav)  # CLEAN: copy_ into the captured batch
            self.graph.replay()
            self.module.quantizer.set_num_updates(step + 1)
            self.scheduler.step()  # HAZARD: optimizer

if __name__ == "__main__":
    strategy = CUDAGraphStrategy()
    strategy.setup(Wav2Vec2Lite(), torch.randn(8, 48000, device="cuda"))
    strategy.fit(torch.randn(8, 48000, device="cuda") for _ in range(1000))
