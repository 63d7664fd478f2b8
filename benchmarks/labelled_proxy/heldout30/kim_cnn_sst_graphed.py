# Kim (2014) CNN sentence classifier on SST-2, torchtext 0.4-era data pipeline. The model is wrapped
# with torch.cuda.make_graphed_callables (fixed 56-token batches); Adadelta stays eager.
import torch
import torch.nn as nn
import torch.nn.functional as F
try:
    from torchtext.legacy import data  # TODO: remove after the 2.x migration (torchtext >= 0.12)
except ImportError:
    from torchtext import data

FIX_LEN, BATCH = 56, 50
emb_norms = []


class KimCNN(nn.Module):
    def __init__(self, vocab, dim=300, n_filters=100, sizes=(3, 4, 5), n_class=2, pad_idx=1):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim, padding_idx=pad_idx)
        self.convs = nn.ModuleList([nn.Conv2d(1, n_filters, (k, dim)) for k in sizes])
        self.dropout = nn.Dropout(0.5)
        self.fc = nn.Linear(len(sizes) * n_filters, n_class)
        self.pad_idx, self.n_calls = pad_idx, 0

    def forward(self, x):
        self.n_calls += 1  # HAZARD: host-code
        max_len = int((x != self.pad_idx).sum(1).max())  # HAZARD: host-sync
        x = x[:, : max(max_len, 5)]
        e = self.embed(x).unsqueeze(1)
        h = [F.max_pool1d(F.relu(conv(e)).squeeze(3), e.size(2) - conv.kernel_size[0] + 1).squeeze(2) for conv in self.convs]
        return self.fc(self.dropout(torch.cat(h, 1)))  # CLEAN: dropout on the default CUDA generator


def save_norm(module, inp, out):
    emb_norms.append(out.detach().abs().mean())


def build(train_path):
    TEXT = data.Field(batch_first=True, fix_length=FIX_LEN, lower=True)
    LABEL = data.LabelField()
    train = data.TabularDataset(train_path, "tsv", fields=[("text", TEXT), ("label", LABEL)])
    TEXT.build_vocab(train, vectors="glove.840B.300d")
    LABEL.build_vocab(train)
    it = data.BucketIterator(train, batch_size=BATCH, device=torch.device("cuda"), shuffle=True)
    model = KimCNN(len(TEXT.vocab)).cuda()
    model.embed.weight.data.copy_(TEXT.vocab.vectors)  # CLEAN: in-place copy before graphing
    model.register_forward_hook(save_norm)  # HAZARD: api-misuse
    sample = torch.ones(BATCH, FIX_LEN, dtype=torch.long, device="cuda")
    model = torch.cuda.make_graphed_callables(model, (sample,))
    model.fc.register_forward_hook(lambda m, i, o: None)  # CLEAN: hook registered after graphing
    return TEXT, it, model


def reload_vectors(model, TEXT, path):
    TEXT.vocab.load_vectors(path)
    model.embed.weight.data = TEXT.vocab.vectors.cuda()  # HAZARD: static-address


def train(train_path, epochs=25):
    TEXT, it, model = build(train_path)
    opt = torch.optim.Adadelta(model.parameters(), rho=0.95)
    for epoch in range(epochs):
        model.train()
        for batch in it:
            if batch.text.size(0) != BATCH:
                continue
            opt.zero_grad()
            logits = model(batch.text)  # CLEAN: positional tensor, as in sample_args
            loss = F.cross_entropy(logits, batch.label)
            loss.backward()
            opt.step()  # CLEAN: eager step, outside the graphs
            w = model.fc.weight.data
            w.copy_(w.renorm(2, 0, 3.0))
        if epoch == 10:
            reload_vectors(model, TEXT, "glove.42B.300d")
        print("epoch %d loss %.4f" % (epoch, loss.item()))
