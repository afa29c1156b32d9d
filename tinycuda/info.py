"""`tinycuda info`: the GPU, the build, and every registered op with its backends."""
import torch

from . import _loader

BACKENDS = ("CPU", "CUDA")


def gpu_lines():
    if not torch.cuda.is_available():
        return ["GPU: none visible (CPU kernels only)"]
    lines = []
    for i in range(torch.cuda.device_count()):
        p = torch.cuda.get_device_properties(i)
        clock_khz = getattr(p, "memory_clock_rate", 0)
        bus_bits = getattr(p, "memory_bus_width", 0)
        bw = f"{2 * clock_khz * 1e3 * bus_bits / 8 / 1e12:.2f} TB/s (theoretical)" if clock_khz and bus_bits else "n/a"
        l2 = getattr(p, "L2_cache_size", 0)
        lines += [
            f"GPU {i}: {p.name}",
            f"  compute capability {p.major}.{p.minor}, {p.multi_processor_count} SMs",
            f"  memory {p.total_memory / 2**30:.1f} GiB, bandwidth {bw}",
            f"  L2 {l2 / 2**20:.0f} MiB" if l2 else "  L2 n/a",
        ]
    return lines


def build_lines():
    b = _loader.build_info
    return [
        f"tinycuda build: {b.get('mode', '?')}, backends {', '.join(b.get('backends', []))}, "
        f"debug={b.get('debug')}",
        f"  built for torch {b.get('torch')}, CUDA {b.get('cuda') or '-'}, archs {b.get('arch_list') or '-'}",
        f"  running torch {torch.__version__}, CUDA {torch.version.cuda or '-'}",
    ]


def registered_ops():
    """{op name: [backends with a kernel]} for every tinycuda:: op."""
    names = sorted(n for n in torch._C._dispatch_get_all_op_names() if n.startswith("tinycuda::"))
    return {n: [k for k in BACKENDS if torch._C._dispatch_has_kernel_for_dispatch_key(n, k)]
            for n in names}


def run(args=None):
    for line in gpu_lines() + build_lines():
        print(line)
    print("ops:")
    for name, backends in registered_ops().items():
        print(f"  {name:<36} {' '.join(backends)}")
    return 0
