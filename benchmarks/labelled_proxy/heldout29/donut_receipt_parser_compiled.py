"""Donut-style OCR-free receipt parsing (Swin encoder + BART decoder).

The vision encoder and the one-token decoder step are compiled with
mode="reduce-overhead". A fixed-size history buffer feeds the repetition penalty.
The generated sequence is turned into JSON with the processor's token2json.
"""
import time

import torch
import torch.nn as nn


class DonutDecoderStep(nn.Module):
    def __init__(self, decoder, lm_head, eos_token_id, max_length=768):
        super().__init__()
        self.decoder, self.lm_head, self.eos_token_id = decoder, lm_head, eos_token_id
        self.repetition_penalty = 1.0
        self.max_length = max_length
        self.step_times = []

    def forward(self, token, cache_position, history, memory, cache):
        t0 = time.perf_counter()  # HAZARD: host-code
        h = self.decoder(token, encoder_hidden_states=memory, cache_position=cache_position, past_key_values=cache)
        logits = self.lm_head(h[:, -1]).float()
        prev = logits.gather(1, history)
        penalty = self.repetition_penalty  # HAZARD: python-scalar
        prev = torch.where(prev < 0, prev * penalty, prev / penalty)
        logits = logits.scatter(1, history, prev)  # CLEAN: scatter with a CUDA index buffer of fixed size
        nxt = logits.argmax(-1, keepdim=True)
        if (nxt == self.eos_token_id).all():  # HAZARD: dynamic-control-flow
            nxt = torch.full_like(nxt, self.eos_token_id)
        self.step_times.append(t0)
        return nxt


class ReceiptParser:
    PROMPTS = {"cord": "<s_cord-v2>", "sroie": "<s_sroie>", "docvqa": "<s_docvqa><s_question>{q}</s_question><s_answer>"}

    def __init__(self, model, processor, device="cuda"):
        self.model, self.processor, self.device = model.eval(), processor, device
        self.step = DonutDecoderStep(model.decoder.model.decoder, model.decoder.lm_head,
                                     processor.tokenizer.eos_token_id).to(device)
        self.encode = torch.compile(model.encoder, mode="reduce-overhead")
        self.step_fn = torch.compile(self.step, mode="reduce-overhead")

    @torch.inference_mode()
    def parse(self, image, task="cord", question="", keep_aspect=False):
        pixel_values = self.processor(image, do_resize=not keep_aspect, return_tensors="pt").pixel_values
        memory = self.encode(pixel_values.to(self.device, torch.float16))  # HAZARD: dynamic-shape
        memory = memory.last_hidden_state.clone()  # CLEAN: cloned before the decoder's compiled call
        prompt = self.PROMPTS[task].format(q=question)
        ids = self.processor.tokenizer(prompt, add_special_tokens=False, return_tensors="pt").input_ids.to(self.device)
        self.step.repetition_penalty = 1.2 if task == "docvqa" else 1.0
        cache = self.model.decoder.new_static_cache(1, self.step.max_length)
        history = torch.zeros(1, 64, dtype=torch.long, device=self.device)
        self.model.decoder(ids[:, :-1], encoder_hidden_states=memory, past_key_values=cache)
        token, out = ids[:, -1:], [ids]
        for pos in range(ids.shape[1] - 1, self.step.max_length - 1):
            cache_position = torch.tensor([pos], device=self.device)  # CLEAN: built eagerly before the compiled call
            nxt = self.step_fn(token, cache_position, history, memory, cache).clone()
            history = torch.roll(history, -1, dims=1)
            history[:, -1:] = nxt
            out.append(nxt)
            token = nxt
            if nxt.item() == self.step.eos_token_id:  # CLEAN: eager check between compiled calls
                break
        seq = self.processor.batch_decode(torch.cat(out, dim=1).tolist())[0]  # CLEAN: eager read after decoding
        seq = seq.replace(self.processor.tokenizer.eos_token, "").replace(self.processor.tokenizer.pad_token, "")
        return self.processor.token2json(seq.split(self.PROMPTS[task].split("{")[0], 1)[-1])

    def mean_step_latency_ms(self):
        ts = self.step.step_times
        return 1000.0 * (ts[-1] - ts[0]) / max(len(ts) - 1, 1)
