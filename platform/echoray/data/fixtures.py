"""Write small datasets in the real on-disk formats, with index-encoded pixels.

Sample i has label i % num_classes and its id written into the first pixels
(little-endian bytes of i), so a test or benchmark can check exactly which
sample every read returned. Used by the tests and by benchmarks that need
CIFAR-shaped data on machines that cannot download CIFAR.
"""

from __future__ import annotations

import gzip
import io
import pickle
import struct
from pathlib import Path

import numpy as np

from echoray.data.sources.cifar10 import RECORD


def encoded_image(i: int, size: int = 32, channels: int = 3) -> np.ndarray:
    """A uint8 HxWxC image whose first 4 pixels of channel 0 hold i's bytes."""
    rng = np.random.default_rng(i)
    img = rng.integers(0, 256, size=(size, size, channels), dtype=np.uint8)
    img[0, :4, 0] = np.frombuffer(int(i).to_bytes(4, "little"), dtype=np.uint8)
    return img


def decode_id(img: np.ndarray) -> int:
    return int.from_bytes(bytes(np.asarray(img)[0, :4, 0].astype(np.uint8)), "little")


def write_cifar10_bin(root: Path, per_batch: int = 100, batches: int = 5, test: int = 100) -> Path:
    """`cifar-10-batches-bin/` with data_batch_1..N.bin and test_batch.bin."""
    root = Path(root) / "cifar-10-batches-bin"
    root.mkdir(parents=True, exist_ok=True)

    def write(name: str, ids: range) -> None:
        out = bytearray()
        for i in ids:
            img = encoded_image(i)
            out.append(i % 10)
            out += img.transpose(2, 0, 1).tobytes()  # R, G, B planes
        assert len(out) == len(ids) * RECORD
        (root / name).write_bytes(bytes(out))

    for b in range(batches):
        write(f"data_batch_{b + 1}.bin", range(b * per_batch, (b + 1) * per_batch))
    write("test_batch.bin", range(test))
    return root


def write_cifar10_py(root: Path, per_batch: int = 100, batches: int = 5, test: int = 100) -> Path:
    """`cifar-10-batches-py/` pickles of {b'data': N x 3072 uint8, b'labels': [...]}."""
    root = Path(root) / "cifar-10-batches-py"
    root.mkdir(parents=True, exist_ok=True)

    def write(name: str, ids: range) -> None:
        data = np.stack([encoded_image(i).transpose(2, 0, 1).reshape(-1) for i in ids])
        batch = {b"data": data, b"labels": [i % 10 for i in ids], b"batch_label": name.encode()}
        (root / name).write_bytes(pickle.dumps(batch, protocol=2))

    for b in range(batches):
        write(f"data_batch_{b + 1}", range(b * per_batch, (b + 1) * per_batch))
    write("test_batch", range(test))
    return root


def idx_bytes(ids: range, size: int = 28, images: bool = True) -> bytes:
    """An IDX file's bytes: big-endian magic and dims, then the records. Images are
    encoded_image(i, size, 1) (id i in the first pixels), labels i % 10."""
    if images:
        body = b"".join(encoded_image(i, size, 1)[:, :, 0].tobytes() for i in ids)
        return struct.pack(">IIII", 0x00000803, len(ids), size, size) + body
    return struct.pack(">II", 0x00000801, len(ids)) + bytes(i % 10 for i in ids)


def write_idx(root: Path, train: int = 120, test: int = 40, size: int = 28, gz: bool = True) -> Path:
    """root/{train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz]: the MNIST family's layout."""
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    for prefix, n in (("train", train), ("t10k", test)):
        for stem, images in (("images-idx3", True), ("labels-idx1", False)):
            data = idx_bytes(range(n), size, images)
            name = f"{prefix}-{stem}-ubyte"
            if gz:
                (root / (name + ".gz")).write_bytes(gzip.compress(data, mtime=0))
            else:
                (root / name).write_bytes(data)
    return root


def png_bytes(img: np.ndarray, fmt: str = "PNG") -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(img).save(buf, format=fmt)
    return buf.getvalue()


def write_image_folder(root: Path, n: int = 60, classes: int = 3, size: int = 32) -> Path:
    """root/class_k/img_{i}.png, lossless so ids decode exactly."""
    root = Path(root)
    for i in range(n):
        d = root / f"class_{i % classes}"
        d.mkdir(parents=True, exist_ok=True)
        (d / f"img_{i:05d}.png").write_bytes(png_bytes(encoded_image(i, size)))
    return root


def write_parquet(path: Path, n: int = 80, classes: int = 4, size: int = 32, row_group: int = 16) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    table = pa.table({
        "image": [png_bytes(encoded_image(i, size)) for i in range(n)],
        "label": np.arange(n, dtype=np.int64) % classes,
    })
    pq.write_table(table, path, row_group_size=row_group)
    return path


def write_jpeg_folder(root: Path, n: int = 40, classes: int = 4, sizes=((64, 48), (48, 64), (80, 60))) -> Path:
    """root/class_k/img_{i}.jpg: photo-like JPEGs (smooth gradients + noise) of several
    sizes, as an ImageNet folder has; lossy, so tests compare decodes, not ids."""
    from PIL import Image

    root = Path(root)
    for i in range(n):
        w, h = sizes[i % len(sizes)]
        rng = np.random.default_rng(i)
        ys, xs = np.mgrid[0:h, 0:w]
        img = (xs[..., None] * rng.uniform(1, 4, 3) + ys[..., None] * rng.uniform(1, 4, 3)
               + rng.normal(0, 8, (h, w, 3)))
        d = root / f"class_{i % classes}"
        d.mkdir(parents=True, exist_ok=True)
        Image.fromarray(img.clip(0, 255).astype(np.uint8)).save(d / f"img_{i:05d}.jpg", quality=90)
    return root
