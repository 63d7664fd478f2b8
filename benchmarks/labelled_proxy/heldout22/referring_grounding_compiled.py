"""Referring-expression grounding (TransVG-style: "the red mug left of the laptop" -> one box) behind a photo
app's "find in photo" feature. The grounding model comes from a small zoo and is served with
torch.compile(options={"triton.cudagraphs": True}); an audit twin is compiled without CUDA graphs."""
import torch
import torch.nn as nn
import torch.nn.functional as F

CG = {"triton.cudagraphs": True}
ZOO = {"transvg-lite-r18": dict(dim=256, layers=4, img=384), "transvg-lite-r50": dict(dim=384, layers=6, img=512)}
MAX_TOKENS = 20

class FusionLayer(nn.Module):
    def __init__(self, dim, heads=8):
        super().__init__()
        self.heads, self.qkv, self.proj = heads, nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.ffn = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x, key_mask):
        b, n, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(b, n, 3, self.heads, -1).unbind(2)
        att = torch.einsum("bqhd,bkhd->bhqk", q, k) * (d // self.heads) ** -0.5
        att = att.masked_fill(~key_mask[:, None, None], float("-inf")).softmax(-1)  # CLEAN: masked_fill keeps the shape
        x = x + self.proj(torch.einsum("bhqk,bkhd->bqhd", att, v).reshape(b, n, d))
        return x + self.ffn(self.norm2(x))

class GroundingModel(nn.Module):
    def __init__(self, dim, layers, img, vocab=30522):
        super().__init__()
        self.visual = nn.Sequential(nn.Conv2d(3, dim // 2, 7, 4, 3), nn.ReLU(), nn.Conv2d(dim // 2, dim, 3, 4, 1))
        self.word, self.word_pos = nn.Embedding(vocab, dim, padding_idx=0), nn.Embedding(MAX_TOKENS, dim)
        self.reg_token = nn.Parameter(torch.zeros(1, 1, dim))
        self.fusion = nn.ModuleList([FusionLayer(dim) for _ in range(layers)])
        self.box_head = nn.Sequential(nn.Linear(dim, dim), nn.ReLU(), nn.Linear(dim, 4))
        self.register_buffer("pixel_mean", torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1))
        self.register_buffer("pixel_std", torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1))

    def forward(self, image, tokens):
        if torch.isnan(image).any():  # HAZARD: dynamic-control-flow
            image = torch.nan_to_num(image)
        image.sub_(self.pixel_mean).div_(self.pixel_std)  # HAZARD: static-address
        vis = self.visual(image).flatten(2).transpose(1, 2)
        txt = self.word(tokens) + self.word_pos.weight[: tokens.shape[1]]
        x = torch.cat([self.reg_token.expand(image.shape[0], -1, -1), vis, txt], 1)
        key_mask = torch.cat([torch.ones(x.shape[0], 1 + vis.shape[1], dtype=torch.bool, device=x.device), tokens != 0], 1)
        for layer in self.fusion:
            x = layer(x, key_mask)
        box = self.box_head(x[:, 0]).sigmoid()
        print("grounding box (cx, cy, w, h):", box[0])  # HAZARD: host-code
        return box

def tokenize(expressions, vocab, pad_to=None):
    ids = [[vocab.get(w, 100) for w in e.lower().split()][:MAX_TOKENS] for e in expressions]
    width = pad_to or max(len(t) for t in ids)
    out = torch.zeros(len(ids), width, dtype=torch.long)
    for i, t in enumerate(ids):
        out[i, : len(t)] = torch.tensor(t)
    return out.cuda()

class GroundingService:
    def __init__(self, name, vocab):
        spec = ZOO[name]
        self.size, self.vocab = spec["img"], vocab
        model = GroundingModel(**spec).cuda().eval()
        self.ground = torch.compile(model, options=CG)
        self.audit = torch.compile(model, mode="max-autotune-no-cudagraphs")

    def _image(self, photo):
        return F.interpolate(photo[None].cuda(), size=(self.size, self.size), mode="bilinear", align_corners=False)

    @torch.no_grad()
    def find(self, photo, expression):
        return self.ground(self._image(photo), tokenize([expression], self.vocab)).clone()  # HAZARD: dynamic-shape

    @torch.no_grad()
    def find_padded(self, photo, expression):
        tokens = tokenize([expression], self.vocab, pad_to=MAX_TOKENS)
        return self.ground(self._image(photo), tokens).clone()  # CLEAN: expressions padded to 20 tokens, one shape

    @torch.no_grad()
    def audit_batch(self, photos, expressions):
        tokens = tokenize(expressions, self.vocab)
        images = torch.cat([self._image(p) for p in photos])
        return self.audit(images, tokens).cpu()  # CLEAN: compiled without CUDA graphs

if __name__ == "__main__":
    vocab = {w: i + 1000 for i, w in enumerate("the red mug left of laptop dog on sofa woman in blue coat".split())}
    service = GroundingService("transvg-lite-r18", vocab)
    photo = torch.rand(3, 768, 1024)
    for text in ("the red mug", "the dog on the sofa", "woman in blue coat left of the dog"):
        box = service.find(photo, text)
        box_padded = service.find_padded(photo, text)
    audit = service.audit_batch([photo, photo], ["the red mug", "the dog"])
