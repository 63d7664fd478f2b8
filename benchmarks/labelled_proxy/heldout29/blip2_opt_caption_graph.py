"""BLIP-2 (ViT-g + Q-Former + OPT-2.7b) image captioning with a captured decode.

Image features go through the frozen ViT and the Q-Former; 32 query embeddings
are projected into OPT's embedding space and prefixed to the prompt. Vision and
the fixed-length greedy decode are captured as one CUDA graph per batch size.
"""
import torch


class Blip2Captioner:
    def __init__(self, model, processor, batch_size=8, max_new_tokens=30, prompt="a photo of", device="cuda"):
        self.model, self.processor, self.device = model.eval(), processor, device
        self.max_new_tokens, self.batch_size = max_new_tokens, batch_size
        self.prompt_ids = processor.tokenizer(prompt, add_special_tokens=True).input_ids
        self.static_prompt = torch.tensor([self.prompt_ids] * batch_size, device=device)  # CLEAN: uploaded once, before capture
        self.repetition_penalty = 1.5
        self.static_pixels = torch.zeros(batch_size, 3, 224, 224, device=device, dtype=torch.float16)
        self.vision_stream = torch.cuda.Stream()
        self.capture_stream = torch.cuda.Stream()
        self.pool = torch.cuda.graph_pool_handle()
        self.graph, self.decode_calls = None, 0

    def _query_embeds(self, pixels):
        with torch.cuda.stream(self.vision_stream):  # HAZARD: stream
            image_embeds = self.model.vision_model(pixels).last_hidden_state
        query = self.model.query_tokens.expand(pixels.shape[0], -1, -1)
        q = self.model.qformer(query_embeds=query, encoder_hidden_states=image_embeds).last_hidden_state
        return self.model.language_projection(q)

    def _generate(self, pixels):
        lm = self.model.language_model
        prefix = self._query_embeds(pixels)
        torch.cuda.empty_cache()  # HAZARD: memory
        prompt = self.static_prompt
        eos = torch.tensor([self.processor.tokenizer.eos_token_id], device=self.device)  # HAZARD: host-sync
        embeds = torch.cat([prefix, lm.get_input_embeddings()(prompt)], dim=1)
        out = lm(inputs_embeds=embeds, use_cache=True)
        past, logits = out.past_key_values, out.logits[:, -1]
        seen = torch.zeros_like(logits, dtype=torch.bool)
        tokens, done = [], torch.zeros(pixels.shape[0], dtype=torch.bool, device=self.device)
        for _ in range(self.max_new_tokens):
            self.decode_calls += 1  # HAZARD: host-code
            pen = self.repetition_penalty  # HAZARD: python-scalar
            logits = torch.where(seen, torch.where(logits > 0, logits / pen, logits * pen), logits)
            tok = logits.argmax(-1)
            tok = torch.where(done, eos.expand_as(tok), tok)  # CLEAN: finished rows padded with where, no branch
            done = done | (tok == eos)
            seen = seen.scatter(1, tok[:, None], True)  # CLEAN: scatter with a CUDA index
            tokens.append(tok)
            out = lm(input_ids=tok[:, None], past_key_values=past, use_cache=True)
            past, logits = out.past_key_values, out.logits[:, -1]
        return torch.stack(tokens, dim=1)

    @torch.inference_mode()
    def capture(self):
        self.capture_stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.capture_stream):
            for _ in range(2):
                self._generate(self.static_pixels)
        torch.cuda.current_stream().wait_stream(self.capture_stream)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph, pool=self.pool, stream=self.capture_stream):
            self.static_tokens = self._generate(self.static_pixels)

    @torch.inference_mode()
    def caption(self, images, repetition_penalty=1.5):
        self.repetition_penalty = repetition_penalty
        pixels = self.processor(images=images, return_tensors="pt").pixel_values
        n = pixels.shape[0]
        self.static_pixels[:n].copy_(pixels.to(self.device, torch.float16))  # CLEAN: copy into the static input, outside the capture
        if self.graph is None:
            self.capture()
        self.graph.replay()
        ids = self.static_tokens[:n].tolist()  # CLEAN: host read after the replay
        return [t.strip() for t in self.processor.batch_decode(ids, skip_special_tokens=True)]
