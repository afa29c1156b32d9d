"""torch.compile sees the ops as opaque custom ops: fullgraph=True must trace
the whole model (forward and backward) with no graph break, and on CUDA the
CUDA-graph mode ("reduce-overhead") must replay them, which only works when
every kernel is launched on the current (capturing) stream."""
import pytest
import torch

import tinycuda
from conftest import check_compiled, requires_cuda

pytestmark = pytest.mark.compile


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = tinycuda.nn.Linear(20, 33)
        self.act = tinycuda.nn.ScaleBiasReLU(33, scale=0.5)
        self.norm = tinycuda.nn.LayerNorm(33)
        self.fc2 = tinycuda.nn.Linear(33, 7)
        self.rms = tinycuda.nn.RMSNorm(7)
        self.relu = tinycuda.nn.ReLU()

    def forward(self, x):
        h = self.relu(self.rms(self.fc2(self.norm(self.act(self.fc1(x))))))
        return tinycuda.sum(tinycuda.square(h), dim=1).mean() + tinycuda.sum(h)


class GatedNet(torch.nn.Module):
    """The activation ops: a fused up/gate projection through SwiGLU, GELU,
    and geglu on two separate projections."""

    def __init__(self):
        super().__init__()
        self.up = tinycuda.nn.Linear(20, 66)
        self.swiglu = tinycuda.nn.SwiGLU()
        self.gelu = tinycuda.nn.GELU(approximate="tanh")
        self.gate, self.proj = tinycuda.nn.Linear(33, 16), tinycuda.nn.Linear(33, 16)

    def forward(self, x):
        h = self.swiglu(self.up(x))
        return tinycuda.sum(tinycuda.geglu(self.gelu(self.gate(h)), self.proj(h), "none"))


def _check(device, net, **compile_kwargs):
    model = net().to(device)
    check_compiled(model, (torch.randn(9, 20, device=device),), wrt=list(model.parameters()), rtol=1e-5, atol=1e-5,
                   **compile_kwargs)


@pytest.mark.parametrize("net", [Net, GatedNet], ids=lambda n: n.__name__)
def test_compile_fullgraph_cpu(net):
    _check("cpu", net)


@requires_cuda
@pytest.mark.parametrize("net", [Net, GatedNet], ids=lambda n: n.__name__)
def test_compile_fullgraph_cuda(net):
    _check("cuda", net)


@requires_cuda
@pytest.mark.parametrize("net", [Net, GatedNet], ids=lambda n: n.__name__)
def test_compile_cuda_graphs(net):
    _check("cuda", net, mode="reduce-overhead")


@pytest.mark.parametrize("net", [Net, GatedNet], ids=lambda n: n.__name__)
def test_graph_has_no_breaks(net):
    torch._dynamo.reset()
    explanation = torch._dynamo.explain(net())(torch.randn(4, 20))
    assert explanation.graph_break_count == 0
    assert explanation.graph_count == 1
