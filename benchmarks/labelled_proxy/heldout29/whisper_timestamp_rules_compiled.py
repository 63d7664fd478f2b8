"""Whisper-style long-form transcription with timestamp rules.

The decoder forward and the token-selection function (logits processors + greedy
pick) are compiled with mode="max-autotune"; the audio encoder is compiled
without CUDA graphs. Segments are cut at timestamp tokens and the 30 s window
slides to the last predicted timestamp.
"""
import torch
import torch.nn.functional as F


class WhisperTimeStampLogitsProcessor:
    def __init__(self, gen_cfg, begin_index):
        self.eos_token_id = gen_cfg.eos_token_id
        self.no_timestamps_token_id = gen_cfg.no_timestamps_token_id
        self.timestamp_begin = gen_cfg.no_timestamps_token_id + 1
        self.begin_index = begin_index
        self.max_initial_timestamp_index = gen_cfg.max_initial_timestamp_index

    def __call__(self, input_ids, scores):
        scores[:, self.no_timestamps_token_id] = -float("inf")  # CLEAN: fixed token id, plain index assignment
        vocab = torch.arange(scores.shape[-1], device=scores.device)
        is_ts_tok = vocab >= self.timestamp_begin
        last_ts = input_ids[:, -1] >= self.timestamp_begin
        penult_ts = input_ids[:, -2] >= self.timestamp_begin
        both = (last_ts & penult_ts)[:, None]
        scores = torch.where(both & is_ts_tok, -float("inf"), scores)  # CLEAN: pair rule as a fixed-shape where
        for k, seq in enumerate(input_ids[:, self.begin_index:].tolist()):  # HAZARD: host-sync
            if len(seq) == 0:
                scores[k, : self.timestamp_begin] = -float("inf")
                scores[k, self.timestamp_begin + self.max_initial_timestamp_index + 1 :] = -float("inf")
        logprobs = F.log_softmax(scores.float(), dim=-1)
        ts_logprob = logprobs[:, self.timestamp_begin :].logsumexp(dim=-1)
        max_text = logprobs[:, : self.timestamp_begin].max(dim=-1).values
        if (ts_logprob > max_text).any():  # HAZARD: dynamic-control-flow
            scores[:, : self.timestamp_begin] = -float("inf")
        return scores


class LongFormTranscriber:
    def __init__(self, model, processor, gen_cfg, device="cuda"):
        self.model, self.processor, self.gen_cfg, self.device = model.eval(), processor, gen_cfg, device
        self.encode = torch.compile(model.encoder, mode="max-autotune-no-cudagraphs")
        model.decoder.forward = torch.compile(model.decoder.forward, mode="max-autotune")
        self.select = torch.compile(self._select, mode="max-autotune")
        self.ts_proc = WhisperTimeStampLogitsProcessor(gen_cfg, begin_index=4)

    def _select(self, input_ids, logits):
        self.ts_proc.begin_index = self.prompt_len  # HAZARD: python-scalar
        scores = self.ts_proc(input_ids, logits[:, -1].clone())
        return scores.argmax(dim=-1, keepdim=True)

    @torch.inference_mode()
    def transcribe(self, audio, sampling_rate=16000, condition_on_prev=True):
        seek, segments, prev = 0, [], []
        window = 30 * sampling_rate
        while seek < audio.shape[-1]:
            feats = self.processor(audio[seek: seek + window], sampling_rate=sampling_rate,
                                   return_tensors="pt").input_features.to(self.device)
            enc = self.encode(feats)  # CLEAN: compiled without CUDA graphs
            prompt = self.gen_cfg.decoder_prompt_ids(prev[-224:] if condition_on_prev else [])
            self.prompt_len = len(prompt)
            tokens = torch.tensor([prompt], device=self.device)
            for _ in range(self.gen_cfg.max_new_tokens):
                logits = self.model.decoder(tokens, encoder_hidden_states=enc)  # HAZARD: dynamic-shape
                nxt = self.select(tokens, logits[:, -1:].clone())  # HAZARD: dynamic-shape
                tokens = torch.cat([tokens, nxt.clone()], dim=1)
                if nxt.item() == self.gen_cfg.eos_token_id:  # CLEAN: eager check between compiled calls
                    break
            new = tokens[0, self.prompt_len:].tolist()  # CLEAN: eager read after decoding finished
            ts = [t for t in new if t >= self.ts_proc.timestamp_begin]
            last = (ts[-1] - self.ts_proc.timestamp_begin) if ts else 1500
            segments.append((seek / sampling_rate, self.processor.tokenizer.decode(new, decode_with_timestamps=True)))
            prev.extend(t for t in new if t < self.gen_cfg.eos_token_id)
            seek += int(last * 0.02 * sampling_rate) or window
        return segments
