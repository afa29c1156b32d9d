"""Issue 14's CPU target: each tensor op's CPU time against torch's, 2 threads, 2^22 float32 elements.

    python scripts/cpu_ratio.py [substring ...] [--reps 15] [--markdown FILE]

Each case runs tinycuda's op and torch's on the same fresh randn inputs (2048 x 2048, or 2^22 in one dim where the
op is 1-D), twice each to warm up, then --reps rounds of one tinycuda call and one torch call, alternating, each
timed alone with a 5 ms pause before it; the figures are the medians (--stat min: the fastest call, which on a
loaded machine is the one whose threads found their cores free). --clock cpu times the process' CPU time instead
(both threads' work, what a loaded machine's waiting does not inflate). torch runs on torch.set_num_threads(2);
tinycuda's CPU kernels use every core (2 here). The machine is shared: repeat a case (a substring of its name)
before believing a miss.

OMP_WAIT_POLICY is PASSIVE unless set: torch's libgomp workers otherwise spin after each of its calls (about 8 ms of
CPU here, past the 5 ms pause) on the core the next tinycuda call's second thread needs. With them spinning,
tinycuda's add over 2^22 took 4.9 ms (2.0x torch's 2.4), alone on its cores 2.6 (1.2x torch's 2.2: the policy
leaves torch's own time about as it was).
"""
import argparse
import os
import statistics
import sys
import time

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # read when torch loads libgomp: before the import
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import tinycuda  # noqa: E402

N = 2048  # N x N = 2^22


def _x(*shape, dtype=torch.float32):
    return torch.randn(*shape, dtype=dtype)


def _unary():
    args = {"leaky_relu": (0.01,), "elu": (1.0,), "softplus": (1.0, 20.0), "hardtanh": (-1.0, 1.0),
            "clamp": (-0.5, 0.5)}
    torch_fn = {"sigmoid": torch.sigmoid, "tanh": torch.tanh, "silu": F.silu, "mish": F.mish,
                "leaky_relu": F.leaky_relu, "elu": F.elu, "selu": F.selu, "softplus": F.softplus,
                "softsign": F.softsign, "hardsigmoid": F.hardsigmoid, "hardtanh": F.hardtanh, "clamp": torch.clamp,
                "exp": torch.exp, "log": torch.log, "abs": torch.abs, "neg": torch.neg, "sqrt": torch.sqrt,
                "rsqrt": torch.rsqrt}
    for name, ref in torch_fn.items():
        positive = name in ("log", "sqrt", "rsqrt")
        make = (lambda: (_x(N, N).abs() + 0.1,)) if positive else (lambda: (_x(N, N),))
        a = args.get(name, ())
        yield name, make, lambda x, n=name, a=a: getattr(tinycuda, n)(x, *a), lambda x, r=ref, a=a: r(x, *a)


def _unary_backward():
    grads = {"sigmoid": (torch.ops.aten.sigmoid_backward, True), "tanh": (torch.ops.aten.tanh_backward, True),
             "silu": (torch.ops.aten.silu_backward, False), "mish": (torch.ops.aten.mish_backward, False),
             "softplus": (lambda g, x: torch.ops.aten.softplus_backward(g, x, 1.0, 20.0), False)}
    for name, (ref, reads_y) in grads.items():
        def make(name=name, reads_y=reads_y):
            x = _x(N, N)
            return torch.randn_like(x), (getattr(torch, name, None) or getattr(F, name))(x) if reads_y else x
        op = getattr(torch.ops.tinycuda, f"{name}_backward")
        extra = (1.0, 20.0) if name == "softplus" else ()
        yield f"{name} backward", make, lambda g, s, op=op, e=extra: op(g, s, *e), ref


def _binary():
    for name in ("add", "sub", "mul", "div", "maximum", "minimum", "pow"):
        ref = getattr(torch, name)
        fix = (lambda a: a.abs() + 0.5) if name == "pow" else (lambda a: a)
        yield name, lambda fix=fix: (fix(_x(N, N)), _x(N, N)), getattr(tinycuda, name), ref
        yield f"{name}, x + row (N,)", lambda fix=fix: (fix(_x(N, N)), _x(N)), getattr(tinycuda, name), ref
        yield f"{name}, x + column (N, 1)", lambda fix=fix: (fix(_x(N, N)), _x(N, 1)), getattr(tinycuda, name), ref
    yield ("where", lambda: (_x(N, N) > 0, _x(N, N), _x(N, N)), tinycuda.where, torch.where)


def _reduce():
    for name in ("sum", "mean", "prod", "amax", "amin", "logsumexp", "var", "std", "vector_norm", "argmax", "argmin"):
        ref = torch.linalg.vector_norm if name == "vector_norm" else getattr(torch, name)
        ours = getattr(tinycuda, name)
        make = (lambda: (_x(N, N).uniform_(0.999, 1.001),)) if name == "prod" else (lambda: (_x(N, N),))
        for label, dim in (("rows (dim 1)", (1,)), ("columns (dim 0)", (0,)),
                           ("every dim", ((0, 1),) if name == "logsumexp" else ())):
            yield f"{name}, {label}", make, lambda x, f=ours, d=dim: f(x, *d), lambda x, f=ref, d=dim: f(x, *d)
    yield ("vector_norm ord 1, rows (dim 1)", lambda: (_x(N, N),), lambda x: tinycuda.vector_norm(x, 1, 1),
           lambda x: torch.linalg.vector_norm(x, 1, 1))


def _scan():
    for name in ("cumsum", "cumprod", "logcumsumexp"):
        make = (lambda s: lambda: (_x(*s).uniform_(0.999, 1.001),)) if name == "cumprod" else (lambda s: lambda: (_x(*s),))
        for label, shape, dim in (("rows (dim 1)", (N, N), 1), ("columns (dim 0)", (N, N), 0),
                                  ("one row of 2^22", (N * N,), 0)):
            yield (f"{name}, {label}", make(shape), lambda x, f=getattr(tinycuda, name), d=dim: f(x, d),
                   lambda x, f=getattr(torch, name), d=dim: f(x, d))


def _sort():
    for label, shape in (("rows of 2048", (N, N)), ("one row of 2^22", (N * N,))):
        yield f"sort, {label}", lambda s=shape: (_x(*s),), lambda x: tinycuda.sort(x, -1), lambda x: torch.sort(x, -1)
    yield "argsort, rows of 2048", lambda: (_x(N, N),), lambda x: tinycuda.argsort(x, -1), lambda x: torch.argsort(x, -1)
    for k in (16, 1024):
        yield (f"topk k={k}, rows of 2048", lambda: (_x(N, N),), lambda x, k=k: tinycuda.topk(x, k),
               lambda x, k=k: torch.topk(x, k))


def _other():
    yield "histc 100 bins", lambda: (_x(N * N),), lambda x: tinycuda.histc(x, 100, -3, 3), lambda x: torch.histc(x, 100, -3, 3)
    yield ("bincount 1000 bins", lambda: (torch.randint(0, 1000, (N * N,)),), tinycuda.bincount, torch.bincount)
    yield ("bincount 1000 bins, weights", lambda: (torch.randint(0, 1000, (N * N,)), _x(N * N)),
           lambda x, w: tinycuda.bincount(x, w), lambda x, w: torch.bincount(x, w))
    yield ("transpose_copy", lambda: (_x(N, N),), lambda x: tinycuda.transpose_copy(x, 0, 1),
           lambda x: x.transpose(0, 1).contiguous())
    yield ("contiguous of x.t()", lambda: (_x(N, N).t(),), tinycuda.contiguous, lambda x: x.contiguous())
    yield ("permute_copy (2, 0, 1) of 64 x 256 x 256", lambda: (_x(64, 256, 256),),
           lambda x: tinycuda.permute_copy(x, (2, 0, 1)), lambda x: x.permute(2, 0, 1).contiguous())
    for name in ("triu", "tril"):
        yield name, lambda: (_x(N, N),), getattr(tinycuda, name), getattr(torch, name)


def _losses():
    two = lambda: (_x(N, N), _x(N, N))  # noqa: E731
    cases = {
        "mse_loss": two, "l1_loss": two, "smooth_l1_loss": two, "huber_loss": two,
        "binary_cross_entropy_with_logits": lambda: (_x(N, N), torch.rand(N, N)),
        "kl_div": lambda: (_x(N, N).log_softmax(1), _x(N, N).softmax(1)),
        "margin_ranking_loss": lambda: (_x(N * N), _x(N * N), torch.randint(0, 2, (N * N,)).float() * 2 - 1),
        "hinge_embedding_loss": lambda: (_x(N, N), torch.randint(0, 2, (N, N)).float() * 2 - 1),
        "triplet_margin_loss": lambda: (_x(16384, 256), _x(16384, 256), _x(16384, 256)),
    }
    for name, make in cases.items():
        ours, ref = getattr(tinycuda, name), getattr(F, name)
        yield name, make, ours, ref

        def fwd_bwd(*args, f):
            args = [a.requires_grad_() if i < (1 if f.__name__ == "hinge_embedding_loss" else 2) else a
                    for i, a in enumerate(args)]
            f(*args).backward()

        def make_bwd(make=make):
            return tuple(a.detach().clone() for a in make())
        yield (f"{name} fwd+bwd", make_bwd, lambda *a, f=ours: fwd_bwd(*a, f=f),
               lambda *a, f=ref: fwd_bwd(*a, f=f))


FAMILIES = (_unary, _unary_backward, _binary, _reduce, _scan, _sort, _other, _losses)


CLOCK = time.perf_counter


def _clock(fn, args):
    time.sleep(0.005)
    t0 = CLOCK()
    fn(*args)
    return (CLOCK() - t0) * 1e3


def measure(make, ours, ref, reps, stat):
    args = make()
    for _ in range(2):
        ours(*args), ref(*args)
    a, b = [], []
    for _ in range(reps):
        a.append(_clock(ours, args))
        b.append(_clock(ref, args))
    return stat(a), stat(b)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("cases", nargs="*", help="substrings of the case names to run (default: every case)")
    p.add_argument("--reps", type=int, default=15)
    p.add_argument("--stat", choices=("median", "min"), default="median")
    p.add_argument("--clock", choices=("wall", "cpu"), default="wall")
    p.add_argument("--markdown", metavar="FILE", help="also write the table as Markdown")
    args = p.parse_args()
    global CLOCK
    CLOCK = time.perf_counter if args.clock == "wall" else time.process_time
    torch.set_num_threads(2)
    torch.manual_seed(0)
    # the process' first large calls (page faults, thread starts) ran a run's first case 2x slow: warm both up
    measure(lambda: (_x(N, N),), tinycuda.exp, torch.exp, 5, min)
    lines = ["| op | tinycuda ms | torch ms | ratio |", "|---|---|---|---|"]
    print(f"{'op':48s} {'tinycuda ms':>12s} {'torch ms':>10s} {'ratio':>7s}")
    for family in FAMILIES:
        for name, make, ours, ref in family():
            if args.cases and not any(c in name for c in args.cases):
                continue
            t_ours, t_ref = measure(make, ours, ref, args.reps, getattr(statistics, args.stat) if args.stat == "median" else min)
            ratio = t_ours / t_ref
            flag = "  MISS" if ratio > 2 else ""
            print(f"{name:48s} {t_ours:12.3f} {t_ref:10.3f} {ratio:6.2f}x{flag}", flush=True)
            lines.append(f"| {name} | {t_ours:.2f} | {t_ref:.2f} | {'**' if ratio > 2 else ''}{ratio:.2f}x"
                         f"{'**' if ratio > 2 else ''} |")
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
