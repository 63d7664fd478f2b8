"""ViT with adaptive token pruning; the model is compiled with reduce-overhead."""
import torch
import torch.nn as nn


class PrunedViT(nn.Module):
    def __init__(self, dim=384, depth=6, keep_ratio=0.7, prune_mode="topk"):
        super().__init__()
        self.patch = nn.Conv2d(3, dim, 16, 16)
        self.blocks = nn.ModuleList(nn.TransformerEncoderLayer(dim, 6, batch_first=True) for _ in range(depth))
        self.score = nn.Linear(dim, 1)
        self.head = nn.Linear(dim, 1000)
        self.keep_ratio = keep_ratio
        self.prune_mode = prune_mode
        self.thresh = 0.5

    def set_keep_ratio(self, r: float):
        self.keep_ratio = r

    def forward(self, img):
        x = self.patch(img).flatten(2).transpose(1, 2)
        for i, blk in enumerate(self.blocks):
            x = blk(x)
            if i != len(self.blocks) // 2:  # CLEAN: Python loop index compared with a constant
                continue
            s = self.score(x).squeeze(-1).sigmoid()
            if self.prune_mode == "topk":
                k = int(self.keep_ratio * x.shape[1])  # HAZARD: python-scalar
                idx = s.topk(k, dim=1).indices
                x = x.gather(1, idx[..., None].expand(-1, -1, x.shape[-1]))
            elif self.prune_mode == "thresh":
                x = x[s > self.thresh].view(x.shape[0], -1, x.shape[-1])  # HAZARD: dynamic-shape
            else:
                n_keep = (s > self.thresh).sum(1).min()
                x = x[:, :n_keep]  # HAZARD: dynamic-shape
                kept = torch.masked_select(s, s > self.thresh)  # HAZARD: dynamic-shape
                x = x * kept.mean()
        return self.head(x.mean(1))


def finetune(loader, epochs=5):
    vit = PrunedViT().cuda()
    model = torch.compile(vit, mode="reduce-overhead")
    opt = torch.optim.AdamW(vit.parameters(), lr=1e-4)
    for ep in range(epochs):
        vit.set_keep_ratio(0.9 - 0.1 * ep)
        for img, y in loader:
            loss = nn.functional.cross_entropy(model(img.cuda()), y.cuda())
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
