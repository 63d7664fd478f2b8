import torch
import torch.nn as nn


class ConvSubsampling(nn.Module):
    def __init__(self, n_mels: int, d_model: int):
        super().__init__()
        self.conv = nn.Sequential(nn.Conv2d(1, d_model, 3, 2), nn.ReLU(), nn.Conv2d(d_model, d_model, 3, 2), nn.ReLU())
        self.proj = nn.Linear(d_model * (((n_mels - 1) // 2 - 1) // 2), d_model)

    def forward(self, feats):
        x = self.conv(feats.unsqueeze(1))
        b, c, t, f = x.shape
        return self.proj(x.transpose(1, 2).reshape(b, t, c * f))


class ConformerEncoder(nn.Module):
    def __init__(self, n_mels=80, d_model=256, n_layers=6, subsampling="conv2d"):
        super().__init__()
        self.subsampling = subsampling
        self.sub = ConvSubsampling(n_mels, d_model) if subsampling == "conv2d" else nn.Linear(n_mels, d_model)
        layer = nn.TransformerEncoderLayer(d_model, 4, 4 * d_model, batch_first=True, norm_first=True)
        self.layers = nn.TransformerEncoder(layer, n_layers, enable_nested_tensor=False)

    def forward(self, feats, lengths):
        if self.subsampling == "conv2d":  # CLEAN: string comparison on a config attribute
            x = self.sub(feats)
            lengths = ((lengths - 1) // 2 - 1) // 2
        else:
            x = self.sub(feats)
        if lengths.min() < 4:  # HAZARD: dynamic-control-flow
            raise RuntimeError("utterance too short after subsampling")
        x = x[:, : lengths.max()]  # HAZARD: dynamic-shape
        mask = torch.arange(x.shape[1], device=x.device)[None, :] < lengths[:, None]
        x = self.layers(x, src_key_padding_mask=~mask)
        x = x.masked_fill(~mask.unsqueeze(-1), 0.0)  # CLEAN: masked_fill keeps a static shape
        frames = x.masked_select(mask.unsqueeze(-1)).view(-1, x.shape[-1])  # HAZARD: dynamic-shape
        utt_emb = x.sum(1) / lengths[:, None].clamp(min=1)
        return x, lengths, utt_emb, frames.mean(0)


def build_encoder():
    enc = ConformerEncoder().cuda().eval()
    return torch.compile(enc, mode="reduce-overhead", dynamic=False)


@torch.inference_mode()
def encode_dataset(loader):
    encoder = build_encoder()
    embeddings = []
    for feats, lengths in loader:
        _, _, utt_emb, _ = encoder(feats.cuda(), lengths.cuda())
        embeddings.append(utt_emb.cpu())  # CLEAN: copied to host after the compiled call returns
    return torch.cat(embeddings)
