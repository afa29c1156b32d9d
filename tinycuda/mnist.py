"""MNIST for `tinycuda train`: the embedded 5,000 digits (tinycuda/data,
README there for origin and licence), or the standard IDX files for the full
60,000/10,000 set. Images come back as float32 [n, 784] normalized with the
usual MNIST mean and std, labels as int64 [n]."""
import gzip
import os

import numpy as np

MEAN, STD = 0.1307, 0.3081
EMBEDDED = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "mnist5k.npz")
IDX_FILES = {"train_images": "train-images-idx3-ubyte", "train_labels": "train-labels-idx1-ubyte",
             "test_images": "t10k-images-idx3-ubyte", "test_labels": "t10k-labels-idx1-ubyte"}


def _normalize(images):
    return ((images.astype(np.float32) / 255.0 - MEAN) / STD).reshape(len(images), -1)


def load_embedded(train_per_class=400):
    """(x_train, y_train, x_test, y_test): 4,000/1,000 digits, the first 400 of
    each class for training and the other 100 for testing (the file is sorted
    by class, 500 each)."""
    try:
        with np.load(EMBEDDED) as d:
            images, labels = d["images"], d["labels"]
    except (OSError, KeyError, ValueError) as e:
        raise RuntimeError(f"tinycuda train: the embedded MNIST file {EMBEDDED} is missing or corrupt "
                           f"({e}); reinstall tinycuda or pass --data-dir") from e
    if images.shape != (5000, 784) or labels.shape != (5000,):
        raise RuntimeError(f"tinycuda train: {EMBEDDED} has unexpected shapes {images.shape}, {labels.shape}")
    rank = np.zeros(len(labels), dtype=np.int64)  # position of each digit within its class
    for c in range(10):
        idx = np.flatnonzero(labels == c)
        rank[idx] = np.arange(len(idx))
    train = rank < train_per_class
    return (_normalize(images[train]), labels[train].astype(np.int64),
            _normalize(images[~train]), labels[~train].astype(np.int64))


def _find(data_dir, name):
    for folder in (data_dir, os.path.join(data_dir, "MNIST", "raw"), os.path.join(data_dir, "raw")):
        for candidate in (name, name + ".gz"):
            path = os.path.join(folder, candidate)
            if os.path.exists(path):
                return path
    raise FileNotFoundError(f"tinycuda train: {name}[.gz] not found in {data_dir} (nor in its MNIST/raw); "
                            f"expected the four IDX files {', '.join(IDX_FILES.values())}")


def read_idx(path):
    """One IDX file (raw or gzip) as a uint8 array."""
    opener = gzip.open if path.endswith(".gz") else open
    try:
        with opener(path, "rb") as f:
            data = f.read()
    except (OSError, EOFError) as e:
        raise ValueError(f"tinycuda train: cannot read {path}: {e}") from e
    if len(data) < 8 or data[0] != 0 or data[1] != 0 or data[2] != 0x08 or data[3] not in (1, 3):
        raise ValueError(f"tinycuda train: {path} is not an unsigned-byte IDX file (bad magic number)")
    ndim = data[3]
    dims = [int.from_bytes(data[4 + 4 * i: 8 + 4 * i], "big") for i in range(ndim)]
    offset = 4 + 4 * ndim
    if len(data) - offset != int(np.prod(dims)):
        raise ValueError(f"tinycuda train: {path} is truncated or corrupt: header says {dims}, "
                         f"{len(data) - offset} bytes of data follow")
    return np.frombuffer(data, dtype=np.uint8, offset=offset).reshape(dims)


def load_idx(data_dir):
    """(x_train, y_train, x_test, y_test) from the standard MNIST IDX files."""
    arrays = {k: read_idx(_find(data_dir, name)) for k, name in IDX_FILES.items()}
    for split in ("train", "test"):
        n_img, n_lab = len(arrays[f"{split}_images"]), len(arrays[f"{split}_labels"])
        if n_img != n_lab:
            raise ValueError(f"tinycuda train: {split} set has {n_img} images but {n_lab} labels")
    return (_normalize(arrays["train_images"]), arrays["train_labels"].astype(np.int64),
            _normalize(arrays["test_images"]), arrays["test_labels"].astype(np.int64))
