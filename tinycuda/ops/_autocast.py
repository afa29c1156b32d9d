"""torch.autocast for tinycuda's ops: inside `with torch.autocast(device,
dtype)` the ops below take their floating inputs in the autocast dtype
(bfloat16 or float16, read per call), as torch's own matmuls do, so a model
whose parameters are float32 runs its GEMMs and attention on tensor cores and
gets float32 gradients. float64 inputs are left alone, as torch's autocast
leaves them. The casts are torch's copies, one per use: unlike torch's own
ops, whose casts of leaf weights autocast caches for the region, a weight
used twice is cast twice.

Unlike torch's autocast, which runs layer_norm in float32, the norms here run
in the autocast dtype too: their kernels hold the statistics in float32
whatever the input, and their output is the next GEMM's input. Every other op
runs in the dtype it is given.

(torch.library.register_autocast fixes one dtype per op and device; this reads
the context's, so bfloat16 and float16 autocast both work.)"""
import torch

LOWER = ("linear", "linear_act", "matmul", "flash_attention", "flash_attention_qkvpacked",
         "fused_linear_cross_entropy", "layer_norm", "rms_norm")

_lib = torch.library.Library("tinycuda", "IMPL")


def register():
    for name in LOWER:
        for device in ("cuda", "cpu"):
            _register(name, device)


def _register(name, device):
    op = getattr(torch.ops.tinycuda, name).default
    key = getattr(torch._C.DispatchKey, "Autocast" + torch._C._dispatch_key_for_device(device))

    def cast(t, dtype):
        if isinstance(t, torch.Tensor) and t.dtype in (torch.float32, torch.float16, torch.bfloat16) and \
                t.device.type == device:
            return t.to(dtype)
        return t

    def kernel(_keyset, *args, **kwargs):  # kwargs: keyword-only flags (save_pre, algo)
        dtype = torch.get_autocast_dtype(device)
        with torch._C._ExcludeDispatchKeyGuard(torch._C.DispatchKeySet(key)):
            return op(*(cast(a, dtype) for a in args), **kwargs)

    _lib.impl(name, kernel, "Autocast" + torch._C._dispatch_key_for_device(device), with_keyset=True)
