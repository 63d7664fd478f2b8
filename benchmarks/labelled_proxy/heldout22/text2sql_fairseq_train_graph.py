"""fairseq-style seq2seq training for text-to-SQL (Spider-style: question + serialized schema -> SQL tokens),
with registries for criteria and LR schedulers and the whole train step captured in one CUDA graph."""
import torch
import torch.nn as nn
import torch.nn.functional as F

CRITERION_REGISTRY, LR_SCHEDULER_REGISTRY = {}, {}

def _make_register(registry):  # fairseq's register_criterion / register_lr_scheduler
    def register(name):
        def deco(cls):
            registry[name] = cls
            return cls
        return deco
    return register

register_criterion, register_lr_scheduler = _make_register(CRITERION_REGISTRY), _make_register(LR_SCHEDULER_REGISTRY)

@register_criterion("label_smoothed_cross_entropy")
class LabelSmoothedCrossEntropyCriterion:
    def __init__(self, padding_idx, label_smoothing=0.1, report_accuracy=True):
        self.padding_idx, self.eps, self.report_accuracy = padding_idx, label_smoothing, report_accuracy

    def __call__(self, model, sample):
        net_output = model(sample["src_tokens"], sample["prev_output_tokens"])
        lprobs = F.log_softmax(net_output, dim=-1).view(-1, net_output.size(-1))
        target = sample["target"].view(-1)
        pad_mask = target.eq(self.padding_idx)
        nll = -lprobs.gather(1, target[:, None]).squeeze(1)
        smooth = -lprobs.sum(-1)
        nll = nll.masked_fill(pad_mask, 0.0)  # CLEAN: masked_fill keeps the shape
        smooth = smooth.masked_fill(pad_mask, 0.0)
        eps_i = self.eps / (lprobs.size(-1) - 1)
        loss = ((1.0 - self.eps - eps_i) * nll + eps_i * smooth).sum()
        sample_size = int(target.ne(self.padding_idx).sum())  # HAZARD: host-sync
        logging_output = {"loss": loss.detach(), "sample_size": sample_size}
        if self.report_accuracy:
            keep = ~pad_mask
            logging_output["n_correct"] = lprobs.argmax(1).masked_select(keep).eq(target.masked_select(keep)).sum()  # HAZARD: dynamic-shape
        return loss / sample_size, logging_output

@register_lr_scheduler("inverse_sqrt")
class InverseSquareRootSchedule:
    def __init__(self, optimizer, lr=5e-4, warmup_updates=4000, warmup_init_lr=1e-7):
        self.optimizer, self.warmup_updates, self.warmup_init_lr = optimizer, warmup_updates, warmup_init_lr
        self.lr_step, self.decay_factor = (lr - warmup_init_lr) / warmup_updates, lr * warmup_updates ** 0.5
    def step_update(self, num_updates):
        lr = (self.warmup_init_lr + num_updates * self.lr_step if num_updates < self.warmup_updates
              else self.decay_factor * num_updates ** -0.5)
        for group in self.optimizer.param_groups:
            group["lr"] = lr  # HAZARD: optimizer
        return lr

class SchemaSeq2Seq(nn.Module):
    """Encoder input: `question <sep> table.col | table.col ...`; a segment embedding marks the schema part."""
    def __init__(self, vocab=32000, dim=512, pad=1, sep=2):
        super().__init__()
        self.sep, self.embed, self.segment = sep, nn.Embedding(vocab, dim, padding_idx=pad), nn.Embedding(2, dim)
        self.tf = nn.Transformer(dim, 8, 3, 3, 2048, dropout=0.1, batch_first=True)
        self.out = nn.Linear(dim, vocab)
    def forward(self, src, prev):
        seg = (src == self.sep).long().cumsum(1).clamp_max(1)
        causal = torch.triu(torch.full((prev.size(1), prev.size(1)), float("-inf"), device=src.device), 1)
        return self.out(self.tf(self.embed(src) + self.segment(seg), self.embed(prev), tgt_mask=causal, tgt_is_causal=True))

class GraphedTrainer:
    def __init__(self, args, model, criterion):
        self.args, self.model, self.criterion = args, model.cuda().train(), criterion
        self.optimizer = torch.optim.Adam(model.parameters(), lr=args["lr"], capturable=True)  # CLEAN: capturable Adam
        self.lr_scheduler = LR_SCHEDULER_REGISTRY[args["lr_scheduler"]](self.optimizer, lr=args["lr"])
        self.num_updates, self.graph = 0, torch.cuda.CUDAGraph()

    def _train_step(self):
        torch.manual_seed(self.args["seed"] + self.num_updates)  # HAZARD: rng
        self.optimizer.zero_grad(set_to_none=False)
        loss, log = self.criterion(self.model, self.static_sample)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.args["clip_norm"])  # CLEAN: clip_grad_norm_ is capturable
        self.optimizer.step()
        return loss.detach(), log

    def capture(self, sample):
        self.static_sample = {k: v.clone() for k, v in sample.items()}
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                self._train_step()
                self.num_updates += 1
        torch.cuda.current_stream().wait_stream(side)
        with torch.cuda.graph(self.graph):
            self.static_loss, self.static_log = self._train_step()
    def train_step(self, sample):
        for k, v in sample.items():
            self.static_sample[k].copy_(v)  # CLEAN: copy_ into the captured batch
        self.graph.replay()
        self.num_updates += 1
        self.lr_scheduler.step_update(self.num_updates)
        return self.static_loss

if __name__ == "__main__":
    args = dict(lr=5e-4, lr_scheduler="inverse_sqrt", seed=1, clip_norm=0.1)
    crit = CRITERION_REGISTRY["label_smoothed_cross_entropy"](padding_idx=1, label_smoothing=0.1)
    trainer = GraphedTrainer(args, SchemaSeq2Seq(), crit)
    make = lambda: {"src_tokens": torch.randint(3, 32000, (32, 256), device="cuda"),
                    "prev_output_tokens": torch.randint(3, 32000, (32, 96), device="cuda"),
                    "target": torch.randint(1, 32000, (32, 96), device="cuda")}
    trainer.capture(make())
    for _ in range(1000):
        loss = trainer.train_step(make())
