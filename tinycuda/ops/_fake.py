"""register_fake, with every argument named: the fake (meta) kernel of
`tinycuda::op` is called with all of its schema's arguments as keywords, the
defaults filled in from the schema (csrc/torch/<family>.cpp), so a fake names
the arguments it reads and never restates a default."""
import torch


def register_fake(qualname):
    def wrap(fn):
        ns, name = qualname.split("::")
        args = getattr(getattr(torch.ops, ns), name).default._schema.arguments

        def fake(*given, **kw):
            for a, v in zip(args, given):
                kw[a.name] = v
            for a in args:
                if a.name not in kw:
                    kw[a.name] = a.default_value
            return fn(**kw)

        torch.library.register_fake(qualname)(fake)
        return fn
    return wrap


def elementwise(qualname, like="x", same=()):
    """The fake of an elementwise op: arguments `same` must have one shape; the
    result is a new tensor like argument `like`."""
    op = qualname.split("::")[1]

    def fake(**args):
        for a, b in zip(same, same[1:]):
            torch._check(args[a].shape == args[b].shape,
                         lambda: f"tinycuda::{op}: {a} and {b} must have the same shape")
        return args[like].new_empty(args[like].shape)

    register_fake(qualname)(fake)
