"""Direct Preference Optimization trainer with a frozen reference model.

Policy and reference forwards are both compiled with reduce-overhead; the reference
runs under no_grad.  Sequence log-probs of the chosen and rejected completions feed
the DPO sigmoid loss.  The optimizer step is compiled too.
"""
import torch
import torch.nn.functional as F


def seq_logprob(logits, labels, mask):
    logp = F.log_softmax(logits[:, :-1].float(), dim=-1)
    tok = logp.gather(-1, labels[:, 1:, None]).squeeze(-1)
    return (tok * mask[:, 1:]).sum(-1)


class DPOTrainer:
    def __init__(self, policy, reference, lr=5e-7, beta=0.1, bucket=1024):
        self.policy = torch.compile(policy.cuda().train(), mode="reduce-overhead")
        self.reference = torch.compile(reference.cuda().eval().requires_grad_(False), mode="reduce-overhead")
        self.opt = torch.optim.AdamW(policy.parameters(), lr=torch.tensor(lr), foreach=True)
        self.beta = beta
        self.bucket = bucket
        self.compiled_step = torch.compile(self.opt.step, mode="reduce-overhead")
        self.loss_fn = torch.compile(self._loss, mode="reduce-overhead")

    def _loss(self, pol_c, pol_r, ref_c, ref_r):
        margin = (pol_c - ref_c) - (pol_r - ref_r)
        beta = self.beta  # HAZARD: python-scalar
        loss = -F.logsigmoid(beta * margin).mean()
        self.reward_acc = (margin > 0).float().mean().item()  # HAZARD: host-sync
        return loss

    def _pad(self, ids):
        out = torch.zeros(ids.shape[0], self.bucket, dtype=ids.dtype, device="cuda")
        out[:, : ids.shape[1]] = ids[:, : self.bucket]
        return out

    def step(self, batch):
        ids = torch.cat([batch["chosen"], batch["rejected"]]).cuda()
        mask = torch.cat([batch["chosen_mask"], batch["rejected_mask"]]).cuda().float()
        ids, mask = self._pad(ids), self._pad(mask)  # CLEAN: padded to one static bucket
        n = batch["chosen"].shape[0]
        with torch.no_grad():
            ref_lp = seq_logprob(self.reference(ids), ids, mask).clone()  # CLEAN: cloned before the policy runs
        pol_lp = seq_logprob(self.policy(ids), ids, mask)
        loss = self.loss_fn(pol_lp[:n], pol_lp[n:], ref_lp[:n], ref_lp[n:])
        loss.backward()
        out = loss.detach().clone()  # CLEAN: cloned before the compiled optimizer step
        self.compiled_step()
        self.opt.zero_grad(set_to_none=True)
        return out

    @torch.no_grad()
    def evaluate(self, batches):
        wins = []
        for batch in batches:
            ids = torch.cat([batch["chosen"], batch["rejected"]]).cuda()
            mask = torch.cat([batch["chosen_mask"], batch["rejected_mask"]]).cuda().float()
            n = batch["chosen"].shape[0]
            pol_logits = self.policy(ids)  # HAZARD: dynamic-shape
            ref_logits = self.reference(ids)
            pol_lp = seq_logprob(pol_logits, ids, mask)  # HAZARD: static-address
            ref_lp = seq_logprob(ref_logits, ids, mask)
            wins.append(((pol_lp[:n] - ref_lp[:n]) > (pol_lp[n:] - ref_lp[n:])).float().mean().item())
        return sum(wins) / max(len(wins), 1)


def fit(trainer: DPOTrainer, loader, epochs=1, warmup=100):
    step = 0
    for _ in range(epochs):
        for batch in loader:
            loss = trainer.step(batch)
            step += 1
            for g in trainer.opt.param_groups:
                g["lr"].fill_(5e-7 * min(1.0, step / warmup))  # CLEAN: tensor LR updated in place
            if step % 500 == 0:
                trainer.beta = trainer.beta * 0.9
                print(step, loss.item())  # CLEAN: eager, outside the compiled code
        for g in trainer.opt.param_groups:
            g["weight_decay"] = 0.0  # HAZARD: optimizer
