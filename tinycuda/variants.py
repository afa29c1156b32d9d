"""The variant registry: the kept steps of a kernel's progression (naive ->
tiled -> register tiles for the GEMM; two-pass online -> registers for
softmax; naive -> shared -> padded for transpose_copy), runnable by name so a reader can measure and test what each step
buys, without a teaching-only argument on the everyday API.

    from tinycuda import variants
    variants.names("softmax")                     # ('online', 'registers')
    y = variants.call("softmax", "online", x, -1)  # the op, on that CUDA kernel
    tinycuda bench softmax --impls tinycuda,variants

How a variant reaches its kernel: the family's params struct has an `algo`
enum (the core's contract, csrc/include/tinycuda/<family>.h), and the torch op
a keyword-only `algo` (0 = auto) that only this registry passes; the public
functions (tinycuda.softmax, tinycuda.linear, tinycuda.nn.Linear) always run
`auto`. The CPU has one kernel per op and ignores the choice. Autograd works
through a variant (its backward runs the same algo where the backward has
variants, as linear's does).
"""
import torch

# op -> {variant: the algo code of its params struct}
_ALGOS = {
    "softmax": {"online": 1, "registers": 2},       # tc_softmax_algo
    "log_softmax": {"online": 1, "registers": 2},
    "linear": {"naive": 1, "tiled": 2, "regtile": 3, "mma": 4, "wgmma": 5},  # tc_gemm_algo
    "matmul": {"naive": 1, "tiled": 2, "regtile": 3, "mma": 4, "wgmma": 5},
    "flash_attention": {"naive": 1, "mma": 2, "wgmma": 3},  # tc_attention_algo
    "transpose_copy": {"naive": 1, "shared": 2, "padded": 3},  # tc_transpose_algo: a 2-D transpose only
}


def names(op):
    """The variants of `op` (a tuple; empty for an op with none)."""
    return tuple(_ALGOS.get(op, ()))


def ops():
    """The ops that have variants."""
    return tuple(_ALGOS)


def get(op, variant):
    """`op` as a function that runs the CUDA kernel `variant`, else the usual arguments."""
    table = _ALGOS.get(op)
    if table is None:
        raise ValueError(f"tinycuda.variants: {op!r} has no variants; ops with variants: {', '.join(_ALGOS)}")
    if variant not in table:
        raise ValueError(f"tinycuda.variants: {op} has no variant {variant!r}; its variants: {', '.join(table)}")
    algo, fn = table[variant], getattr(torch.ops.tinycuda, op)
    return lambda *args, **kwargs: fn(*args, algo=algo, **kwargs)


def call(op, variant, *args, **kwargs):
    """get(op, variant)(*args, **kwargs)."""
    return get(op, variant)(*args, **kwargs)
