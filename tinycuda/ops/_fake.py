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
