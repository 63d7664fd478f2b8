"""One pipeline rank of a GPT pre-training job with an interleaved (virtual) schedule on
Transformer Engine: the rank owns two model chunks of two FP8 layers each, and all per-layer
forward/backward graphs for 4 microbatches are captured in one TE make_graphed_callables call
with `_order`. The data-parallel group reduces the FP8 amax statistics."""
import torch
import torch.distributed as dist
import torch.nn as nn
import transformer_engine.pytorch as te
from transformer_engine.common.recipe import DelayedScaling, Format

HIDDEN, FFN, HEADS, SEQ, MB, N_MB = 4096, 16384, 32, 2048, 1, 4


class DeepNormLayer(nn.Module):
    """Post-LN residual with a DeepNet-style alpha that the trainer warms up."""

    def __init__(self, alpha=1.0):
        super().__init__()
        self.alpha = alpha
        self.attn = te.MultiheadAttention(HIDDEN, HEADS, attention_dropout=0.0, params_dtype=torch.bfloat16)
        self.mlp = te.LayerNormMLP(HIDDEN, FFN, params_dtype=torch.bfloat16)
        self.norm = te.LayerNorm(HIDDEN, params_dtype=torch.bfloat16)

    def forward(self, x):
        a = self.alpha  # HAZARD: python-scalar
        x = self.norm(a * x + self.attn(x, attn_mask_type="causal"))
        return x + self.mlp(x)


def log_shapes(module, args):
    print("pre-forward", module.__class__.__name__, [tuple(t.shape) for t in args])


def build_and_graph(dp_group):
    recipe = DelayedScaling(fp8_format=Format.HYBRID, amax_history_len=1024, amax_compute_algo="max")
    layers = [DeepNormLayer().cuda() for _ in range(4)]
    layers[0].register_forward_pre_hook(log_shapes)  # HAZARD: api-misuse
    order = [1] * N_MB + [2] * N_MB + [-2] * N_MB + [-1] * N_MB
    sample_args = tuple((torch.randn(SEQ, MB, HIDDEN, dtype=torch.bfloat16, device="cuda", requires_grad=True),)
                        for _ in range(len(layers) * N_MB))
    with torch.autocast("cuda", dtype=torch.bfloat16):  # HAZARD: autocast-cache
        fwd = te.make_graphed_callables(
            tuple(layers), sample_args, num_warmup_iters=3,
            enabled=True, recipe=recipe, cache_quantized_params=True, amax_reduction_group=dp_group,
            _order=order, _num_layers_per_chunk=[2, 2],
        )
    layers[3].register_forward_hook(lambda m, i, o: None)  # CLEAN: hook added after graphing
    return layers, fwd, recipe


class VirtualStage:
    def __init__(self, dp_group):
        self.dp_group = dp_group
        self.layers, self.fwd, self.recipe = build_and_graph(dp_group)

    def chunk_forward(self, chunk, x, mb):
        for j in range(2):
            idx = (chunk * 2 + j) * N_MB + mb
            x = self.fwd[idx](x, is_first_microbatch=(mb == 0))  # CLEAN: is_first_microbatch passed on every replay
        return x

    def train_step(self, recv_acts, grad_from_next):
        outs = []
        with te.autocast(enabled=True, recipe=self.recipe, amax_reduction_group=self.dp_group):  # CLEAN: replay under te.autocast with the capture recipe
            for chunk in range(2):
                for mb in range(N_MB):
                    outs.append(self.chunk_forward(chunk, recv_acts[chunk][mb], mb))
        for o, g in zip(reversed(outs), reversed(grad_from_next)):
            o.backward(g)

    @torch.no_grad()
    def validate(self, acts):
        with te.autocast(enabled=True, recipe=self.recipe, amax_reduction_group=self.dp_group):
            y = acts
            for chunk in range(2):
                for j in range(2):
                    y = self.fwd[(chunk * 2 + j) * N_MB](y)  # HAZARD: api-misuse
        return y

    def on_step_end(self, step, warmup=2000):
        for layer in self.layers:
            layer.alpha = min(1.0, 0.5 + 0.5 * step / warmup)


if __name__ == "__main__":
    dist.init_process_group("nccl")
    stage = VirtualStage(dist.new_group(list(range(dist.get_world_size()))))
