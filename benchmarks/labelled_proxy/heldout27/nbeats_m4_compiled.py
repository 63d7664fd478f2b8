"""N-BEATS (Oreshkin et al., ICLR 2020) generic model on M4 Hourly, after the
ElementAI reference experiment; training and prediction are compiled with
mode="max-autotune"."""
import argparse
import numpy as np
import torch
import torch.nn as nn

parser = argparse.ArgumentParser()
parser.add_argument("--horizon", type=int, default=48)
parser.add_argument("--lookback", type=int, default=7, help="history = lookback * horizon")
parser.add_argument("--history_size", type=float, default=10.0)
parser.add_argument("--stacks", type=int, default=30)
parser.add_argument("--layers", type=int, default=4)
parser.add_argument("--layer_size", type=int, default=512)
parser.add_argument("--batch_size", type=int, default=1024)
parser.add_argument("--iterations", type=int, default=15000)
parser.add_argument("--learning_rate", type=float, default=0.001)
parser.add_argument("--eval_batch", type=int, default=100)
args = parser.parse_args()

class NBeatsBlock(nn.Module):
    def __init__(self, input_size, theta_size):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(input_size, args.layer_size)] + [nn.Linear(args.layer_size, args.layer_size) for _ in range(args.layers - 1)])
        self.basis_parameters = nn.Linear(args.layer_size, theta_size)
        self.input_size = input_size

    def forward(self, x):
        for layer in self.layers:
            x = torch.relu(layer(x))
        theta = self.basis_parameters(x)
        return theta[:, :self.input_size], theta[:, -args.horizon:]

class NBeats(nn.Module):
    def __init__(self, input_size):
        super().__init__()
        self.blocks = nn.ModuleList([NBeatsBlock(input_size, input_size + args.horizon) for _ in range(args.stacks)])

    def forward(self, x, input_mask):
        residuals, input_mask = x.flip(dims=(1,)), input_mask.flip(dims=(1,))
        forecast = x[:, -1:]
        for block in self.blocks:
            backcast, block_forecast = block(residuals)
            residuals = (residuals - backcast) * input_mask
            forecast = forecast + block_forecast
        return forecast

def divide_no_nan(a, b):
    result = a / b
    result[result != result] = .0  # CLEAN: boolean-mask assignment of a scalar (masked_fill path)
    result[result == np.inf] = .0
    return result

def smape_2_loss(forecast, target, mask):
    return 200 * torch.mean(divide_no_nan(torch.abs(forecast - target), torch.abs(forecast.data) + torch.abs(target.data)) * mask)

@torch.compile(mode="max-autotune")
def training_loss_fn(model, x, x_mask, y, y_mask):
    training_loss = smape_2_loss(model(x, x_mask), y, y_mask)
    if np.isnan(float(training_loss)):  # HAZARD: host-sync
        raise FloatingPointError("training loss is NaN")
    return training_loss

@torch.compile(mode="max-autotune")
def predict(model, x, x_mask):
    return model(x, x_mask)

def sample_batch(timeseries, insample_size):
    x, x_mask = np.zeros((args.batch_size, insample_size)), np.zeros((args.batch_size, insample_size))
    y, y_mask = np.zeros((args.batch_size, args.horizon)), np.zeros((args.batch_size, args.horizon))
    for i, sid in enumerate(np.random.randint(len(timeseries), size=args.batch_size)):
        ts = timeseries[sid]
        cut = np.random.randint(low=max(1, len(ts) - int(args.history_size * args.horizon)), high=len(ts), size=1)[0]  # CLEAN: the sampler runs eagerly on the host
        ins = ts[max(0, cut - insample_size):cut]
        x[i, -len(ins):], x_mask[i, -len(ins):] = ins, 1.0
        outs = ts[cut:min(len(ts), cut + args.horizon)]
        y[i, :len(outs)], y_mask[i, :len(outs)] = outs, 1.0
    return [torch.from_numpy(a).float().cuda() for a in (x, x_mask, y, y_mask)]

@torch.no_grad()
def forecast_all(model, x, x_mask):
    forecasts = []
    for i in range(0, x.size(0), args.eval_batch):
        f = predict(model, x[i:i + args.eval_batch], x_mask[i:i + args.eval_batch])  # HAZARD: dynamic-shape
        forecasts.append(f)  # HAZARD: static-address
    return torch.cat(forecasts).cpu().numpy()  # CLEAN: copied to the host in eager code

def train(timeseries, test_x, test_mask):
    insample = args.lookback * args.horizon
    model = NBeats(insample).cuda()
    optimizer = torch.optim.Adam(model.parameters(), lr=args.learning_rate)
    for i in range(1, args.iterations + 1):
        model.train()
        loss = training_loss_fn(model, *sample_batch(timeseries, insample))
        optimizer.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        for param_group in optimizer.param_groups:
            param_group["lr"] = args.learning_rate * 0.5 ** (i // (args.iterations // 10))  # CLEAN: optimizer runs eagerly
    model.eval()
    return forecast_all(model, test_x, test_mask)
