"""scale_bias_relu: relu(x * scale + bias) in one kernel, bias broadcast over
the last dim; the backward (grad_x and grad_bias in one fused pass) is the
tinycuda::scale_bias_relu_backward op, fed the saved output."""
import torch

from ._fake import register_fake


__all__ = ["scale_bias_relu"]


def scale_bias_relu(x, bias, scale=1.0):
    """relu(x * scale + bias); x [..., C], bias [C], scale a Python float."""
    return torch.ops.tinycuda.scale_bias_relu(x, bias, float(scale))


@register_fake("tinycuda::scale_bias_relu")
def _fake(x, bias, scale):
    torch._check(x.dim() >= 1, lambda: "tinycuda::scale_bias_relu: x must have at least 1 dim")
    torch._check(bias.dim() == 1 and bias.shape[0] == x.shape[-1],
                 lambda: "tinycuda::scale_bias_relu: bias must have shape [x.shape[-1]]")
    return x.new_empty(x.shape)


@register_fake("tinycuda::scale_bias_relu_backward")
def _backward_fake(grad_out, out, scale, output_mask):
    return (out.new_empty(out.shape if output_mask[0] else (0,)),
            out.new_empty((out.shape[-1],) if output_mask[1] else (0,)))


def _setup(ctx, inputs, output):
    ctx.save_for_backward(output)
    ctx.scale = inputs[2]


def _backward(ctx, grad):
    (y,) = ctx.saved_tensors
    need_x, need_b = ctx.needs_input_grad[:2]
    gx, gb = torch.ops.tinycuda.scale_bias_relu_backward(grad, y, ctx.scale, [need_x, need_b])
    return gx if need_x else None, gb if need_b else None, None


torch.library.register_autograd("tinycuda::scale_bias_relu", _backward, setup_context=_setup)
