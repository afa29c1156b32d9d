"""The CPU's vector math (csrc/shared/poly_math.h: exp, expm1, log, log1p on [0, 1], tanh, softplus as polynomials a
loop vectorizes) through the float32 ops that run it, against float64 over the float range: a sample of every bit
pattern (each 1021st of the 2^32 floats: both signs, subnormals, NaNs; and both infinities) and every float in a window
around each place where the math changes branch or saturates. The error bounds are poly_math.h's documented ones
(scripts/poly_math_ulp.cpp measures them over all 2^32 floats), rounded up; the composite ops' are this
sample's, rounded up. Infinities and NaN must come out as float64's result rounded to float32."""
import pytest
import torch
import torch.nn.functional as F

import tinycuda

# where a branch or a saturation of the math lies: exp's subnormal, underflow and overflow edges, expm1's and
# tanh's change of formula, softplus' threshold
EDGES = (0.0, -103.97, -87.34, 88.72, 0.3466, -0.3466, 17.33, 0.625, -0.625, 9.0, 20.0, 1.0)

OPS = {  # name: (tinycuda op, float64 reference, largest error in ulps, the inputs it is defined on)
    "exp": (tinycuda.exp, torch.exp, 1.5, None),
    "expm1 (elu, x <= 0)": (tinycuda.elu, F.elu, 2.0, lambda x: x <= 0),
    "log": (tinycuda.log, torch.log, 1.0, None),
    "tanh": (tinycuda.tanh, torch.tanh, 2.0, None),
    # 1 / (1 + e^-x): 0 below x = -88.72, where e^-x overflows (torch's float32 too; the subnormal result is lost)
    "sigmoid": (tinycuda.sigmoid, torch.sigmoid, 2.5, lambda x: ~(x < -88.72)),
    "softplus (log1p on [0, 1] of exp)": (tinycuda.softplus, F.softplus, 3.0, None),
    "silu": (tinycuda.silu, F.silu, 2.5, lambda x: ~(x < -88.72)),
    # x e^x where e^x is a subnormal (x < -87.34) carries e^x's absolute rounding, 100x the result's spacing
    "mish": (tinycuda.mish, F.mish, 4.0, lambda x: ~(x < -87.34)),
}


def _sample():
    bits = torch.arange(0, 2**32, 1021, dtype=torch.int64)
    windows = []
    for e in EDGES:
        at = torch.tensor([e, -e], dtype=torch.float32).view(torch.int32).to(torch.int64)
        windows += [torch.arange(b - 4096, b + 4096) for b in at.tolist()]
    infinities = torch.tensor([float("inf"), -float("inf")]).view(torch.int32).to(torch.int64)
    bits = torch.cat([bits, infinities] + windows) & 0xFFFFFFFF
    return torch.where(bits >= 2**31, bits - 2**32, bits).to(torch.int32).view(torch.float32)


X = _sample()


def ulp_error(y, ref):
    """|y - ref| in units of the float32 spacing at ref (2^-149 among the subnormals), for ref finite in float32;
    elsewhere 0 where y is ref rounded to float32 (the same infinity, or NaN for NaN), inf otherwise."""
    r32 = ref.float()
    finite = r32.isfinite() & y.isfinite()
    _, e = torch.frexp(ref)
    spacing = torch.ldexp(torch.ones_like(ref), (e - 1).clamp(min=-126) - 23)
    err = torch.where(finite, (y.double() - ref).abs() / spacing, torch.zeros_like(ref))
    same = (y == r32) | (y.isnan() & r32.isnan())
    return torch.where(finite | same, err, torch.full_like(ref, float("inf")))


@pytest.mark.parametrize("name", OPS)
def test_float32_error_over_the_float_range(name):
    op, ref, bound, domain = OPS[name]
    x = X if domain is None else X[domain(X)]
    err = ulp_error(op(x), ref(x.double()))
    worst = int(err.argmax())
    assert err[worst] <= bound, f"{name}: {float(err[worst]):.3f} ulp at x = {float(x[worst])!r} (bound {bound})"

