"""GPU sequence-packing stage of a pre-training data pipeline.

Tokenized documents arrive as a padded [docs, max_len] block plus their lengths; the
packer concatenates them into fixed-length rows with document-boundary position ids
and a cu_seqlens vector for varlen attention. The packer is compiled with
backend="cudagraphs"; the validation packer uses plain torch.compile.
"""
import torch

PACK_CFG = {"row_len": 4096, "pad_to_multiple_of": 64, "pad_id": 0}


def _pack(tokens, lengths, max_doc_len):
    if (lengths > max_doc_len).any():  # HAZARD: dynamic-control-flow
        raise ValueError("document longer than the packing window")
    mult = PACK_CFG["pad_to_multiple_of"]  # HAZARD: python-scalar
    padded_len = (lengths + mult - 1) // mult * mult
    total = int(padded_len.sum())  # HAZARD: host-sync
    col = torch.arange(tokens.size(1), device=tokens.device)
    valid = col.unsqueeze(0) < lengths.unsqueeze(1)
    slot = col.unsqueeze(0) < padded_len.unsqueeze(1)
    flat = torch.where(valid, tokens, PACK_CFG["pad_id"])  # CLEAN: torch.where keeps the shape
    stream = flat[slot]  # HAZARD: dynamic-shape
    cu_seqlens = torch.cat([padded_len.new_zeros(1), padded_len.cumsum(0)])
    pos = torch.arange(total, device=tokens.device) - torch.repeat_interleave(cu_seqlens[:-1], padded_len, output_size=total)
    row_len = PACK_CFG["row_len"]
    n_rows = (total + row_len - 1) // row_len
    out = torch.full((n_rows * row_len,), PACK_CFG["pad_id"], dtype=tokens.dtype, device=tokens.device)
    out[:total] = stream
    pos_out = torch.zeros(n_rows * row_len, dtype=torch.long, device=tokens.device)
    pos_out[:total] = pos
    return out.view(n_rows, row_len), pos_out.view(n_rows, row_len), cu_seqlens


pack_train = torch.compile(_pack, backend="cudagraphs")
pack_valid = torch.compile(_pack)


class PackingStage:
    """Pipeline stage: consumes tokenized shards, yields packed rows."""

    def __init__(self, max_doc_len=4096, docs_per_block=256, validation=False):
        self.max_doc_len = max_doc_len
        self.docs_per_block = docs_per_block
        self.fn = pack_valid if validation else pack_train
        self.staging = torch.empty(docs_per_block, max_doc_len, dtype=torch.int32).pin_memory()
        self.len_staging = torch.empty(docs_per_block, dtype=torch.long).pin_memory()

    def __call__(self, shard_iter):
        for tokens_np, lengths_np in shard_iter:
            n = len(lengths_np)
            self.staging[:n].copy_(torch.from_numpy(tokens_np))
            self.len_staging[:n].copy_(torch.from_numpy(lengths_np))
            self.len_staging[n:] = 0
            tokens = self.staging.to("cuda", non_blocking=True)  # CLEAN: pinned staging buffer, eager copy
            lengths = self.len_staging.to("cuda", non_blocking=True)
            rows, pos, cu = self.fn(tokens, lengths, self.max_doc_len)  # CLEAN: always the full block; unused rows have length 0
            yield rows.clone(), pos.clone(), cu.clone()  # CLEAN: cloned before the next block is packed


def set_epoch(epoch: int):
    # curriculum: coarser padding once the loss has settled
    PACK_CFG["pad_to_multiple_of"] = 64 if epoch < 2 else 128


def check_packed(rows, pos, cu):
    """Cheap host-side invariants, run on a sample of blocks by the pipeline's health job."""
    assert rows.dim() == 2 and rows.size(1) == PACK_CFG["row_len"]
    used = int(cu[-1])  # CLEAN: eager read of a cloned output, outside the compiled packer
    assert used <= rows.numel(), "packed more tokens than row capacity"
    assert bool((pos >= 0).all()), "negative position id"
    return used / rows.numel()


def build_stage(validation: bool = False, **kwargs) -> PackingStage:
    stage = PackingStage(validation=validation, **kwargs)
    return stage
