"""Attribute extraction from marketplace product titles (brand, colour, size, material).

Stage 1 tags title tokens with BIO labels; stage 2 maps every tagged token to a
canonical attribute value ("navy" -> blue, "XL" -> size 44, ...). Pipelines are
registered by name; a subclass compiles its stages with CUDA graphs for the
listing-ingest service, the base class runs them eagerly for the QA tool.
"""
import torch
import torch.nn as nn

TAGS = ["O", "B-BRAND", "I-BRAND", "B-COLOR", "I-COLOR", "B-SIZE", "B-MATERIAL", "I-MATERIAL"]
O_TAG, VOCAB, N_VALUES, L = 0, 60000, 3000, 40
PIPELINES = {}


class Tagger(nn.Module):
    def __init__(self, d: int = 256):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, d, padding_idx=0)
        self.lstm = nn.LSTM(d, d // 2, batch_first=True, bidirectional=True)
        self.out = nn.Linear(d, len(TAGS))

    def forward(self, ids):
        h, _ = self.lstm(self.emb(ids))
        return self.out(h)


class Normalizer(nn.Module):
    def __init__(self, d: int = 128):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, d)
        self.tag_emb = nn.Embedding(len(TAGS), d)
        self.head = nn.Linear(d, N_VALUES)


class ExtractPipeline:
    stages = ("tag", "normalize")

    def __init__(self):
        self.tagger = Tagger().cuda().eval()
        self.norm = Normalizer().cuda().eval()
        for st in self.stages:
            setattr(self, st, getattr(self, "_" + st))

    def _tag(self, ids):
        conf, tags = self.tagger(ids).softmax(-1).max(-1)
        if (conf < 0.5).all():  # HAZARD: dynamic-control-flow
            tags = torch.zeros_like(tags)                  # title in an unsupported language
        print("tagged batch, mean confidence", conf.mean())  # HAZARD: host-code
        return tags, conf

    def _normalize(self, ids, tags):
        h = self.norm.embed(ids) + self.norm.tag_emb(tags)
        spans = h[tags != O_TAG]  # HAZARD: dynamic-shape
        return self.norm.head(spans).argmax(-1)

    @torch.no_grad()
    def run(self, ids):
        tags, conf = self.tag(ids)
        tags_kept = tags.clone()  # CLEAN: cloned before the next compiled stage
        values = self.normalize(ids, tags_kept)
        low_conf = conf < 0.6  # HAZARD: static-address
        return tags_kept, values.clone(), low_conf


def register(name):
    def deco(cls):
        PIPELINES[name] = cls
        return cls
    return deco


register("qa-tool")(ExtractPipeline)


@register("ingest")
class CompiledExtractPipeline(ExtractPipeline):
    compile_opts = {"mode": "max-autotune"}

    def __init__(self):
        super().__init__()
        for st in self.stages:
            setattr(self, st, torch.compile(getattr(self, "_" + st), **self.compile_opts))


@register("backfill")
class BackfillPipeline(CompiledExtractPipeline):
    compile_opts = {"mode": "max-autotune-no-cudagraphs"}

    @torch.no_grad()
    def run(self, ids):
        tags, conf = self.tag(ids)
        values = self.normalize(ids, tags)
        return tags, values, conf < 0.6  # CLEAN: no-cudagraphs twin, outputs are not graph-owned


def ingest(listings, kind: str = "ingest"):
    pipe = PIPELINES[kind]()
    out = []
    for ids in listings:                                   # titles padded to L tokens, 128 per batch
        tags, values, low = pipe.run(ids)
        out.append((tags.cpu(), values.cpu(), low.cpu()))  # CLEAN: copied to the host right after run()
    return out


if __name__ == "__main__":
    batches = [torch.randint(1, VOCAB, (128, L), device="cuda") for _ in range(4)]
    print(len(ingest(batches)), len(ingest(batches, "qa-tool")), len(ingest(batches, "backfill")))
