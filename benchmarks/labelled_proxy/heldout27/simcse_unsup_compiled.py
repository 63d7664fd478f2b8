"""Unsupervised SimCSE (Gao, Yao & Chen, EMNLP 2021): dropout as augmentation,
in-batch InfoNCE, optional MLM auxiliary; the model is compiled with
mode="reduce-overhead" and trained on dynamically padded batches."""
import argparse
import torch
import torch.nn as nn
import torch.nn.functional as F

parser = argparse.ArgumentParser()
parser.add_argument("--temp", type=float, default=0.05)
parser.add_argument("--pooler_type", type=str, default="cls")
parser.add_argument("--do_mlm", type=bool, default=True)
parser.add_argument("--mlm_weight", type=float, default=0.1)
parser.add_argument("--mlm_probability", type=float, default=0.15)
parser.add_argument("--max_seq_length", type=int, default=32)
parser.add_argument("--learning_rate", type=float, default=3e-5)
parser.add_argument("--per_device_train_batch_size", type=int, default=64)
args = parser.parse_args()
PAD, MASK, VOCAB = 0, 103, 30522

class Encoder(nn.Module):
    def __init__(self, d=768, layers=4, heads=12):
        super().__init__()
        self.tok, self.pos = nn.Embedding(VOCAB, d), nn.Embedding(512, d)
        self.layers = nn.ModuleList([nn.ModuleDict(dict(ln1=nn.LayerNorm(d), qkv=nn.Linear(d, 3 * d), o=nn.Linear(d, d), ln2=nn.LayerNorm(d),
                                                        ff=nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d)))) for _ in range(layers)])
        self.heads, self.drop = heads, nn.Dropout(0.1)

    def forward(self, ids, attention_mask):
        B, N = ids.shape
        h = self.drop(self.tok(ids) + self.pos(torch.arange(N, device=ids.device)))
        bias = (1.0 - attention_mask[:, None, None, :].to(h.dtype)) * -1e4
        for L in self.layers:
            q, k, v = L["qkv"](L["ln1"](h)).view(B, N, 3, self.heads, -1).permute(2, 0, 3, 1, 4)
            a = F.scaled_dot_product_attention(q, k, v, attn_mask=bias, dropout_p=0.1 if self.training else 0.0)
            h = h + self.drop(L["o"](a.transpose(1, 2).reshape(B, N, -1)))
            h = h + self.drop(L["ff"](L["ln2"](h)))
        return h

class SimCSE(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder, self.mlp, self.lm_head = Encoder(), nn.Sequential(nn.Linear(768, 768), nn.Tanh()), nn.Linear(768, VOCAB)
        self.metrics = {}

    def forward(self, input_ids, attention_mask, mlm_input_ids):
        bs = input_ids.size(0)
        h = self.encoder(torch.cat([input_ids, input_ids]), torch.cat([attention_mask, attention_mask]))
        z = self.mlp(h[:, 0])
        z1, z2 = z[:bs], z[bs:]
        cos_sim = F.cosine_similarity(z1.unsqueeze(1), z2.unsqueeze(0), dim=-1) / args.temp
        labels = torch.arange(bs, device=cos_sim.device)  # CLEAN: labels created on the device
        loss = F.cross_entropy(cos_sim, labels)
        if args.do_mlm:
            m = torch.bernoulli(torch.full(mlm_input_ids.shape, args.mlm_probability, device=mlm_input_ids.device)).bool() & (mlm_input_ids != PAD)  # CLEAN: default-generator RNG traced by Inductor
            mlm_labels = mlm_input_ids.masked_fill(~m, -100)
            mlm_input_ids.masked_fill_(m, MASK)  # HAZARD: static-address
            if m.any():  # HAZARD: dynamic-control-flow
                mlm_logits = self.lm_head(self.encoder(mlm_input_ids, attention_mask))
                loss = loss + args.mlm_weight * F.cross_entropy(mlm_logits.view(-1, VOCAB), mlm_labels.view(-1), ignore_index=-100)
        self.metrics["align"] = (F.normalize(z1, dim=-1) - F.normalize(z2, dim=-1)).norm(dim=1).pow(2).mean().item()  # HAZARD: host-sync
        return loss

def collate(batch, fixed_len=None):
    L = fixed_len or min(max(len(s) for s in batch), args.max_seq_length)
    ids = torch.full((len(batch), L), PAD, dtype=torch.long)
    for i, s in enumerate(batch):
        ids[i, :min(len(s), L)] = torch.tensor(s[:L])
    return ids, (ids != PAD).long()

def train(token_batches, sts_eval):
    model = SimCSE().cuda()
    cmodel = torch.compile(model, mode="reduce-overhead")
    opt = torch.optim.AdamW(model.parameters(), lr=args.learning_rate)
    for step, batch in enumerate(token_batches):
        ids, am = (t.cuda(non_blocking=True) for t in collate(batch))
        loss = cmodel(ids, am, ids.clone())  # HAZARD: dynamic-shape
        loss.backward()
        opt.step()
        opt.zero_grad()
        if step % 250 == 0:
            print(step, loss.item(), model.metrics.get("align"))  # CLEAN: loss read eagerly after backward
            model.eval()
            with torch.no_grad():
                ids, am = (t.cuda() for t in collate(sts_eval, fixed_len=args.max_seq_length))
                emb = cmodel.encoder(ids, am)[:, 0].clone()  # CLEAN: .encoder of the compiled wrapper is the plain module, run eagerly
            model.train()
