"""matmul beyond the op table (tests/test_ops.py): the CUDA GEMM's kept
variants on every operand layout (the wgmma kernel reads m/n-major operands
through its transpose bits), batches past the grid's limit, outputs that must
be written everywhere, and accuracy against float64 at long K."""
import pytest
import torch

import tinycuda
from conftest import HAS_CUDA, assert_matches, check_op, launched, requires_cuda
from tinycuda import variants

pytestmark = pytest.mark.racecheck

LAYOUTS = ["NN", "TN", "NT", "TT"]  # a, b: N as given, T the transpose of a contiguous tensor


def _operands(shape_a, shape_b, layout, device, dtype):
    def make(shape, transposed):
        t = torch.randn(shape, device=device)
        return (t.mT.contiguous().mT if transposed else t).to(dtype)
    return make(shape_a, layout[0] == "T"), make(shape_b, layout[1] == "T") / shape_a[-1] ** 0.5


# Every extent a multiple of 8 ((256, 64, 136), the batched one) lets TMA read
# the operands in any layout: the wgmma kernel runs all four; (300, 72, 264)
# leaves ragged 128 x 256 tiles; (129, 1000, 264) runs K over many 4-stage
# rounds; (33, 17, 129) takes the mma gather path.
@requires_cuda
@pytest.mark.parametrize("variant", variants.names("matmul"))
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("sa,sb", [((1, 1), (1, 1)), ((33, 17), (17, 129)), ((256, 64), (64, 136)),
                                   ((300, 72), (72, 264)), ((129, 1000), (1000, 264)),
                                   ((3, 130, 72), (3, 72, 136)), ((136, 64), (3, 64, 264))], ids=str)
def test_matmul_cuda_variants(dtype, variant, layout, sa, sb):
    a, b = _operands(sa, sb, layout, "cuda", dtype)
    if variant in ("mma", "wgmma") and dtype == torch.float32:
        with pytest.raises(RuntimeError, match=rf"tinycuda::matmul: .*the {variant} variant takes float16 or bfloat16"):
            variants.call("matmul", variant, a, b)
        return
    check_op(variants.get("matmul", variant), torch.matmul, [a, b], rtol32=1e-4, atol32=1e-3, grad_atol32=2e-3)


def _devices():
    return ["cpu"] + (["cuda"] if HAS_CUDA else [])


@pytest.mark.parametrize("device", _devices())
def test_matmul_batches_past_the_grid_limit(device, dtype):
    """70000 batches: CUDA launches them in chunks of 65535 (the grid's y/z limit)."""
    a, b = _operands((70000, 3, 5), (70000, 5, 2), "NN", device, dtype)
    check_op(tinycuda.matmul, torch.matmul, [a, b], grad=False, rtol32=1e-4, atol32=1e-4)
    if device == "cuda":  # a shared b: folded into one 1.12M-row product, but not for naive/tiled (M on grid y)
        a, b = _operands((70000, 16, 5), (5, 2), "NN", device, dtype)
        for variant in ("naive", "tiled"):
            check_op(variants.get("matmul", variant), torch.matmul, [a, b], grad=False, rtol32=1e-4, atol32=1e-4)


@pytest.mark.parametrize("device", _devices())
@pytest.mark.parametrize("layout", LAYOUTS)
def test_matmul_writes_every_output(device, dtype, layout):
    """Into a NaN-filled output (capi's out=), every variant writes every element."""
    from tinycuda import capi
    a, b = _operands((300, 72), (72, 264), "NN", device, dtype)
    ta, tb = layout[0] == "T", layout[1] == "T"
    ga = a.mT.contiguous() if ta else a  # capi takes the transposed operand contiguous
    gb = b.mT.contiguous() if tb else b
    ref = torch.matmul(a.double(), b.double())
    algos = [0] if device == "cpu" else [0, *variants._ALGOS["matmul"].values()]
    for algo in algos:
        if algo in (4, 5) and dtype == torch.float32:
            continue
        out = torch.full((300, 264), float("nan"), device=device, dtype=dtype)
        if device == "cpu" and dtype == torch.bfloat16:  # NumPy has no bfloat16: the op itself
            out.copy_(torch.ops.tinycuda.matmul(ga.mT if ta else ga, gb.mT if tb else gb, algo=algo))
        else:
            arrays = (lambda t: t.numpy()) if device == "cpu" else (lambda t: t)
            capi.matmul(arrays(ga), arrays(gb), transpose_a=ta, transpose_b=tb, out=arrays(out), algo=algo)
        assert not out.isnan().any(), f"algo {algo}: {int(out.isnan().sum())} outputs not written"
        err = (out.double() - ref).norm() / ref.norm()
        assert err < (1e-5 if dtype == torch.float32 else 1e-2), (algo, float(err))


# One output column or row: the CUDA GEMV kernel when the matrix is k-major
# (NN with n = 1, NT with m = 1), its K split across blocks when few rows
# would not fill the GPU (3 x 1 x 50000), vectorized or not (K = 4099 is odd).
@pytest.mark.parametrize("device", _devices())
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("sa,sb", [((300, 4099), (4099, 1)), ((3, 50000), (50000, 1)), ((1, 4099), (4099, 300)),
                                   ((1, 50000), (50000, 3)), ((1, 7), (7, 1)), ((5, 32), (32, 1))], ids=str)
def test_matmul_gemv(device, dtype, layout, sa, sb):
    a, b = _operands(sa, sb, layout, device, dtype)
    check_op(tinycuda.matmul, torch.matmul, [a, b], rtol32=1e-4, atol32=1e-4, grad_atol32=1e-3)


# The accuracy rule: relative Frobenius error against float64 under
# 1e-5 (fp32) / 1e-2 (fp16, bf16), and a max error at most 2x torch's own in
# the same precision, with K long enough that one accumulator walks far.
@pytest.mark.parametrize("device", _devices())
@pytest.mark.parametrize("m,n,k", [(64, 48, 40), (128, 96, 4099), (64, 64, 65536), (256, 1, 262144)], ids=str)
def test_matmul_accuracy_against_float64(device, dtype, m, n, k):
    a, b = torch.randn(m, k, device=device).to(dtype), torch.randn(k, n, device=device).to(dtype)
    ref = a.double() @ b.double()
    ours, theirs = tinycuda.matmul(a, b).double(), (a @ b).double()
    rel = float((ours - ref).norm() / ref.norm())
    assert rel < (1e-5 if dtype == torch.float32 else 1e-2), rel
    assert (ours - ref).abs().max() <= 2 * (theirs - ref).abs().max() + 1e-12


def test_matmul_vectors_and_broadcasts_match_torch():
    """torch.matmul's shape rules, which tinycuda.matmul reduces to the op's 2-D/3-D, with
    their gradients; empty dims included (a reshape to -1 rows fails on 0 elements)."""
    for sa, sb in [((5,), (5,)), ((5,), (2, 5, 3)), ((2, 1, 4, 5), (5, 3)), ((4, 5), (2, 3, 5, 6)),
                   ((2, 3, 4, 5), (5,)), ((1, 2, 4, 5), (3, 1, 5, 2)), ((2, 3, 0, 5), (5, 6)),
                   ((2, 3, 4, 0), (0, 6)), ((3, 4, 0), (0, 6)), ((3, 4, 5), (5, 0)), ((0, 4, 5), (5, 2))]:
        a = torch.randn(sa, dtype=torch.float64, requires_grad=True)
        b = torch.randn(sb, dtype=torch.float64, requires_grad=True)
        got, want = tinycuda.matmul(a, b), torch.matmul(a, b)
        assert got.shape == want.shape, (sa, sb)
        torch.testing.assert_close(got, want)
        g = torch.randn(want.shape, dtype=torch.float64)
        for ours, theirs in zip(torch.autograd.grad(got, (a, b), g), torch.autograd.grad(want, (a, b), g)):
            torch.testing.assert_close(ours, theirs, msg=lambda m: f"{sa} @ {sb}: {m}")


def test_matmul_names_the_callers_shapes():
    with pytest.raises(RuntimeError, match=r"tinycuda::matmul: a's last dim \(5\) must equal b's only dim \(4\): "
                                           r"shapes \[5\] and \[4\]"):
        tinycuda.matmul(torch.randn(5), torch.randn(4))


@pytest.mark.parametrize("device", _devices())
def test_matmul_capi_out_at_an_odd_element(device):
    """A C-contiguous out= one element past an aligned start: the tensor-core
    epilogues store pairs of columns as one 4-byte word only where aligned."""
    from tinycuda import capi
    a, b = torch.randn(256, 64, device=device).half(), torch.randn(64, 136, device=device).half()
    ref = torch.ops.tinycuda.matmul(a, b)
    for algo in ([0] if device == "cpu" else [0, 4, 5]):
        buf = torch.full((256 * 136 + 1,), float("nan"), device=device, dtype=torch.float16)
        out = buf[1:].view(256, 136)
        arrays = (lambda t: t.numpy()) if device == "cpu" else (lambda t: t)
        capi.matmul(arrays(a), arrays(b), out=arrays(out), algo=algo)
        torch.testing.assert_close(out, ref, rtol=0, atol=0, msg=lambda m: f"algo {algo}: {m}")


# The CPU kernel deals 96-row blocks to threads and, when there are fewer
# blocks than cores, cuts the 16-column panels into ranges as well (ragged
# here: 40 columns are 3 panels, the last half empty); B packs from either
# layout (NN: read along n, NT: along k).
@pytest.mark.parametrize("layout", ["NN", "NT", "TT"])
@pytest.mark.parametrize("sa,sb", [((50, 3000), (3000, 40)), ((200, 700), (700, 72)), ((1, 5000), (5000, 900))],
                         ids=str)
def test_matmul_cpu_work_split(dtype, layout, sa, sb):
    a, b = _operands(sa, sb, layout, "cpu", dtype)
    check_op(tinycuda.matmul, torch.matmul, [a, b], rtol32=1e-4, atol32=1e-4, grad_atol32=1e-3)


# accumulate (out += a @ b, BLAS's beta = 1) and c_float (a float32 out for 16-bit operands, the product
# unrounded): how fused_linear_cross_entropy chains its grad_weight over token chunks. Every algo the device
# runs: where TMA can describe the out (rows of 16-byte multiples: 264, 136), the wgmma kernel adds into a
# float32 one with TMA reduce-adds and loads a 16-bit one's old boxes by TMA; elsewhere (129, 130) store_out
# adds; the CUDA-core kernels go through the same Out.
@pytest.mark.parametrize("device", _devices())
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("c_float", [False, True], ids=["c_dtype", "c_float"])
@pytest.mark.parametrize("sa,sb", [((1, 1), (1, 1)), ((33, 17), (17, 129)), ((300, 72), (72, 264)),
                                   ((70, 40), (40, 130)), ((2, 130, 72), (2, 72, 136)), ((136, 0), (0, 24))],
                         ids=str)
def test_matmul_accumulates_into_out(device, dtype, layout, c_float, sa, sb):
    from tinycuda import capi
    a, b = _operands(sa, sb, layout, device, dtype)
    given = dict(transpose_a=layout[0] == "T", transpose_b=layout[1] == "T")
    a_in, b_in = (a.mT if given["transpose_a"] else a), (b.mT if given["transpose_b"] else b)
    shape = (*a.shape[:-1], b.shape[-1])
    if c_float and dtype == torch.float32:
        with pytest.raises(capi.CapiError, match=r"matmul: c_float is for float16 or bfloat16 operands"):
            capi.matmul(a_in, b_in, out=torch.zeros(shape, device=device), c_float=True, **given)
        return
    c0 = torch.randn(shape, device=device, dtype=torch.float32 if c_float else dtype)
    want = c0.double() + a.double() @ b.double()
    # torch's own answer in out's precision, for the half rule: addmm's one rounding of c + a @ b
    same = c0 + a.float() @ b.float() if c_float else (torch.baddbmm if a.dim() == 3 else torch.addmm)(c0, a, b)
    algos = ["auto"] if device == "cpu" else ["auto", "naive", "tiled", "regtile"] + (
        ["mma", "wgmma"] if dtype != torch.float32 else [])
    for algo in algos:
        out = c0.clone()
        got = capi.matmul(a_in, b_in, out=out, accumulate=True, c_float=c_float, algo=f"TC_GEMM_{algo.upper()}",
                          **given)
        assert got is out
        try:
            assert_matches(out, same, want, rtol32=1e-5, atol32=1e-5)
        except AssertionError as e:
            e.add_note(f"algo {algo}")
            raise
    # without accumulate a float32 out is overwritten (its old values never read)
    if c_float:
        out = torch.full(shape, float("nan"), device=device)
        capi.matmul(a_in, b_in, out=out, c_float=True, **given)
        torch.testing.assert_close(out.double(), a.double() @ b.double(), rtol=1e-5, atol=1e-5)


# An out that starts one element past an aligned address: the wgmma epilogue's 8- and 16-byte accesses of
# C give way to element-wise ones (N = 264 would take them).
@pytest.mark.parametrize("device", _devices())
@pytest.mark.parametrize("c_float", [False, True], ids=["c_dtype", "c_float"])
def test_matmul_accumulates_into_misaligned_out(device, dtype, c_float):
    from tinycuda import capi
    a, b = _operands((300, 72), (72, 264), "NN", device, dtype)
    c0 = torch.randn(300 * 264 + 1, device=device, dtype=torch.float32 if c_float else dtype)
    if c_float and dtype == torch.float32:
        with pytest.raises(capi.CapiError, match=r"matmul: c_float is for float16 or bfloat16 operands"):
            capi.matmul(a, b, out=c0[1:].view(300, 264), accumulate=True, c_float=True)
        return
    want = c0[1:].view(300, 264).double() + a.double() @ b.double()
    same = c0[1:].view(300, 264) + a.float() @ b.float() if c_float else torch.addmm(c0[1:].view(300, 264), a, b)
    algos = ["auto"] + (["wgmma"] if device != "cpu" and dtype != torch.float32 else [])
    for algo in algos:
        buf = c0.clone()
        out = buf[1:].view(300, 264)
        capi.matmul(a, b, out=out, accumulate=True, c_float=c_float, algo=f"TC_GEMM_{algo.upper()}")
        assert buf[0] == c0[0]
        assert_matches(out, same, want, rtol32=1e-5, atol32=1e-5)


def test_matmul_accumulate_needs_out():
    from tinycuda import capi
    with pytest.raises(ValueError, match=r"tinycuda.capi.matmul: accumulate adds the product into out: give out"):
        capi.matmul(torch.randn(2, 3), torch.randn(3, 4), accumulate=True)


def test_matmul_split_k_plan_for_16_bit_operands():
    """The 16-bit split-K plan (matmul_core.h), read through the workspace query (no GPU needed): slices of
    float32 partials for outputs of few 128 x 256 tiles and a long K, none for a full grid."""
    from tinycuda import capi
    lib = capi.lib()

    def splits(M, N, K, dtype="TC_BFLOAT16", algo="TC_GEMM_AUTO", **fields):
        p = capi.ffi.new("tc_matmul_params*")
        p.dtype, p.batch, p.M, p.N, p.K, p.algo = getattr(lib, dtype), 1, M, N, K, getattr(lib, algo)
        for name, value in fields.items():
            setattr(p, name, value)
        size = lib.tc_matmul_workspace_size(p)
        # stream-K: two float32 128 x 256 partial tiles for each of 132 runs
        return "stream-K" if size == 2 * 132 * 128 * 256 * 4 else size / (4 * M * N)

    # GPT-2 124M's weight gradients (K = 16 x 1024 tokens): qkv, attention projection, MLP in and out; 54,
    # 18, 72 and 72 tiles: the runs of stream-K fill 132 SMs where 3 slices left the last wave ragged (72 x 3
    # = 1.64 waves); 54 x 2 slices fit one wave, and a run's second piece costs more than it saves
    assert [splits(*s) for s in [(2304, 768, 16384), (768, 768, 16384), (3072, 768, 16384), (768, 3072, 16384)]] \
        == [2, 7, "stream-K", "stream-K"]
    assert splits(2104, 1000, 8296) == "stream-K"  # test_matmul_stream_k_16_bit's
    # its transpose: 8 groups of 16 runs (the workspace has room for split-K's partials too, its fallback)
    assert splits(1000, 2104, 8296) == 2 * 128 * 128 * 256 * 4 / (4 * 1000 * 2104)
    assert splits(2104, 1000, 8296, algo="TC_GEMM_MMA") == 0 and splits(2104, 1000, 8296, accumulate=1) == 0
    assert splits(1024, 768, 50304) == 5  # fused_linear_cross_entropy's grad_hidden, 1024-token chunks
    # issue 13's (H 4096, V 128256) at 512-token chunks: stream-K would re-read A's 131 MB in every group
    assert splits(512, 4096, 128256) == 2
    assert splits(256, 256, 8292, "TC_FLOAT16") == 11  # a shorter last slice (chunk 768)
    assert splits(4096, 4096, 4096) == 0 and splits(256, 256, 511) == 0  # a full grid; too little K to pay
    assert splits(256, 256, 255) == 0  # under two slices of 256
    assert splits(256, 256, 8292, algo="TC_GEMM_MMA") == 0  # only auto and wgmma split
    assert splits(256, 256, 8292, accumulate=1) == 0 and splits(256, 256, 8292, c_float=1) == 0


# Few output tiles and a long K (with a shorter last slice): the slices run as a batch of the tensor-core
# kernel into float32 partials, then their sum in slice order, bit-identical run to run.
@requires_cuda
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["float16", "bfloat16"])
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("sa,sb", [((256, 8292), (8292, 256)), ((200, 4100), (4100, 72))], ids=str)
def test_matmul_split_k_16_bit(dtype, layout, sa, sb):
    a, b = _operands(sa, sb, layout, "cuda", dtype)
    check_op(tinycuda.matmul, torch.matmul, [a, b])
    assert torch.equal(tinycuda.matmul(a, b), tinycuda.matmul(a, b))


# Stream-K: 2104 x 8296 @ 8296 x 1000 is 17 x 4 = 68 tiles of 128 x 256, ragged in M (2104 = 16 x 128 + 56),
# N (1000 = 3 x 256 + 232) and K (8296 = 129 x 64 + 40); 4 groups (a column of 17 tiles each), each group's
# 17 x 130 k-tiles cut into 33 runs of 66 or 67, so runs begin and end inside tiles. Its transpose,
# 1000 x 2104, walks 8 groups along n (a row of 9 tiles each) in 8 x 16 = 128 runs: fewer than the 132
# slots. Each run's float32 partial tiles, then each tile's runs summed in run order: bit-identical run to
# run. Every extent a multiple of 8, so TMA reads the operands in every layout and the wgmma kernel runs
# (the profile shows the runs' sum). 2100 x 8292 x 1000 (odd strides: no TMA) takes split-K instead.
@requires_cuda
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["float16", "bfloat16"])
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("sa,sb,path", [((2104, 8296), (8296, 1000), "sum_runs"),
                                        ((1000, 8296), (8296, 2104), "sum_runs"),
                                        ((2100, 8292), (8292, 1000), "sum_slices")], ids=str)
def test_matmul_stream_k_16_bit(dtype, layout, sa, sb, path):
    a, b = _operands(sa, sb, layout, "cuda", dtype)
    check_op(tinycuda.matmul, torch.matmul, [a, b])
    assert torch.equal(tinycuda.matmul(a, b), tinycuda.matmul(a, b))
    hopper = torch.cuda.get_device_capability() >= (9, 0)  # else no wgmma: split-K on the mma kernel
    assert launched(lambda: tinycuda.matmul(a, b), (path if hopper else "sum_slices") + "_kernel")


# Batched with more output tiles than blocks (3 x 6 x 9 = 162 of 128 x 256):
# the wgmma epilogue's TMA stores address C as (column, row, batch) boxes, a
# tile's last rows (700 = 5 x 128 + 60) and columns (2056 = 8 x 256 + 8) clipped.
@requires_cuda
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["float16", "bfloat16"])
@pytest.mark.parametrize("variant", ["auto", "wgmma"])
def test_matmul_batched_more_tiles_than_blocks(dtype, variant):
    a, b = _operands((3, 700, 64), (3, 64, 2056), "NN", "cuda", dtype)
    ours = tinycuda.matmul if variant == "auto" else variants.get("matmul", variant)
    check_op(ours, torch.matmul, [a, b], grad=False)


# An out over more tiles than blocks (17 x 9 = 153 of 128 x 256 against 132 SMs; 5 k-tiles), written and
# then added into: ragged rows (2100 = 16 x 128 + 52, the last tile's second consumer wholly past M) and a
# last box clipped to 8 of its columns (2056 = 8 x 256 + 8). The wgmma kernel's TMA stores, its float32
# reduce-adds (c_float), and for a 16-bit out the old boxes loaded by TMA, one box ahead, the first while the
# tile's k-tiles run, then P + old rounded once.
@requires_cuda
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["float16", "bfloat16"])
@pytest.mark.parametrize("c_float", [False, True], ids=["c_dtype", "c_float"])
@pytest.mark.parametrize("algo", ["auto", "wgmma"])
def test_matmul_out_more_tiles_than_blocks(dtype, c_float, algo):
    from tinycuda import capi
    a, b = _operands((2100, 320), (320, 2056), "NN", "cuda", dtype)
    out = torch.full((2100, 2056), float("nan"), device="cuda", dtype=torch.float32 if c_float else dtype)
    capi.matmul(a, b, out=out, c_float=c_float, algo=f"TC_GEMM_{algo.upper()}")
    want = a.double() @ b.double()
    assert_matches(out, (a.float() @ b.float()).to(out.dtype), want, rtol32=1e-5, atol32=1e-5)
    c0 = torch.randn_like(out)
    out.copy_(c0)
    capi.matmul(a, b, out=out, accumulate=True, c_float=c_float, algo=f"TC_GEMM_{algo.upper()}")
    same = c0 + a.float() @ b.float() if c_float else torch.addmm(c0, a, b)
    assert_matches(out, same, c0.double() + want, rtol32=1e-5, atol32=1e-5)


# out += a @ b with one rounding, as addmm's beta = 1: a product of 257 (exact in float32, a tie between
# bfloat16's 256 and 258) added to an old -1 is 256 exactly; rounding the product first (256) and the sum
# again would give 255. Every algo the device runs, through the wgmma kernel's TMA path (264 columns).
@pytest.mark.parametrize("device", _devices())
def test_matmul_accumulate_rounds_once(device):
    from tinycuda import capi
    a = torch.ones(130, 257, device=device, dtype=torch.bfloat16)
    b = torch.ones(257, 264, device=device, dtype=torch.bfloat16)
    algos = ["auto"] if device == "cpu" else ["auto", "naive", "tiled", "regtile", "mma", "wgmma"]
    for algo in algos:
        out = torch.full((130, 264), -1.0, device=device, dtype=torch.bfloat16)
        capi.matmul(a, b, out=out, accumulate=True, algo=f"TC_GEMM_{algo.upper()}")
        assert (out == 256).all(), (algo, out.unique())
