"""The `tinycuda` command (also `python -m tinycuda`)."""
import argparse
import sys


def main(argv=None):
    parser = argparse.ArgumentParser(prog="tinycuda", description="tinycuda: hand-written CUDA kernels for PyTorch")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("info", help="GPU properties, the build, and the registered ops")
    from . import bench, gpt, train
    train.add_arguments(sub.add_parser("train", help="train an MLP on MNIST (the main job)"))
    bench.add_arguments(sub.add_parser("bench", help="tinycuda vs torch eager and torch.compile"))
    gpt.add_arguments(sub.add_parser("gpt", help="train a GPT on text, or sample from one"))
    args = parser.parse_args(argv)

    if args.command == "info":
        from . import info, ops  # noqa: F401  (ops loads the kernels; a failure explains itself)
        return info.run(args)
    if args.command == "train":
        return train.run(args)
    if args.command == "gpt":
        return gpt.run(args)
    return bench.run(args)


if __name__ == "__main__":
    sys.exit(main())
