"""`tinycuda train`: an MLP (784-256-10 by default) on MNIST, three ways.

    ops    tinycuda.nn modules, autograd, torch.optim.SGD
    capi   the kernels through libtinycuda's C ABI only (tinycuda.capi), with a
           hand-written backward: cross_entropy's gradient, linear_backward,
           relu_backward
    torch  plain torch.nn: the baseline

Every backend starts from the same weights (drawn with NumPy from --seed the
way torch.nn.Linear draws them) and sees the same batches, so with one seed
they end within a fraction of a point of each other. SGD with momentum,
softmax cross-entropy.
"""
import math
import time

import numpy as np

from . import mnist

BACKENDS = ("ops", "capi", "torch")


def add_arguments(p):
    p.add_argument("--backend", choices=BACKENDS + ("all",), default="all")
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--lr", type=float, default=0.02)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--hidden", type=int, nargs="+", default=[256], help="hidden layer sizes")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    p.add_argument("--data-dir", help="folder with the MNIST IDX files (raw or .gz, torchvision's "
                   "MNIST/raw layout too) for the full 60,000/10,000 set; default: embedded 5,000")
    p.add_argument("--json", metavar="FILE", help="write per-epoch results as JSON")


def init_weights(sizes, seed):
    """[(W [out, in], b [out]), ...] float32, U(-1/sqrt(in), 1/sqrt(in)) as torch.nn.Linear."""
    rng = np.random.default_rng(seed)
    layers = []
    for fan_in, fan_out in zip(sizes[:-1], sizes[1:]):
        bound = 1.0 / math.sqrt(fan_in)
        layers.append((rng.uniform(-bound, bound, (fan_out, fan_in)).astype(np.float32),
                       rng.uniform(-bound, bound, fan_out).astype(np.float32)))
    return layers


# ---------------------------------------------------------------------------
# backends: each is (step(x, y) -> (loss, correct), predict(x) -> labels)

def _torch_backend(kind, layers, args, device):
    import torch
    import torch.nn.functional as F

    if kind == "ops":
        import tinycuda.nn as tnn
        Linear, ReLU = tnn.Linear, tnn.ReLU
    else:
        Linear, ReLU = torch.nn.Linear, torch.nn.ReLU
    mods = []
    for i, (w, b) in enumerate(layers):
        lin = Linear(w.shape[1], w.shape[0])
        with torch.no_grad():
            lin.weight.copy_(torch.from_numpy(w))
            lin.bias.copy_(torch.from_numpy(b))
        mods += [lin] + ([ReLU()] if i + 1 < len(layers) else [])
    model = torch.nn.Sequential(*mods).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)

    def step(x, y):
        logits = model(x)
        loss = F.cross_entropy(logits, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss.detach(), (logits.argmax(1) == y).sum()

    def predict(x):
        with torch.no_grad():
            return model(x).argmax(1)

    return step, predict


def _capi_backend(layers, args, device):
    from . import capi

    if device == "cuda":
        import torch
        params = [(torch.from_numpy(w).cuda(), torch.from_numpy(b).cuda()) for w, b in layers]
        zeros = torch.zeros_like
    else:
        params = [(w.copy(), b.copy()) for w, b in layers]
        zeros = np.zeros_like
    momentum = [(zeros(w), zeros(b)) for w, b in params]

    def forward(x):
        acts = [x]
        for i, (w, b) in enumerate(params):
            h = capi.linear(acts[-1], w, b)
            acts.append(capi.relu(h) if i + 1 < len(params) else h)
        return acts

    def step(x, y):
        acts = forward(x)
        loss, grad = capi.cross_entropy(acts[-1], y, compute_grad=True)  # mean loss and its gradient, one pass
        correct = (acts[-1].argmax(1) == y).sum()
        for i in reversed(range(len(params))):
            w, _ = params[i]
            gx, gw, gb = capi.linear_backward(grad, acts[i], w, (i > 0, True, True))
            if i > 0:  # acts[i] = relu(h): [acts[i] > 0] == [h > 0]
                grad = capi.relu_backward(gx, acts[i])
            for p, g, buf in zip(params[i], (gw, gb), momentum[i]):  # torch.optim.SGD's update
                buf *= args.momentum
                buf += g
                p -= args.lr * buf
        return loss, correct

    def predict(x):
        return forward(x)[-1].argmax(1)

    return step, predict


# ---------------------------------------------------------------------------
# the loop

def train_one(backend, data, args, device, progress):
    x_tr, y_tr, x_te, y_te = data
    layers = init_weights([x_tr.shape[1], *args.hidden, 10], args.seed)
    if backend == "capi" and device == "cpu":
        to = lambda a: a  # noqa: E731  (NumPy in, NumPy out)
    else:
        import torch
        to = lambda a: torch.from_numpy(a).to(device)  # noqa: E731
    step, predict = (_capi_backend(layers, args, device) if backend == "capi"
                     else _torch_backend(backend, layers, args, device))
    xs_tr, ys_tr, xs_te, ys_te = to(x_tr), to(y_tr), to(x_te), to(y_te)
    order_rng = np.random.default_rng(args.seed + 1)
    n, bs = len(x_tr), args.batch_size
    history = []
    for epoch in range(1, args.epochs + 1):
        perm = order_rng.permutation(n)
        task = progress.add_task(f"{backend:5s} epoch {epoch}/{args.epochs}", total=math.ceil(n / bs))
        t0 = time.perf_counter()
        loss_sum, correct = 0.0, 0
        for s in range(0, n, bs):
            idx = to(perm[s:s + bs])
            loss, c = step(xs_tr[idx], ys_tr[idx])
            loss_sum += float(loss) * len(perm[s:s + bs])
            correct += int(c)
            progress.advance(task)
        test_acc = float((predict(xs_te) == ys_te).sum()) / len(y_te)
        _sync(device)
        seconds = time.perf_counter() - t0
        progress.remove_task(task)
        history.append(dict(epoch=epoch, loss=loss_sum / n, train_acc=correct / n, test_acc=test_acc,
                            seconds=seconds))
        progress.console.print(f"{backend:5s} [{device}] epoch {epoch:2d}  loss {loss_sum / n:.4f}  "
                               f"train acc {100 * correct / n:6.2f}%  test acc {100 * test_acc:6.2f}%  "
                               f"{seconds:6.2f} s")
    return history


def _sync(device):
    if device == "cuda":
        import torch
        torch.cuda.synchronize()


def run(args):
    import json

    from rich.console import Console
    from rich.progress import Progress
    from rich.table import Table

    console = Console()
    device = args.device
    if device == "auto" or device == "cuda":
        import torch
        cuda_ok = torch.cuda.is_available()
        if device == "cuda" and not cuda_ok:
            raise SystemExit("tinycuda train: --device cuda but no CUDA device is available")
        device = "cuda" if cuda_ok else "cpu"
    data = mnist.load_idx(args.data_dir) if args.data_dir else mnist.load_embedded()
    console.print(f"MNIST: {len(data[0])} train / {len(data[2])} test digits "
                  f"({'IDX files in ' + args.data_dir if args.data_dir else 'embedded'}); MLP "
                  f"{'-'.join(map(str, [784, *args.hidden, 10]))}, {args.epochs} epochs, batch {args.batch_size}, "
                  f"lr {args.lr}, momentum {args.momentum}, seed {args.seed}, device {device}")
    backends = BACKENDS if args.backend == "all" else (args.backend,)
    results = {}
    with Progress(console=console, transient=True) as progress:
        for b in backends:
            results[b] = train_one(b, data, args, device, progress)
    table = Table(title=f"tinycuda train on {device}")
    for col in ("backend", "final test acc", "final loss", "mean epoch s", "total s"):
        table.add_column(col, justify="right")
    for b, h in results.items():
        table.add_row(b, f"{100 * h[-1]['test_acc']:.2f}%", f"{h[-1]['loss']:.4f}",
                      f"{np.mean([e['seconds'] for e in h]):.3f}", f"{sum(e['seconds'] for e in h):.2f}")
    console.print(table)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": device, "args": {k: v for k, v in vars(args).items() if k != "func"},
                       "results": results}, f, indent=1)
    return 0
