"""PEFT-style prompt tuning of a frozen RoBERTa-large over several GLUE tasks.

Each task owns a bank of soft-prompt embeddings prepended to the input. The
forward + loss is compiled with mode="reduce-overhead" and so is the AdamW step
(tensor LR). Label words are scored through an MLM-head verbalizer.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class PromptTuningModel(nn.Module):
    def __init__(self, backbone, tasks, num_virtual_tokens=20, label_word_ids=None):
        super().__init__()
        self.backbone = backbone.requires_grad_(False)
        d = backbone.config.hidden_size
        self.num_virtual_tokens = num_virtual_tokens
        self.prompts = nn.Parameter(torch.randn(len(tasks), num_virtual_tokens, d) * 0.02)
        self.register_buffer("label_word_ids", torch.as_tensor(label_word_ids))
        self.task_index = {t: i for i, t in enumerate(tasks)}

    def forward(self, input_ids, attention_mask, mask_pos, labels, task_id):
        emb = self.backbone.roberta.embeddings.word_embeddings(input_ids)
        prompt = self.prompts.index_select(0, task_id)  # CLEAN: task chosen by a device index tensor
        h = torch.cat([prompt.expand(emb.shape[0], -1, -1), emb], dim=1)
        pad = attention_mask.new_ones(emb.shape[0], self.num_virtual_tokens)
        out = self.backbone(inputs_embeds=h, attention_mask=torch.cat([pad, attention_mask], 1)).logits
        at_mask = out.gather(1, (mask_pos + self.num_virtual_tokens)[:, None, None].expand(-1, 1, out.shape[-1]))
        logits = at_mask.squeeze(1).index_select(1, self.label_word_ids)  # CLEAN: verbalizer ids live in a buffer
        loss = F.cross_entropy(logits, labels)
        if not torch.isfinite(loss):  # HAZARD: dynamic-control-flow
            loss = torch.zeros_like(loss)
        return loss, logits


def collate(tokenizer, features):
    batch = tokenizer.pad([{"input_ids": f["input_ids"]} for f in features], padding="longest", return_tensors="pt")
    batch["mask_pos"] = (batch["input_ids"] == tokenizer.mask_token_id).int().argmax(1)
    batch["labels"] = torch.tensor([f["label"] for f in features])
    return batch


class MultiTaskPromptTrainer:
    def __init__(self, model, tasks, lr=3e-1, warmup=500, total=30000, device="cuda"):
        self.model, self.device = model.to(device), device
        self.lr_t = torch.tensor(lr, device=device)
        self.opt = torch.optim.AdamW([model.prompts], lr=self.lr_t, weight_decay=1e-5, capturable=True)
        self.fwd = torch.compile(model, mode="reduce-overhead")
        self.opt_step = torch.compile(self.opt.step, mode="reduce-overhead")
        self.base_lr, self.warmup, self.total, self.step_no = lr, warmup, total, 0
        self.log_every = 100

    def _lr(self):
        if self.step_no < self.warmup:
            return self.base_lr * self.step_no / self.warmup
        return self.base_lr * 0.5 * (1 + math.cos(math.pi * self.step_no / self.total))

    def train_step(self, batch, task):
        task_id = torch.tensor([self.model.task_index[task]], device=self.device)  # CLEAN: eager upload outside the compiled forward
        loss, _ = self.fwd(batch["input_ids"], batch["attention_mask"], batch["mask_pos"], batch["labels"], task_id)  # HAZARD: dynamic-shape
        loss.backward()
        loss_val = loss.detach().clone()
        self.opt_step()
        self.opt.zero_grad(set_to_none=False)
        self.step_no += 1
        self.lr_t.fill_(self._lr())  # CLEAN: tensor LR updated in place
        if self.step_no % self.log_every == 0:
            print(f"step {self.step_no} task {task} loss {loss_val.item():.4f}")  # CLEAN: loss cloned before the compiled optimizer step
        return loss_val

    def reinit_task(self, task):
        i = self.model.task_index[task]
        vocab = self.model.backbone.roberta.embeddings.word_embeddings.weight
        init = vocab[torch.randint(0, 5000, (self.model.num_virtual_tokens,), device=self.device)].detach()
        new = self.model.prompts.detach().clone()
        new[i] = init
        self.model.prompts = nn.Parameter(new)  # HAZARD: static-address

    def set_weight_decay(self, wd):
        for g in self.opt.param_groups:
            g["weight_decay"] = wd  # HAZARD: optimizer
