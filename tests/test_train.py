"""`tinycuda train`, the main job: the default run on the embedded digits
reaches >= 92% with every backend, the backends agree, and the MNIST readers
handle IDX files (raw, gzip, torchvision's layout) and reject broken ones."""
import gzip
import json
import os

import numpy as np
import pytest

from tinycuda import mnist
from tinycuda.cli import main


def test_default_run_reaches_92_percent_with_all_backends(tmp_path):
    out = tmp_path / "train.json"
    assert main(["train", "--json", str(out)]) == 0
    results = json.loads(out.read_text())["results"]
    final = {b: h[-1]["test_acc"] for b, h in results.items()}
    assert set(final) == {"ops", "capi", "torch"}
    assert min(final.values()) >= 0.92, final
    assert max(final.values()) - min(final.values()) <= 0.005, final


def _write_idx(path, array, gz):
    header = bytes([0, 0, 8, array.ndim]) + b"".join(int(d).to_bytes(4, "big") for d in array.shape)
    data = header + array.astype(np.uint8).tobytes()
    with (gzip.open if gz else open)(path, "wb") as f:
        f.write(data)


@pytest.mark.parametrize("layout,gz", [("flat", False), ("torchvision", True)])
def test_idx_reader(tmp_path, layout, gz):
    rng = np.random.default_rng(0)
    folder = tmp_path / "MNIST" / "raw" if layout == "torchvision" else tmp_path
    folder.mkdir(parents=True, exist_ok=True)
    arrays = {"train_images": rng.integers(0, 256, (12, 28, 28)), "train_labels": rng.integers(0, 10, 12),
              "test_images": rng.integers(0, 256, (5, 28, 28)), "test_labels": rng.integers(0, 10, 5)}
    for key, name in mnist.IDX_FILES.items():
        _write_idx(os.path.join(folder, name + (".gz" if gz else "")), arrays[key], gz)
    x_tr, y_tr, x_te, y_te = mnist.load_idx(str(tmp_path))
    assert x_tr.shape == (12, 784) and x_te.shape == (5, 784) and x_tr.dtype == np.float32
    np.testing.assert_array_equal(y_tr, arrays["train_labels"])
    np.testing.assert_allclose(x_te[0], (arrays["test_images"][0].ravel() / 255.0 - mnist.MEAN) / mnist.STD,
                               rtol=1e-5)


def test_idx_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"train-images-idx3-ubyte\[.gz\] not found"):
        mnist.load_idx(str(tmp_path))
    bad = tmp_path / "bad"
    bad.write_bytes(b"\x00\x00\x08\x03" + (10).to_bytes(4, "big") * 3 + b"\x00" * 50)
    with pytest.raises(ValueError, match=r"truncated or corrupt"):
        mnist.read_idx(str(bad))
    bad.write_bytes(b"PK\x03\x04 not an idx file")
    with pytest.raises(ValueError, match=r"bad magic number"):
        mnist.read_idx(str(bad))


def test_embedded_split_is_balanced():
    x_tr, y_tr, x_te, y_te = mnist.load_embedded()
    assert x_tr.shape == (4000, 784) and x_te.shape == (1000, 784)
    assert np.bincount(y_tr).tolist() == [400] * 10 and np.bincount(y_te).tolist() == [100] * 10
