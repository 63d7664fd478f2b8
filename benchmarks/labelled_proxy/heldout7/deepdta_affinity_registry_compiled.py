"""DeepDTA drug-target binding-affinity service for virtual screening.

Stages (protein encoder, drug encoder, affinity head, ranking) live in a registry and
are compiled with a named preset; requests are dispatched to `_op_<name>` methods.
"""
import time

import torch
import torch.nn as nn

AA = "ACDEFGHIKLMNPQRSTVWYXBUZO"
SMILES_VOCAB = 64
MAX_PROT, MAX_SMILES, TOP_K = 1000, 100, 50

COMPILE_PRESETS = {
    "serve": dict(mode="reduce-overhead"),
    "tune": dict(mode="max-autotune"),
    "debug": dict(mode="max-autotune-no-cudagraphs"),
    "eager": None,
}
STAGES = {}


def stage(name):
    def deco(obj):
        STAGES[name] = obj
        return obj
    return deco


class ConvEncoder(nn.Module):
    def __init__(self, vocab, emb=128, filters=(32, 64, 96), kernel=8):
        super().__init__()
        self.emb = nn.Embedding(vocab + 1, emb, padding_idx=0)
        layers, c = [], emb
        for f in filters:
            layers += [nn.Conv1d(c, f, kernel), nn.ReLU()]
            c = f
        self.conv = nn.Sequential(*layers)

    def forward(self, tokens):
        return self.conv(self.emb(tokens).transpose(1, 2)).amax(-1)


@stage("protein")
def protein_encoder():
    return ConvEncoder(len(AA), kernel=12)


@stage("drug")
def drug_encoder():
    return ConvEncoder(SMILES_VOCAB, kernel=8)


@stage("head")
def affinity_head():
    return nn.Sequential(nn.Linear(192, 1024), nn.ReLU(), nn.Dropout(0.1), nn.Linear(1024, 1024), nn.ReLU(),
                         nn.Linear(1024, 512), nn.ReLU(), nn.Linear(512, 1), nn.Flatten(0))


@stage("rank")
def rank_topk(aff):
    t0 = time.perf_counter()  # HAZARD: host-code
    vals, idx = aff.topk(TOP_K)
    ids = idx.tolist()  # HAZARD: host-sync
    return vals, ids, time.perf_counter() - t0


def encode_protein(seq):
    return torch.tensor([[AA.index(a) + 1 for a in seq[:MAX_PROT]]])


def pad_to(tokens, n):
    return torch.nn.functional.pad(tokens, (0, n - tokens.shape[1]))


class AffinityService:
    def __init__(self, weights, library_tokens, preset="serve"):
        opts = COMPILE_PRESETS[preset]
        self.stages = {}
        for name, factory in STAGES.items():
            obj = factory() if name != "rank" else factory
            if isinstance(obj, nn.Module):
                obj.load_state_dict(weights[name])
                obj = obj.cuda().eval()
            self.stages[name] = obj if opts is None else torch.compile(obj, **opts)
        self.library = library_tokens.cuda()                          # (N, MAX_SMILES) padded SMILES

    def handle(self, request):
        with torch.no_grad():
            return getattr(self, f"_op_{request['op']}")(request)

    def _op_screen(self, req):
        p = self.stages["protein"](encode_protein(req["sequence"]).cuda())  # HAZARD: dynamic-shape
        d = self.stages["drug"](self.library)
        pair = torch.cat([d, p.expand(d.shape[0], -1)], -1)  # HAZARD: static-address
        aff = self.stages["head"](pair)
        vals, ids, seconds = self.stages["rank"](aff.clone())  # CLEAN: head output cloned before the next stage
        return {"hits": ids, "pKd": vals.cpu().tolist(), "rank_s": seconds}

    def _op_pair(self, req):
        seq = pad_to(encode_protein(req["sequence"]), MAX_PROT).cuda()
        p = self.stages["protein"](seq).clone()  # CLEAN: fixed padded length, cloned before the next stage
        d = self.stages["drug"](pad_to(req["smiles_tokens"], MAX_SMILES).cuda())
        aff = self.stages["head"](torch.cat([d, p], -1))  # CLEAN: d read right after its own stage
        return {"pKd": aff.item()}  # CLEAN: host read after the last compiled stage returned


def debug_service(weights, library_tokens, sequence):
    return AffinityService(weights, library_tokens, preset="debug").handle({"op": "screen", "sequence": sequence})
