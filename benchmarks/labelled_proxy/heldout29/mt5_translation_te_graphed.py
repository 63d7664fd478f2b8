"""mT5-style translation fine-tuning with the encoder stack on Transformer Engine (FP8).

Encoder layers are `te.TransformerLayer`s wrapped with stochastic depth; the
wrappers are graphed with TE's make_graphed_callables (TE >= 2.9 keyword names,
`cache_quantized_params=True`, attention mask declared in `sample_kwargs`).
The decoder and the LM head run eagerly.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
import transformer_engine.pytorch as te
from transformer_engine.common.recipe import DelayedScaling, Format


class StochasticDepthLayer(nn.Module):
    def __init__(self, layer, drop_prob):
        super().__init__()
        self.layer, self.drop_prob = layer, drop_prob
        self.gen = torch.Generator(device="cuda")
        self.gen.manual_seed(17)

    def forward(self, hidden_states, attention_mask=None, is_first_microbatch=None):
        out = self.layer(hidden_states, attention_mask=attention_mask, is_first_microbatch=is_first_microbatch)
        p = self.drop_prob  # HAZARD: python-scalar
        keep = (torch.rand(hidden_states.shape[1], 1, 1, device=hidden_states.device, generator=self.gen) >= p)  # HAZARD: rng
        return hidden_states + (out - hidden_states) * keep / (1 - p)


class MT5TranslationModel(nn.Module):
    def __init__(self, cfg, decoder, max_drop=0.1):
        super().__init__()
        self.embed = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.encoder_layers = nn.ModuleList([
            StochasticDepthLayer(te.TransformerLayer(cfg.d_model, cfg.d_ff, cfg.num_heads, layer_type="encoder",
                                                     self_attn_mask_type="padding", params_dtype=torch.bfloat16),
                                 max_drop * i / (cfg.num_layers - 1)) for i in range(cfg.num_layers)])
        self.decoder, self.lm_head = decoder, nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        self.act_norms = {}


def build_and_graph(model, cfg, seq_len=256, batch=16):
    recipe = DelayedScaling(fp8_format=Format.HYBRID, amax_history_len=16, amax_compute_algo="max")
    for i, layer in enumerate(model.encoder_layers):
        layer.register_forward_pre_hook(lambda m, args, i=i: model.act_norms.__setitem__(i, args[0].norm()))  # HAZARD: api-misuse
    x = torch.randn(seq_len, batch, cfg.d_model, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    mask = torch.zeros(batch, 1, 1, seq_len, dtype=torch.bool, device="cuda")
    n = len(model.encoder_layers)
    with torch.autocast("cuda", dtype=torch.bfloat16):  # HAZARD: autocast-cache
        graphed = te.make_graphed_callables(tuple(model.encoder_layers), tuple((x,) for _ in range(n)),
                                            sample_kwargs=tuple({"attention_mask": mask} for _ in range(n)),
                                            enabled=True, recipe=recipe, cache_quantized_params=True)
    model.encoder_layers = nn.ModuleList(graphed)
    model.encoder_layers[-1].register_forward_hook(lambda m, i, o: None)  # CLEAN: hook added after graphing
    return recipe


def anneal_stochastic_depth(model, step, total, max_drop=0.1):
    for i, layer in enumerate(model.encoder_layers):
        layer.drop_prob = max_drop * min(1.0, step / total) * i / (len(model.encoder_layers) - 1)


def train_step(model, recipe, batch, opt, micro_idx, tokenizer):
    src = batch["input_ids"].cuda(non_blocking=True)
    pad_mask = (src == tokenizer.pad_token_id)[:, None, None, :]
    h = model.embed(src).transpose(0, 1).contiguous()
    with te.autocast(enabled=True, recipe=recipe):  # CLEAN: replay inside te.autocast with the capture recipe
        for layer in model.encoder_layers:
            h = layer(h, attention_mask=pad_mask, is_first_microbatch=(micro_idx == 0))  # CLEAN: declared keyword plus is_first_microbatch
    memory = h.transpose(0, 1)
    dec = model.decoder(input_ids=batch["decoder_input_ids"].cuda(), encoder_hidden_states=memory,
                        encoder_attention_mask=~pad_mask[:, 0, 0]).last_hidden_state
    logits = model.lm_head(dec).float()
    loss = F.cross_entropy(logits.flatten(0, 1), batch["labels"].cuda().flatten(), ignore_index=-100)
    loss.backward()
    if micro_idx == batch["accum"] - 1:
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
    return loss.item()  # CLEAN: eager read after backward, outside the graphs


def fit(model, cfg, loader, opt, tokenizer, total_steps):
    recipe = build_and_graph(model, cfg)
    for step, batch in enumerate(loader):
        anneal_stochastic_depth(model, step, total_steps)
        train_step(model, recipe, batch, opt, step % batch["accum"], tokenizer)
