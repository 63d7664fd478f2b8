"""ProteinMPNN-style (Dauparas et al., Science 2022) autoregressive sequence
design: one decoding step per position is captured and replayed L times."""
import argparse
import torch
import torch.nn as nn
import torch.nn.functional as F

parser = argparse.ArgumentParser()
parser.add_argument("--num_seq_per_target", type=int, default=8)
parser.add_argument("--sampling_temp", type=str, default="0.1 0.2 0.3")
parser.add_argument("--omit_AAs", type=str, default="CX")
parser.add_argument("--bias_AA_jsonl", type=str, default="")
parser.add_argument("--hidden_dim", type=int, default=128)
parser.add_argument("--seed", type=int, default=37)
args = parser.parse_args()
ALPHABET = "ACDEFGHIKLMNPQRSTVWYX"

class Decoder(nn.Module):
    def __init__(self, H):
        super().__init__()
        self.W_s = nn.Embedding(len(ALPHABET), H)
        self.attn = nn.Linear(2 * H, 3 * H)
        self.ff = nn.Sequential(nn.Linear(H, 4 * H), nn.GELU(), nn.Linear(4 * H, H))
        self.W_out = nn.Linear(H, len(ALPHABET))

    def forward(self, h_V, S, decoded):
        h_S = self.W_s(S) * decoded.unsqueeze(-1)
        q, k, v = self.attn(torch.cat([h_V, h_S], -1)).chunk(3, -1)
        ctx = F.scaled_dot_product_attention(q, k, v, attn_mask=decoded.unsqueeze(1))
        return h_V + self.ff(ctx)

class GraphedSampler:
    def __init__(self, model, h_V, bias):
        self.model, self.h_V = model, h_V
        B, L, _ = h_V.shape
        self.S = torch.full((B, L), ALPHABET.index("X"), dtype=torch.long, device=h_V.device)
        self.decoded = torch.zeros(B, L, dtype=torch.bool, device=h_V.device)
        self.pos = torch.zeros(B, dtype=torch.long, device=h_V.device)
        self.bias = torch.tensor(bias, device=h_V.device)  # CLEAN: built once before capture
        self.omit_idx = [ALPHABET.index(a) for a in args.omit_AAs]
        self.temperature = float(args.sampling_temp.split()[0])
        self.sample_gen = torch.Generator(device=h_V.device)
        self.sample_gen.manual_seed(args.seed)

    def _step(self):
        ctx = self.model(self.h_V, self.S, self.decoded | torch.eye(self.S.size(1), dtype=torch.bool, device=self.S.device)[self.pos])
        h_t = torch.gather(ctx, 1, self.pos.view(-1, 1, 1).expand(-1, 1, ctx.size(-1))).squeeze(1)  # CLEAN: position gathered with a device index
        logits = self.model.W_out(h_t) + self.bias
        logits[:, self.omit_idx] = -1e8  # HAZARD: host-sync
        temp = self.temperature  # HAZARD: python-scalar
        probs = F.softmax(logits / temp, dim=-1)
        S_t = torch.multinomial(probs, 1, generator=self.sample_gen)  # HAZARD: rng
        self.S.scatter_(1, self.pos.view(-1, 1), S_t)  # CLEAN: in-place write at a device-side position
        self.decoded.scatter_(1, self.pos.view(-1, 1), True)
        return probs

    def capture(self):
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                self._step()
        torch.cuda.current_stream().wait_stream(side)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph, stream=torch.cuda.current_stream()):  # HAZARD: stream
            self.out_probs = self._step()

    @torch.no_grad()
    def sample(self, chain_mask):
        decoding_order = torch.argsort((chain_mask + 0.0001) * torch.abs(torch.randn(chain_mask.shape, device=chain_mask.device)))  # CLEAN: decoding order drawn eagerly before the replays
        self.S.fill_(ALPHABET.index("X")); self.decoded.zero_()
        all_probs = []
        for i in range(decoding_order.size(1)):
            self.pos.copy_(decoding_order[:, i])  # CLEAN: device position refreshed with copy_
            self.graph.replay()
            all_probs.append(self.out_probs)  # HAZARD: static-address
        return self.S.clone(), torch.stack(all_probs, 1)

def design(model, h_V, chain_mask, bias):
    sampler = GraphedSampler(model, h_V, bias)
    with torch.no_grad():
        sampler.capture()
    results = {}
    for temp in args.sampling_temp.split():
        sampler.temperature = float(temp)
        for _ in range(args.num_seq_per_target // h_V.size(0)):
            S, probs = sampler.sample(chain_mask)
            results.setdefault(temp, []).extend("".join(ALPHABET[a] for a in s) for s in S.tolist())  # CLEAN: host read after the replays
    return results
