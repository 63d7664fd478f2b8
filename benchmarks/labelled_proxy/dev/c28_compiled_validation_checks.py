"""Tokenizer-free byte model with defensive checks inside a compiled forward."""
import torch
import torch.nn as nn


class ByteLM(nn.Module):
    def __init__(self, dim=512, n_layers=4, strict=True, norm_type="rms"):
        super().__init__()
        self.strict = strict
        self.norm_type = norm_type
        self.emb = nn.Embedding(256, dim)
        self.layers = nn.ModuleList(nn.Linear(dim, dim) for _ in range(n_layers))
        self.head = nn.Linear(dim, 256)
        self.register_buffer("ref_ids", torch.arange(256))

    def norm(self, h):
        if self.norm_type == "rms":  # CLEAN: comparison with a string setting
            return h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6)
        return nn.functional.layer_norm(h, h.shape[-1:])

    def forward(self, ids):
        if self.strict:  # CLEAN: bool from __init__
            assert ids.max() < 256, "byte id out of range"  # HAZARD: dynamic-control-flow
        if not torch.equal(self.ref_ids, torch.arange(256, device=ids.device)):  # HAZARD: host-sync
            raise ValueError("corrupted id table")
        h = self.emb(ids)
        for lin in self.layers:
            h = h + torch.relu(lin(self.norm(h)))
        logits = self.head(h)
        if torch.isnan(logits).any():  # HAZARD: dynamic-control-flow
            logits = torch.nan_to_num(logits)
        return logits


def main():
    model = ByteLM().cuda()
    model = torch.compile(model, mode="reduce-overhead")
    data = torch.randint(0, 256, (32, 1024), device="cuda")
    with torch.no_grad():
        for _ in range(10):
            out = model(data)
            ok = torch.allclose(out.float().softmax(-1).sum(-1), torch.ones(32, 1024, device="cuda"))  # CLEAN: eager check outside the compiled model
            if not ok:
                raise RuntimeError(f"bad softmax at batch of {data.shape[0]}")


if __name__ == "__main__":
    main()
