"""tinycuda.optim.AdamW: torch.optim.AdamW whose step is tinycuda's multi-tensor
AdamW kernel (tinycuda.adamw_: a few launches for all parameters of one
device and dtype, not a few per parameter), with gradient-norm clipping
folded into the same pass.

Same constructor, param groups, state (step, exp_avg, exp_avg_sq) and
state_dict as torch.optim.AdamW, so a checkpoint's optimizer state loads into
either. amsgrad, maximize, capturable and differentiable are not supported
(an error says so); foreach and fused are accepted and mean nothing here.

max_grad_norm (tinycuda's): clip as torch.nn.utils.clip_grad_norm_(params,
max_grad_norm) would just before the step, but without its pass over the
gradients: the global norm (tinycuda.multi_tensor_l2norm, read on the device,
no sync) scales each gradient as the update reads it; the gradients
themselves are left unscaled. The norm of the last step is
`last_grad_norm` (a 0-dim tensor).

master_weights (tinycuda's): for float16 and bfloat16 parameters, keep a
float32 copy of each (state["master"]) and the moments in float32; the step
runs on the copy and writes the parameter as it rounded to nearest (adamw.h).
A model can then be held and run in 16 bits, with no casts a step, and still
be trained at float32's resolution. The copies are the parameters' truth:
load a checkpoint's optimizer state with its model. Float32 parameters are
stepped as without it."""
import torch

from . import ops

__all__ = ["AdamW"]


class AdamW(torch.optim.Optimizer):
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, amsgrad=False, *,
                 maximize=False, foreach=None, capturable=False, differentiable=False, fused=None,
                 max_grad_norm=None, master_weights=False):
        for name, value in (("amsgrad", amsgrad), ("maximize", maximize), ("capturable", capturable),
                            ("differentiable", differentiable)):
            if value:
                raise ValueError(f"tinycuda.optim.AdamW: {name}=True is not supported")
        if not 0.0 <= lr:
            raise ValueError(f"tinycuda.optim.AdamW: invalid lr {lr}")
        if not 0.0 <= eps:
            raise ValueError(f"tinycuda.optim.AdamW: invalid eps {eps}")
        if not (0.0 <= betas[0] < 1.0 and 0.0 <= betas[1] < 1.0):
            raise ValueError(f"tinycuda.optim.AdamW: invalid betas {betas}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"tinycuda.optim.AdamW: invalid weight_decay {weight_decay}")
        if max_grad_norm is not None and not max_grad_norm > 0:
            raise ValueError(f"tinycuda.optim.AdamW: max_grad_norm must be > 0, got {max_grad_norm}")
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, amsgrad=False, maximize=False,
                        foreach=foreach, capturable=False, differentiable=False, fused=fused)
        super().__init__(params, defaults)
        self.max_grad_norm = max_grad_norm
        self.master_weights = master_weights
        self.last_grad_norm = None

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        with_grad = [p for g in self.param_groups for p in g["params"] if p.grad is not None]
        for p in with_grad:
            if p.grad.is_sparse:
                raise RuntimeError("tinycuda.optim.AdamW: sparse gradients are not supported")
        norm = None
        if self.max_grad_norm is not None and with_grad:
            norm = self._grad_norm(with_grad)
            self.last_grad_norm = norm
        for group in self.param_groups:
            for flag in ("amsgrad", "maximize", "capturable", "differentiable"):
                if group.get(flag):  # set by add_param_group or a loaded state_dict: refused, not ignored
                    raise ValueError(f"tinycuda.optim.AdamW: {flag}=True (in a param group) is not supported")
            beta1, beta2 = group["betas"]
            buckets = {}
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if not state:  # torch.optim.AdamW's state, so that state_dicts load both ways
                    master = self.master_weights and p.dtype in (torch.float16, torch.bfloat16)
                    state["step"] = torch.tensor(0.0, dtype=torch.float32)
                    kw = dict(memory_format=torch.preserve_format, dtype=torch.float32 if master else p.dtype)
                    state["exp_avg"] = torch.zeros_like(p, **kw)
                    state["exp_avg_sq"] = torch.zeros_like(p, **kw)
                    if master:
                        state["master"] = p.detach().float()
                state["step"] += 1
                key = (p.device, p.dtype, int(state["step"].item()), "master" in state)
                buckets.setdefault(key, []).append((p, p.grad, state["exp_avg"], state["exp_avg_sq"],
                                                    state.get("master")))
            for (device, _, step, master), items in buckets.items():
                ps, gs, ms, vs, ws = (list(t) for t in zip(*items))
                ops.adamw_(ps, gs, ms, vs, lr=group["lr"], beta1=beta1, beta2=beta2, eps=group["eps"],
                           weight_decay=group["weight_decay"], step=step,
                           grad_norm=None if norm is None else norm.to(device, ops.adamw.norm_dtype(ps[0].dtype)),
                           max_grad_norm=self.max_grad_norm or 0.0, masters=ws if master else ())
        return loss

    def load_state_dict(self, state_dict):
        # torch casts each floating state tensor to its parameter's dtype: master weights and their
        # moments stay float32 (bf16 copies would lose what they are kept for)
        keep = {i: {k: st[k] for k in ("master", "exp_avg", "exp_avg_sq")}
                for i, st in state_dict["state"].items() if "master" in st}
        super().load_state_dict(state_dict)
        ids = [i for g in state_dict["param_groups"] for i in g["params"]]
        for i, p in zip(ids, (p for g in self.param_groups for p in g["params"])):
            for k, v in keep.get(i, {}).items():
                self.state[p][k] = v.to(p.device, torch.float32)

    def _grad_norm(self, params):
        """The global L2 norm of the gradients: one multi_tensor_l2norm per (device, dtype), combined
        (as clip_grad_norm_ combines its per-tensor norms) when there are several."""
        groups = {}
        for p in params:
            groups.setdefault((p.grad.device, p.grad.dtype), []).append(p.grad)
        norms = [ops.multi_tensor_l2norm(gs) for gs in groups.values()]
        if len(norms) == 1:
            return norms[0]
        device = norms[0].device
        return torch.linalg.vector_norm(torch.stack([n.to(device, torch.float64) for n in norms]))
