"""`tinycuda gpt train` and `tinycuda gpt generate`: a GPT-2-style model
(tinycuda.nn.gpt) trained on bytes of text, by default 1.57 MB of
Shakespeare shipped in the package (tinycuda/data/README.md says where from).

    train     --backend tinycuda|torch|compile|all: the same model, seed and
              batches on tinycuda's kernels, torch's, or torch.compile's; a
              progress bar with loss, tokens/s and (on a known GPU) MFU, a
              validation loss every --eval-every steps, a summary table, and
              with --plot a PNG of the loss curves. --save writes a checkpoint
              (config, model, optimizer, step, LR schedule; --save-every N
              also every N steps) that --resume continues and that loads into
              the model on any backend.
    generate  a checkpoint's model, a prompt, KV-cache decoding, temperature
              and top-k sampling; tokens/s.

Several processes: `torchrun --nproc-per-node N -m tinycuda gpt train ...`
trains data-parallel (torch's DistributedDataParallel: NCCL on GPUs, one per
process, gloo on the CPU; the gradients' all-reduce overlaps the backward):
each rank takes its share of a global batch of N x --batch-size windows, so N
ranks train as one process with N times the batch. Rank 0 prints, plots and
saves; tokens/s counts every rank's tokens, MFU is per GPU.

Tokens are bytes (ids 0-255): no tokenizer to download, any UTF-8 file works
(--data). On CUDA the forward runs under torch.autocast (bfloat16), the
parameters and the optimizer stay float32 (with --master-weights the model is
held in bfloat16 and runs without autocast, the optimizer keeping float32
copies; the --cuda-graph step keeps autocast, whose casts then change
nothing); on the CPU everything is float32.
AdamW (betas 0.9, 0.95; weight decay on the matrices only; tinycuda.optim's
multi-tensor kernel with the clipping inside its pass on the tinycuda
backend, torch.optim's after clip_grad_norm_ on the others), linear warm-up
then cosine decay to a tenth, gradient-norm clipping at 1.
"""
import contextlib
import dataclasses
import json
import lzma
import math
import pathlib
import time

import numpy as np

BACKENDS = ("tinycuda", "torch", "compile")
DATA = pathlib.Path(__file__).parent / "data" / "shakespeare.txt.xz"
# dense bf16 tensor-core peaks, for MFU (NVIDIA's datasheets, SXM parts)
PEAK_BF16 = {"H100": 989e12, "H200": 989e12, "A100": 312e12}


def add_arguments(p):
    sub = p.add_subparsers(dest="gpt_command", required=True)
    t = sub.add_parser("train", help="train the GPT on text (default: Shakespeare, shipped)")
    t.add_argument("--backend", choices=BACKENDS + ("all",), default="tinycuda")
    t.add_argument("--preset", choices=("tiny", "gpt2"), default="tiny",
                   help="tiny: 2 layers of 128 (a CPU minute); gpt2: GPT-2 124M's shape")
    for name in ("n_layer", "n_head", "n_embd", "context"):
        t.add_argument("--" + name.replace("_", "-"), type=int, help=f"override the preset's {name}")
    t.add_argument("--steps", type=int, default=300)
    t.add_argument("--batch-size", type=int, default=16)
    t.add_argument("--lr", type=float, default=1e-3)
    t.add_argument("--warmup", type=int, default=20, help="steps of linear warm-up")
    t.add_argument("--weight-decay", type=float, default=0.1)
    t.add_argument("--grad-clip", type=float, default=1.0, help="max gradient norm (0: no clipping)")
    t.add_argument("--eval-every", type=int, default=50)
    t.add_argument("--eval-batches", type=int, default=4)
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    t.add_argument("--data", metavar="FILE", help="any UTF-8 text (default: the shipped Shakespeare)")
    t.add_argument("--save", metavar="FILE", help="checkpoint at the end (with --backend all, one per backend: "
                   "FILE's stem + _<backend>)")
    t.add_argument("--save-every", type=int, metavar="N", help="also checkpoint every N steps, to --save's "
                   "name + _step<k> (a run cut short resumes from the last)")
    t.add_argument("--resume", metavar="FILE", help="continue a checkpoint up to --steps (its schedule: "
                   "lr, warm-up and cosine length are the first run's)")
    t.add_argument("--cuda-graph", action="store_true", help="capture a step's forward and backward once in a CUDA "
                   "graph and replay it (one GPU; the tinycuda and torch backends): no per-kernel launch cost")
    t.add_argument("--master-weights", action="store_true", help="tinycuda backend: bfloat16 parameters, float32 "
                   "master weights and moments in the optimizer (no autocast: nothing to cast)")
    t.add_argument("--plot", metavar="PNG", help="loss curves of every backend run (needs matplotlib)")
    t.add_argument("--json", metavar="FILE", help="write the results as JSON")
    g = sub.add_parser("generate", help="sample text from a checkpoint")
    g.add_argument("checkpoint")
    g.add_argument("--prompt", default="\n")
    g.add_argument("--tokens", type=int, default=200, help="new tokens (bytes) per sample")
    g.add_argument("--batch-size", type=int, default=1, help="samples decoded together")
    g.add_argument("--temperature", type=float, default=0.8)
    g.add_argument("--top-k", type=int, default=40)
    g.add_argument("--kernels", choices=("tinycuda", "torch", "compile", "all"), default="tinycuda",
                   help="compile: torch's under torch.compile(dynamic=True); all: each in turn, after a warm-up")
    g.add_argument("--json", metavar="FILE", help="write tokens/s per kernel set as JSON")
    g.add_argument("--seed", type=int, default=0)
    g.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")


def run(args):
    return train(args) if args.gpt_command == "train" else generate(args)


# ---------------------------------------------------------------------------
# data: bytes of text, random windows (the same for every backend)

def load_text(path=None):
    raw = pathlib.Path(path).read_bytes() if path else lzma.decompress(DATA.read_bytes())
    return np.frombuffer(raw, dtype=np.uint8)


class Batches:
    """Windows of context + 1 bytes: the first 90% of the text for training, the
    rest for validation. Step s's training windows come from a generator seeded
    with (seed, s), so a resumed run sees the batches the whole run would have;
    the validation windows are fixed. Under torchrun each rank takes its rows
    of a batch of world x batch windows."""

    def __init__(self, data, batch, context, seed):
        if len(data) < 2 * (context + 1) * 10:
            raise ValueError(f"gpt: the text has {len(data)} bytes, too few for a context of {context}")
        cut = len(data) * 9 // 10
        self.train, self.val = data[:cut], data[cut:]
        self.batch, self.context = batch, context
        self.seed = seed

    def training(self, step, rank=0, world=1):
        """This rank's rows of step's global batch (world x batch windows): ranks together see what one
        process with world x batch would."""
        return self._draw(self.train, (self.seed, step), rank, world)

    def validation(self, i, rank=0, world=1):
        """Validation batch i (fixed whatever the seed), this rank's rows as training()'s."""
        return self._draw(self.val, (12345, i), rank, world)

    def _draw(self, data, seed, rank, world):
        offsets = np.random.default_rng(seed).integers(0, len(data) - self.context - 1, world * self.batch)
        w = np.stack([data[o:o + self.context + 1] for o in offsets[rank * self.batch:(rank + 1) * self.batch]])
        w = w.astype(np.int64)
        # contiguous copies: torch copies a strided array to the GPU through a
        # contiguous pageable temporary, whose copy waits for the stream's
        # queued work (to_device)
        return np.ascontiguousarray(w[:, :-1]), np.ascontiguousarray(w[:, 1:])


# ---------------------------------------------------------------------------
# training

def to_device(device, pair):
    """A batch's (inputs, targets), NumPy arrays, as tensors on device: on CUDA from pinned memory,
    asynchronously. A copy from pageable memory waits for the stream's queued work first (the CUDA
    runtime's staging), which would drain the queue at every step's start."""
    import torch
    if device != "cuda":
        return [torch.from_numpy(t) for t in pair]
    return [torch.from_numpy(t).pin_memory().to(device, non_blocking=True) for t in pair]


def config_from(args):
    from .nn.gpt import PRESETS
    cfg = dataclasses.replace(PRESETS[args.preset])
    for name in ("n_layer", "n_head", "n_embd", "context"):
        if getattr(args, name) is not None:
            cfg = dataclasses.replace(cfg, **{name: getattr(args, name)})
    return cfg


def _device(choice):
    import torch
    if choice == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if choice == "cuda" and not torch.cuda.is_available():
        raise SystemExit("gpt: --device cuda but torch sees no GPU")
    return choice


class Dist:
    """torchrun's process group, or one process: rank, world size; the loss averaged over ranks."""

    def __init__(self, device):
        import os

        import torch
        self.world = int(os.environ.get("WORLD_SIZE", "1"))
        self.rank = int(os.environ.get("RANK", "0"))
        self.local = int(os.environ.get("LOCAL_RANK", "0"))
        if self.world > 1:
            if device == "cuda":
                torch.cuda.set_device(self.local)
            torch.distributed.init_process_group("nccl" if device == "cuda" else "gloo")

    def wrap(self, model, device):
        if self.world == 1:
            return model
        import torch
        # no buffer to broadcast each step: the model's only one, its position ids, is a constant
        return torch.nn.parallel.DistributedDataParallel(model, device_ids=[self.local] if device == "cuda" else None,
                                                         broadcast_buffers=False)

    def mean(self, value):
        """value (a 0-dim tensor) averaged over the ranks, as a float."""
        return float(self.average(value))

    def average(self, value):
        """value (a 0-dim tensor) averaged over the ranks, still on its device: nothing waits for it."""
        if self.world > 1:
            import torch
            value = value.detach().clone()
            torch.distributed.all_reduce(value)  # SUM: gloo has no AVG
            value /= self.world
        return value.detach()

    def in_sync(self, model):
        """Whether every rank holds the same parameters (a float64 checksum of them all)."""
        if self.world == 1:
            return True
        import torch
        total = torch.stack([p.detach().double().sum() for p in model.parameters()]).sum().reshape(1)
        every = [torch.zeros_like(total) for _ in range(self.world)]
        torch.distributed.all_gather(every, total)
        return all(torch.equal(t, every[0]) for t in every)

    def close(self):
        if self.world > 1:
            import torch
            torch.distributed.destroy_process_group()


def _sync(device):
    import torch
    if device == "cuda":
        torch.cuda.synchronize()


def _peak_flops(device):
    import torch
    if device != "cuda":
        return None
    name = torch.cuda.get_device_name()
    return next((v for k, v in PEAK_BF16.items() if k in name), None)


def flops_per_token(model):
    """Training FLOPs a token: 6 per parameter (forward + backward) plus
    attention's 12 n_layer context n_embd (PaLM's appendix B, as nanoGPT counts)."""
    c = model.cfg
    return 6 * model.num_params() + 12 * c.n_layer * c.context * c.n_embd


def _optimizer(model, args, backend):
    """AdamW, weight decay on the matrices only; tinycuda's clips inside its
    step (max_grad_norm), torch's after clip_grad_norm_ (see `clip`)."""
    import torch
    decay = [p for p in model.parameters() if p.dim() >= 2]
    rest = [p for p in model.parameters() if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": args.weight_decay}, {"params": rest, "weight_decay": 0.0}]
    if backend == "tinycuda":
        from .optim import AdamW
        return AdamW(groups, lr=args.lr, betas=(0.9, 0.95), max_grad_norm=args.grad_clip or None,
                     master_weights=getattr(args, "master_weights", False))
    return torch.optim.AdamW(groups, lr=args.lr, betas=(0.9, 0.95))


def clip(model, opt, args):
    """clip_grad_norm_ where the optimizer does not clip itself."""
    import torch
    if args.grad_clip and not hasattr(opt, "max_grad_norm"):
        torch.nn.utils.clip_grad_norm_(model.parameters(), args.grad_clip)


# name fragments of kernels that are not tinycuda's: torch's own, Triton's, cuBLAS/cuDNN/CUTLASS's
FOREIGN = ("at::", "c10::", "pytorch_flash", "triton_", "nvjet", "xmma", "cutlass", "cublas", "cudnn", "sm90_",
           "sm80_", "ampere_")


def kernel_owners(prof):
    """Whose are a torch.profiler run's kernels: (total us by owner, "tinycuda", "other" or "memcpy/memset";
    the other owners' kernels as a Counter of (launching op, kernel name[:90]) -> us; every kernel's us and
    launches, two Counters by name[:110]). A kernel is someone else's when its name is torch's, Triton's or
    a library's (FOREIGN); its launching op is the innermost op whose CPU range holds the launch (by op,
    tinycuda's GEMMs run from an autograd node would be misfiled). Memcpy and memset are apart."""
    import collections
    import torch
    ops = sorted((e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CPU
                  and not e.name.startswith(("cuda", "cudaLaunch"))), key=lambda e: e.time_range.start)
    total, foreign, by_kernel, calls = (collections.Counter() for _ in range(4))
    for e in ops:
        for k in e.kernels:
            kind = ("memcpy/memset" if k.name.startswith(("Memcpy", "Memset")) else
                    "other" if any(f in k.name.lower() for f in FOREIGN) else "tinycuda")
            total[kind] += k.duration
            by_kernel[k.name[:110]] += k.duration
            calls[k.name[:110]] += 1
            if kind == "other":
                foreign[(e.name, k.name[:90])] += k.duration
    return total, foreign, by_kernel, calls


def _lr(step, schedule):
    """Linear warm-up, then cosine to a tenth at `steps`, a tenth after it. schedule: {lr, warmup, steps},
    the first run's (a checkpoint keeps it: a resumed run with more --steps goes on at the last rate, not
    on a cosine stretched mid-way)."""
    lr, warmup, steps = schedule["lr"], schedule["warmup"], schedule["steps"]
    if step < warmup:
        return lr * (step + 1) / warmup
    t = (step - warmup) / max(1, steps - warmup)
    return lr * (0.1 + 0.45 * (1 + math.cos(math.pi * min(1.0, t))))


def build(cfg, backend, device, seed, master_weights=False):
    """The model on `backend`'s kernels, its weights drawn from `seed` (the same for every backend).
    master_weights (tinycuda): the model held and run in bf16 (autocast then changes nothing), the
    optimizer stepping float32 copies: the same initial weights as the other backends', rounded once."""
    import torch
    from .nn.gpt import GPT
    torch.manual_seed(seed)
    model = GPT(cfg, kernels="tinycuda" if backend == "tinycuda" else "torch").to(device)
    return model.to(torch.bfloat16) if master_weights and backend == "tinycuda" else model


class GraphedStep:
    """A training step's forward and backward, captured once in a CUDA graph and
    replayed (--cuda-graph): one launch a step instead of hundreds from Python,
    so the GPU never waits on the host. The batch goes in through static input
    tensors and the loss comes out in a static one; every replay writes the
    gradients into the same .grad tensors, which the optimizer (outside the
    graph: its learning rate changes each step) reads, so nothing may set them
    to None."""

    def __init__(self, model, x, y):
        import torch
        self.x, self.y = x.clone(), y.clone()

        def amp():  # no cast cache: a cached bf16 weight would be the graph's, stale after the optimizer's step
            return torch.autocast("cuda", torch.bfloat16, cache_enabled=False)

        side = torch.cuda.Stream()  # the warm-up (lazy initialisation, the allocator) outside the capture
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(2):
                model.zero_grad(set_to_none=True)
                with amp():
                    loss = model(self.x, self.y)
                loss.backward()
        torch.cuda.current_stream().wait_stream(side)
        model.zero_grad(set_to_none=True)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            with amp():
                self.loss = model(self.x, self.y).float()
            self.loss.backward()

    def __call__(self, x, y):
        self.x.copy_(x)
        self.y.copy_(y)
        self.graph.replay()
        return self.loss


def train_one(backend, cfg, args, text, device, dist, progress=None):
    import torch
    model = build(cfg, backend, device, args.seed, args.master_weights)
    opt = _optimizer(model, args, backend)
    step0 = 0
    schedule = {"lr": args.lr, "warmup": args.warmup, "steps": args.steps}
    if args.resume:
        # on the CPU first: loaded onto the GPU, the optimizer's step counters would stay there
        # (torch keeps them where they come), and reading them would sync once per parameter
        ck = torch.load(args.resume, map_location="cpu", weights_only=True)
        model.load_state_dict(ck["model"])
        opt.load_state_dict(ck["optimizer"])
        step0, schedule = ck["step"], ck["schedule"]
        if step0 >= args.steps:
            raise SystemExit(f"gpt: {args.resume} is at step {step0} already; ask for more --steps")
    forward = dist.wrap(model, device)
    forward = torch.compile(forward) if backend == "compile" else forward
    batches = Batches(text, args.batch_size, cfg.context, args.seed)
    # A model held in bf16 (--master-weights) needs no autocast: every cast would be the identity, and
    # autocast's Python hop into each tinycuda op cost GPT-2 ~5 ms of host time a step (H200: 20.2-28.7 ->
    # 15.8-22.7 ms to queue a step; BENCHMARKS, GPT step 12)
    bf16_model = next(model.parameters()).dtype == torch.bfloat16  # build()'s --master-weights model
    amp = contextlib.nullcontext() if bf16_model or device != "cuda" else torch.autocast("cuda", torch.bfloat16)

    def loss_of(x, y):
        with amp:
            return forward(x, y).float()

    def validate():
        with torch.no_grad():
            total = sum(loss_of(*to_device(device, batches.validation(i, dist.rank, dist.world)))
                        for i in range(args.eval_batches))
            return dist.mean(total / args.eval_batches)

    graphed = None
    if args.cuda_graph and backend != "compile":  # compile: its own mode="reduce-overhead"
        if device != "cuda" or dist.world > 1:
            raise SystemExit("gpt: --cuda-graph needs CUDA and one process (DDP's all-reduce hooks are not captured)")
        graphed = GraphedStep(model, *to_device(device, batches.training(step0)))
    per_token = flops_per_token(model)
    peak = _peak_flops(device)
    tokens = dist.world * args.batch_size * cfg.context  # a step's, every rank's
    log = {"backend": backend, "world_size": dist.world, "steps": [], "loss": [], "val_steps": [], "val_loss": [],
           "seconds": []}
    task = progress.add_task(backend, total=args.steps - step0) if progress else None

    # A step's loss is read one step late: it goes to the host by an
    # asynchronous copy and an event behind the step's kernels, and the host
    # waits on that event only once the next step is queued, so the GPU never
    # idles between steps. A read right away (float(loss)) left it idle for the
    # host's batch and first launches each step: GPT-2 124M on the H200,
    # torch.compile 444,797 -> 460,060 tokens/s, tinycuda --master-weights
    # 413,802 -> 442,584 (and with the batch copied by to_device: 482,297 and
    # 473,779; a strided batch still went through a pageable temporary then:
    # Batches._draw).
    # A step's seconds are from the previous step's end to its own, as the
    # host sees them: the queue's throughput.
    def queue_read(loss):
        loss = dist.average(loss)
        if device != "cuda":
            return loss, None
        done = torch.cuda.Event()
        loss = loss.to("cpu", non_blocking=True)  # into pinned memory
        done.record()
        return loss, done

    def finish(step, loss, done):
        nonlocal t_last
        if done is not None:
            done.synchronize()
        now = time.perf_counter()
        dt, t_last = now - t_last, now
        loss = float(loss)
        log["steps"].append(step)
        log["loss"].append(loss)
        log["seconds"].append(dt)
        if progress:
            mfu = f"  MFU {per_token * tokens / dt / (peak * dist.world):5.1%}" if peak else ""  # a GPU's
            val = f"  val {log['val_loss'][-1]:.3f}" if log["val_loss"] else ""
            progress.update(task, advance=1, description=f"{backend:8s} loss {loss:.3f}{val}  "
                                                         f"{tokens / dt:,.0f} tok/s{mfu}")

    _sync(device)
    t_last, pending = time.perf_counter(), None
    for step in range(step0, args.steps):
        for group in opt.param_groups:
            group["lr"] = _lr(step, schedule)
        x, y = to_device(device, batches.training(step, dist.rank, dist.world))
        if graphed:
            loss = graphed(x, y)
        else:
            loss = loss_of(x, y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
        clip(model, opt, args)
        opt.step()
        queued = (step, *queue_read(loss))
        if pending:
            finish(*pending)
        pending = queued
        evaluate = (step + 1) % args.eval_every == 0 or step + 1 == args.steps
        checkpoint = dist.rank == 0 and args.save and args.save_every and (step + 1) % args.save_every == 0 and \
            step + 1 < args.steps
        if evaluate or checkpoint:
            finish(*pending)
            pending = None
            if evaluate:
                log["val_steps"].append(step)
                log["val_loss"].append(validate())
            if checkpoint:
                save(_checkpoint_path(args, backend, step + 1), cfg, model, opt, step + 1, schedule)
            t_last = time.perf_counter()  # the next step's time leaves these out
    if progress:
        progress.remove_task(task)
    # throughput over the steps after the first 10% (compilation, allocator and cuBLAS warm-up)
    timed = log["seconds"][len(log["seconds"]) // 10:] or log["seconds"]
    log["tokens_per_s"] = tokens * len(timed) / sum(timed)
    log["mfu"] = per_token * log["tokens_per_s"] / (peak * dist.world) if peak else None  # a GPU's
    log["params"] = model.num_params()
    log["replicas_in_sync"] = dist.in_sync(model)
    if args.save and dist.rank == 0:
        log["checkpoint"] = str(save(_checkpoint_path(args, backend), cfg, model, opt, args.steps, schedule))
    return log


def _checkpoint_path(args, backend, step=None):
    """--save's path; with --backend all, + _<backend>; a periodic one, + _step<k>."""
    path = pathlib.Path(args.save)
    suffix = (f"_{backend}" if args.backend == "all" else "") + (f"_step{step}" if step is not None else "")
    return path.with_name(f"{path.stem}{suffix}{path.suffix}")


def save(path, cfg, model, opt, step, schedule):
    """The checkpoint: config, model and optimizer state, the step reached and the LR schedule."""
    import torch
    torch.save({"config": dataclasses.asdict(cfg), "model": model.state_dict(), "optimizer": opt.state_dict(),
                "step": step, "schedule": schedule}, path)
    return path


def train(args):
    import rich.console
    import rich.progress
    import rich.table
    import torch

    device = _device(args.device)
    dist = Dist(device)
    cfg = config_from(args)
    text = load_text(args.data)
    backends = BACKENDS if args.backend == "all" else (args.backend,)
    console = rich.console.Console(quiet=dist.rank != 0)
    ranks = f", {dist.world} processes (DDP)" if dist.world > 1 else ""
    amp = "bf16 autocast" + ("; tinycuda: a bf16 model, no autocast" if args.master_weights else "")
    console.print(f"gpt: {cfg}  on {device}"
                  f"{' (' + torch.cuda.get_device_name() + ', ' + amp + ')' if device == 'cuda' else ''}{ranks}, "
                  f"{len(text):,} bytes of text, batch {args.batch_size} x {cfg.context}"
                  f"{' a rank' if dist.world > 1 else ''}, {args.steps} steps")
    logs = []
    with rich.progress.Progress(*rich.progress.Progress.get_default_columns(), console=console,
                                transient=True, disable=dist.rank != 0) as progress:
        for backend in backends:
            log = train_one(backend, cfg, args, text, device, dist, progress)
            progress.console.print(f"{backend:8s} loss {log['loss'][0]:.3f} -> {log['loss'][-1]:.3f}, val "
                                   f"{log['val_loss'][-1]:.3f}, {log['tokens_per_s']:,.0f} tokens/s")
            logs.append(log)
    table = rich.table.Table("backend", "params", "first loss", "final loss", "final val loss", "tokens/s", "MFU",
                             title="tinycuda gpt train")
    for log in logs:
        table.add_row(log["backend"], f"{log['params'] / 1e6:.2f}M", f"{log['loss'][0]:.4f}",
                      f"{log['loss'][-1]:.4f}", f"{log['val_loss'][-1]:.4f}", f"{log['tokens_per_s']:,.0f}",
                      f"{log['mfu']:.1%}" if log["mfu"] is not None else "-")
    console.print(table)
    dist.close()
    if dist.rank != 0:
        return 0
    if args.plot:
        plot(logs, args.plot)
        console.print(f"loss curves: {args.plot}")
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps({"device": device, "config": dataclasses.asdict(cfg),
                                                       "args": {k: v for k, v in vars(args).items()},
                                                       "results": logs}, indent=1))
    return 0


def plot(logs, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:
        raise SystemExit("gpt: --plot needs matplotlib (pip install matplotlib)") from e
    fig, ax = plt.subplots(figsize=(7, 4))
    for log in logs:
        line, = ax.plot(log["steps"], log["loss"], lw=0.8, alpha=0.7, label=f"{log['backend']} train")
        ax.plot(log["val_steps"], log["val_loss"], "o-", color=line.get_color(), label=f"{log['backend']} val")
    ax.set_xlabel("step")
    ax.set_ylabel("loss (nats a byte)")
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


# ---------------------------------------------------------------------------
# generation

def load_checkpoint(path, kernels, device):
    import torch
    from .nn.gpt import GPT, GPTConfig
    ck = torch.load(path, map_location=device, weights_only=True)
    model = GPT(GPTConfig(**ck["config"]), kernels=kernels).to(device)
    model.load_state_dict(ck["model"])
    return model.eval()


def sample(model, prompt_ids, new_tokens, batch, temperature, top_k, generator):
    """[batch, len(prompt) + new_tokens] ids: the prompt run once into the KV
    cache, then one token a step."""
    import torch
    device = model.lm_head.weight.device
    idx = torch.tensor(prompt_ids, dtype=torch.int64, device=device).repeat(batch, 1)
    total = idx.shape[1] + new_tokens
    if total > model.cfg.context:
        raise SystemExit(f"gpt generate: prompt + tokens = {total} exceeds the model's context ({model.cfg.context})")
    # the cache in the dtype k and v come in (bf16 under autocast): a float32 one would be cast whole
    # again for every step's attention
    dtype = torch.get_autocast_dtype(device.type) if torch.is_autocast_enabled(device.type) else None
    cache = model.new_cache(batch, dtype=dtype)
    out = [idx]
    logits = model.decode(idx, cache, 0)
    pos = idx.shape[1]
    for i in range(new_tokens):
        logits = logits.float() / max(temperature, 1e-6)
        if top_k:
            kth = torch.topk(logits, min(top_k, logits.shape[-1])).values[:, -1:]
            logits = logits.masked_fill(logits < kth, float("-inf"))
        nxt = torch.multinomial(torch.softmax(logits, -1), 1, generator=generator)
        out.append(nxt)
        if i + 1 < new_tokens:  # the last token's logits are not needed
            logits = model.decode(nxt, cache, pos)
            pos += 1
    return torch.cat(out, 1)


def generate(args):
    import torch
    device = _device(args.device)
    prompt = list(args.prompt.encode("utf-8"))
    amp = torch.autocast("cuda", torch.bfloat16) if device == "cuda" else torch.autocast("cpu", enabled=False)
    results = []
    for kernels in ("tinycuda", "torch", "compile") if args.kernels == "all" else (args.kernels,):
        model = load_checkpoint(args.checkpoint, "torch" if kernels == "compile" else kernels, device)
        if kernels == "compile":  # the cache's length grows a step: dynamic shapes, not a recompile a token
            model.decode = torch.compile(model.decode, dynamic=True)
        with amp:
            if args.kernels == "all" or kernels == "compile":  # compilation, allocator and cuBLAS warm-up untimed
                sample(model, prompt, min(args.tokens, 8), args.batch_size, args.temperature, args.top_k,
                       torch.Generator(device=device).manual_seed(args.seed))
            gen = torch.Generator(device=device).manual_seed(args.seed)
            _sync(device)
            t0 = time.perf_counter()
            ids = sample(model, prompt, args.tokens, args.batch_size, args.temperature, args.top_k, gen)
            _sync(device)
            dt = time.perf_counter() - t0
        if not results:
            for row in ids.tolist():  # 63: "?" for ids past the bytes
                print(bytes(i if i < 256 else 63 for i in row).decode("utf-8", errors="replace"))
                print("-" * 40)
        rate = args.batch_size * args.tokens / dt
        results.append({"kernels": kernels, "batch": args.batch_size, "tokens": args.tokens, "seconds": dt,
                        "tokens_per_s": rate})
        print(f"{args.batch_size * args.tokens} tokens in {dt:.2f} s: {rate:,.0f} tokens/s "
              f"({kernels} kernels, batch {args.batch_size}, {device})")
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps({"device": device, "results": results}, indent=1))
    return 0
