"""GRPO policy loss: group-relative advantages, clipped importance ratio, k3 KL penalty.

The loss kernel is compiled with the dynamo `cudagraphs` backend (no inductor), the
rollout statistics helper with the default backend.  Rollouts arrive as fixed
(n_prompts * group, max_new) blocks from the sampler.
"""
import time

import torch

from torch import nn


class GRPOLoss(nn.Module):
    def __init__(self, group=8, clip_eps=0.2, kl_coef=0.04):
        super().__init__()
        self.group = group
        self.clip_eps = clip_eps
        self.kl_coef = kl_coef
        self.last_call = 0.0

    def advantages(self, rewards):
        r = rewards.view(-1, self.group)
        std = r.std(dim=1, keepdim=True)
        if (std < 1e-6).all():  # HAZARD: dynamic-control-flow
            return torch.zeros_like(rewards)
        adv = (r - r.mean(dim=1, keepdim=True)) / (std + 1e-4)
        return adv.flatten()

    def forward(self, logp, old_logp, ref_logp, rewards, mask):
        self.last_call = time.time()  # HAZARD: host-code
        adv = self.advantages(rewards)[:, None]
        ratio = torch.exp(logp - old_logp)
        eps = self.clip_eps  # HAZARD: python-scalar
        surr = torch.minimum(ratio * adv, ratio.clamp(1 - eps, 1 + eps) * adv)
        log_r = ref_logp - logp
        kl = torch.exp(log_r) - log_r - 1
        per_tok = -(surr - self.kl_coef * kl)  # CLEAN: kl_coef is fixed for the run
        per_tok = torch.where(mask, per_tok, torch.zeros_like(per_tok))  # CLEAN: device select
        return per_tok.sum() / mask.sum().clamp_min(1)


def normalise_rewards_inplace(rewards):
    rewards.sub_(rewards.mean()).div_(rewards.std() + 1e-6)  # HAZARD: static-address
    return rewards


def rollout_stats(rewards, lengths):
    solved = rewards > 0.5
    print("solve rate", solved.float().mean().item())  # CLEAN: default backend, no CUDA graphs
    return lengths[solved].float().mean()  # CLEAN: default backend, no CUDA graphs


class GRPOStep:
    def __init__(self, policy, ref_policy, group=8):
        self.policy, self.ref = policy, ref_policy
        self.loss_mod = GRPOLoss(group=group)
        self.loss_fn = torch.compile(self.loss_mod, backend="cudagraphs")
        self.norm_fn = torch.compile(normalise_rewards_inplace, backend="cudagraphs")
        self.stats_fn = torch.compile(rollout_stats)
        self.opt = torch.optim.AdamW(policy.parameters(), lr=1e-6)

    def token_logp(self, model, seqs, n_prompt):
        logits = model(seqs)[:, n_prompt - 1:-1].float()
        return torch.log_softmax(logits, -1).gather(-1, seqs[:, n_prompt:, None]).squeeze(-1)

    def __call__(self, seqs, n_prompt, rewards, mask, old_logp):
        rewards = self.norm_fn(rewards)
        logp = self.token_logp(self.policy, seqs, n_prompt)
        with torch.no_grad():
            ref_logp = self.token_logp(self.ref, seqs, n_prompt)
        loss = self.loss_fn(logp, old_logp, ref_logp, rewards, mask)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.policy.parameters(), 1.0)
        self.opt.step()  # CLEAN: eager optimizer step
        self.opt.zero_grad(set_to_none=True)
        return loss.detach().item()  # CLEAN: eager read after backward

    def log_rollouts(self, rewards, lengths):
        return self.stats_fn(rewards, lengths).item()

    def schedule(self, step, total):
        self.loss_mod.clip_eps = 0.2 + 0.1 * step / total
