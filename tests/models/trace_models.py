"""Models for `cgkit trace`: each hazard sits on a line the tests name (the `# HAZARD` comments), and
the clean ones must give no finding at all. Written as a user would, for CUDA: `device="cuda"`
where a tensor belongs on the GPU (the CPU trace maps it)."""

import random

import torch
from torch import nn
from torch.nn import functional as F


# -- clean -------------------------------------------------------------------------------------------
class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(32, 64), nn.GELU(), nn.Dropout(0.1), nn.Linear(64, 8))

    def forward(self, x):
        return self.net(x)


class ConvNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
            nn.Conv2d(8, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
        )
        self.head = nn.Linear(8, 10)

    def forward(self, x):
        return self.head(self.features(x).flatten(1))


class CausalTransformer(nn.Module):
    """Passes its causal flag: nn.TransformerEncoder reads nothing on the host."""

    def __init__(self, width=32, length=16):
        super().__init__()
        layer = nn.TransformerEncoderLayer(width, 4, 64, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.register_buffer("mask", nn.Transformer.generate_square_subsequent_mask(length))

    def forward(self, x):
        return self.encoder(x, mask=self.mask, is_causal=True)


class DictOutputs(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(32, 32)
        self.policy = nn.Linear(32, 4)
        self.value = nn.Linear(32, 1)

    def forward(self, x):
        h = torch.tanh(self.body(x))
        return {"logits": self.policy(h), "value": self.value(h).squeeze(-1), "hidden": (h, h.mean(0))}


# -- hazards inside torch.nn -------------------------------------------------------------------------
class MaskedTransformer(nn.Module):
    """Gives a causal mask without saying so: TransformerEncoder compares it on the host every call."""

    def __init__(self, width=32, length=16):
        super().__init__()
        layer = nn.TransformerEncoderLayer(width, 4, 64, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.register_buffer("mask", nn.Transformer.generate_square_subsequent_mask(length))

    def forward(self, x):
        return self.encoder(x, mask=self.mask)  # HAZARD CG103 nn-transformer-causal-mask


# -- hazards in user code ----------------------------------------------------------------------------
class ItemSync(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(32, 32)

    def forward(self, x):
        y = self.linear(x)
        scale = y.abs().max().item()  # HAZARD CG101
        return y / scale


class DataDependentShape(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(32, 32)

    def forward(self, x):
        y = self.linear(x)
        positive = y[y > 0]  # HAZARD CG203
        return positive.sum() + y.mean()


class PageableCopy(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(32, 32)
        self.offsets = [0.5] * 32

    def forward(self, x):
        offsets = torch.tensor(self.offsets)
        return self.linear(x) + offsets.to(x.device)  # HAZARD CG301


class HostRandom(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(32, 32)

    def forward(self, x):
        noise = torch.rand(32)  # HAZARD CG403
        return self.linear(x) + noise.to(x.device, non_blocking=True)


class TensorBranch(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(32, 32)

    def forward(self, x):
        y = self.linear(x)
        if y.sum() > 0:  # HAZARD CG201
            y = F.relu(y)
        return y


class ChangingScalar(nn.Module):
    """A Python number that changes on every call: a graph keeps the first."""

    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(32, 32)
        self.temperature = 1.0

    def forward(self, x):
        self.temperature *= 0.9
        return self.linear(x) / self.temperature  # HAZARD CG404


class PythonRandom(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(32, 32)

    def forward(self, x):
        keep = random.random()  # HAZARD CG403
        return self.linear(x) * keep


# -- factories ---------------------------------------------------------------------------------------
def batch():
    return (torch.randn(8, 32, device="cuda"),)


def images():
    return (torch.randn(4, 3, 8, 8, device="cuda"),)


def sequence():
    return (torch.randn(2, 16, 32, device="cuda"),)


def cross_entropy(output, x):
    return F.cross_entropy(output, torch.zeros(output.shape[0], dtype=torch.long, device=output.device))


def mlp():
    return MLP()


def convnet():
    return ConvNet()


def causal_transformer():
    return CausalTransformer()


def dict_outputs():
    return DictOutputs()


def masked_transformer():
    return MaskedTransformer()


def bare_encoder():
    """An nn.TransformerEncoder as it is: no line of the user's own runs in forward."""
    layer = nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True)
    return nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)


def encoder_inputs():
    return (torch.randn(2, 16, 32, device="cuda"), nn.Transformer.generate_square_subsequent_mask(16, device="cuda"))


def item_sync():
    return ItemSync()


def data_dependent_shape():
    return DataDependentShape()


def pageable_copy():
    return PageableCopy()


def host_random():
    return HostRandom()


def tensor_branch():
    return TensorBranch()


def changing_scalar():
    return ChangingScalar()


def python_random():
    return PythonRandom()


# -- library calls with an argument that avoids the hazard (cgkit.knowledge.LIBRARY_CALLS) ------------
class PaddedEncoder(nn.Module):
    """nn.TransformerEncoder's default nested-tensor fast path, in eval mode, with a padding mask."""

    def __init__(self):
        super().__init__()
        layer = nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, 2)

    def forward(self, x, padding):
        return self.encoder(x, src_key_padding_mask=padding)  # HAZARD CG103 nn-transformer-nested-fast-path


class OneHot(nn.Module):
    def forward(self, x):
        classes = x.argmax(-1)
        return F.one_hot(classes).float()  # HAZARD CG103 one-hot-num-classes


class OneHotSized(nn.Module):
    def forward(self, x):
        return F.one_hot(x.argmax(-1), num_classes=32).float()


class Policy(nn.Module):
    """A policy head that samples an action: torch.distributions validate their arguments by default."""

    def __init__(self):
        super().__init__()
        self.logits = nn.Linear(32, 6)

    def forward(self, x):
        dist = torch.distributions.Categorical(logits=self.logits(x))  # HAZARD CG201 distribution-validate-args
        return dist.sample()


class PackedLSTM(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.LSTM(32, 32, batch_first=True)

    def forward(self, x):
        lengths = [x.shape[1] - i for i in range(x.shape[0])]
        packed = nn.utils.rnn.pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
        out, _ = self.rnn(packed)
        return nn.utils.rnn.pad_packed_sequence(out, batch_first=True)[0]  # HAZARD CG102 pack-padded-sequence-lengths


def padded_encoder():
    return PaddedEncoder()


def padded_sequence():
    padding = torch.zeros(2, 16, dtype=torch.bool, device="cuda")
    padding[:, 12:] = True
    return (torch.randn(2, 16, 32, device="cuda"), padding)


def one_hot():
    return OneHot()


def one_hot_sized():
    return OneHotSized()


def policy():
    return Policy()


def packed_lstm():
    return PackedLSTM()


def short_sequences():
    return (torch.randn(4, 6, 32, device="cuda"),)
