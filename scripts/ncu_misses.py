"""One fwd+bwd (or fwd) call of each issue-14 miss that BENCHMARKS profiles against torch.compile (the binary
ops, leaky_relu, softplus, pow), tinycuda's kernels and compile's, each in an NVTX range named for its case:
  ncu --profile-from-start off --clock-control none --nvtx --csv --metrics <list> python3 scripts/ncu_misses.py [case ...]
"""
import sys
import torch
import torch.nn.functional as F
import tinycuda
from tinycuda.bench import profiled

torch.manual_seed(0)
dev = "cuda"
a = torch.randn(4, 2048, 8192, device=dev, requires_grad=True)
bias = torch.randn(8192, device=dev, requires_grad=True)
sq = torch.randn(8192, 8192, device=dev, requires_grad=True)
sq2 = torch.randn(8192, 8192, device=dev).abs().requires_grad_()
e = torch.randn(8192, 8192, device=dev)
g3 = torch.randn(4, 2048, 8192, device=dev)
g2 = torch.randn(8192, 8192, device=dev)


def fb(f, g, *xs):
    def run():
        y = f(*xs)
        y.backward(g)
    return run


c_mul = torch.compile(lambda x, y: x * y, fullgraph=True)
c_lrelu = torch.compile(lambda x: F.leaky_relu(x), fullgraph=True)
c_softplus = torch.compile(lambda x: F.softplus(x), fullgraph=True)
c_pow = torch.compile(lambda x, y: torch.pow(x, y), fullgraph=True)
c_max = torch.compile(lambda x, y: torch.maximum(x, y), fullgraph=True)
c_div = torch.compile(lambda x, y: x / y, fullgraph=True)
sq3 = torch.randn(8192, 8192, device=dev, requires_grad=True)
cases = {
    "mul_bias_fb": fb(tinycuda.mul, g3, a, bias),
    "mul_bias_fb_compile": fb(c_mul, g3, a, bias),
    "leaky_relu_fb": fb(tinycuda.leaky_relu, g2, sq),
    "leaky_relu_fb_compile": fb(c_lrelu, g2, sq),
    "maximum_fb": fb(tinycuda.maximum, g2, sq, sq3),
    "maximum_fb_compile": fb(c_max, g2, sq, sq3),
    "div_fb": fb(tinycuda.div, g2, sq, sq3),
    "div_fb_compile": fb(c_div, g2, sq, sq3),
    "softplus_f": lambda: tinycuda.softplus(e),
    "softplus_f_compile": lambda: c_softplus(e),
    "pow_f": lambda: tinycuda.pow(sq2.detach(), e),
    "pow_f_compile": lambda: c_pow(sq2.detach(), e),
}
which = sys.argv[1:] or list(cases)
for name in which:
    for _ in range(2):
        cases[name]()  # warm-up: compile, allocations
        for t in (a, bias, sq, sq2, sq3):
            t.grad = None
torch.cuda.synchronize()
for name in which:
    profiled(name, cases[name])
    for t in (a, bias, sq, sq2, sq3):
        t.grad = None
