"""An ImageNet-like class-per-folder JPEG set, generated once and cached.

Content is smooth colour gradients + a few filled shapes + sensor-like noise, so
JPEG sizes land where real photos do (about 100 KB at 500x375, quality 90)
rather than the few KB of flat synthetic images; decode cost depends on that.
Cached under benchmarks/data/ (gitignored); regenerated only when missing.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw

DATA = Path(__file__).parent / "data"


def photo_like(rng: np.random.Generator, w: int = 500, h: int = 375) -> Image.Image:
    ys, xs = np.mgrid[0:h, 0:w].astype(np.float32)
    base = np.empty((h, w, 3), np.float32)
    for c in range(3):
        a, b, f = rng.uniform(-1, 1, 3)
        base[..., c] = 128 + 60 * np.sin(a * xs / 40 + b * ys / 50 + f * 6) + rng.uniform(-40, 40)
    img = Image.fromarray(base.clip(0, 255).astype(np.uint8))
    draw = ImageDraw.Draw(img)
    for _ in range(rng.integers(3, 8)):
        x0, y0 = rng.integers(0, w), rng.integers(0, h)
        box = (x0, y0, x0 + rng.integers(20, 200), y0 + rng.integers(20, 200))
        fill = tuple(int(v) for v in rng.integers(0, 256, 3))
        (draw.ellipse if rng.random() < 0.5 else draw.rectangle)(box, fill=fill)
    arr = np.asarray(img, np.float32) + rng.normal(0, 18, (h, w, 3))
    return Image.fromarray(arr.clip(0, 255).astype(np.uint8))


def jpeg_folder(n_files: int = 2000, n_classes: int = 10, seed: int = 0, tints: np.ndarray | None = None) -> Path:
    """`DATA/jpeg-N/<class>/<i>.JPEG`; returns the root. `tints` (n_classes x 3, added to
    every pixel of the class's images): `DATA/jpeg-tinted-N`, classes a model can tell apart."""
    root = DATA / (f"jpeg-{n_files}" if tints is None else f"jpeg-tinted-{n_files}")
    done = root / ".complete"
    if done.exists():
        return root
    rng = np.random.default_rng(seed)
    for i in range(n_files):
        c = i % n_classes
        d = root / f"n{c:08d}"
        d.mkdir(parents=True, exist_ok=True)
        img = photo_like(rng)
        if tints is not None:
            img = Image.fromarray((np.asarray(img, np.float32) + tints[c]).clip(0, 255).astype(np.uint8))
        img.save(d / f"{i:07d}.JPEG", quality=90)
    done.write_text("ok\n")
    return root


if __name__ == "__main__":
    import time

    t = time.time()
    r = jpeg_folder(200)
    sizes = [p.stat().st_size for p in r.rglob("*.JPEG")]
    print(r, len(sizes), f"{np.mean(sizes) / 1e3:.0f} KB mean", f"{time.time() - t:.1f}s")
