"""data/held_out.py: a held-out share read and decoded without torch, as a run's evaluation keeps it."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest

from echoray.config import SourceConfig
from echoray.data import held_out
from echoray.data.fixtures import write_jpeg_folder
from echoray.data.held_out import HeldOutReader, center_crop
from echoray.data.sources import SourceError, index_source


def folder_index(root, holdout_fraction=0.25):
    return index_source(SourceConfig(kind="image_folder", path=str(root), image_size=32,
                                     holdout_fraction=holdout_fraction))


def test_shares_cover_the_split_once_in_eval_id_order_as_centre_crops(tmp_path):
    idx = folder_index(write_jpeg_folder(tmp_path / "jpg", n=40))
    whole = HeldOutReader(idx, 0, 1, 32).decode()
    shares = [HeldOutReader(idx, r, 3, 24).decode() for r in range(3)]
    assert whole.rows == len(idx.eval_ids) == 10 and whole.bad == {}
    assert np.array_equal(whole.chunks[0][2], idx.eval_ids)
    for r, share in enumerate(shares):
        (images, labels, ids), = share.chunks
        assert np.array_equal(ids, idx.eval_ids[r::3]) and images.shape == (len(ids), 24, 24, 3)
        assert images.flags.c_contiguous and images.dtype == np.uint8
        at = np.searchsorted(idx.eval_ids, ids)
        np.testing.assert_array_equal(images, center_crop(whole.chunks[0][0][at], 24))  # the 32-pixel decode's centre
        np.testing.assert_array_equal(labels, whole.chunks[0][1][at])


def test_a_share_over_the_cache_bound_reads_nothing_until_chunks_are_asked_for(tmp_path, monkeypatch):
    idx = folder_index(write_jpeg_folder(tmp_path / "jpg", n=40))
    monkeypatch.setattr(held_out, "CACHE_LIMIT_BYTES", 10 * 24 * 24 * 3 - 1)  # one byte short of 10 crops
    reader = HeldOutReader(idx, 0, 1, 24)
    calls = []
    inner = reader.reader.read_skipping
    reader.reader.read_skipping = lambda ids, split, **kw: calls.append(len(ids)) or inner(ids, split, **kw)
    assert not reader.fits and reader.decode() is None and calls == []
    monkeypatch.setattr(held_out, "READ_CHUNK", 4)
    assert [len(c[1]) for c in reader.chunks()] == [4, 4, 2] and calls == [4, 4, 2]
    monkeypatch.setattr(held_out, "CACHE_LIMIT_BYTES", 10 * 24 * 24 * 3)
    assert HeldOutReader(idx, 0, 1, 24).fits


def test_undecodable_files_are_skipped_and_named_up_to_the_bound_then_refused(tmp_path):
    root = write_jpeg_folder(tmp_path / "jpg", n=40)
    for f in root.rglob("*.jpg"):
        f.write_bytes(b"not a jpeg")
    lenient = index_source(SourceConfig(kind="image_folder", path=str(root), image_size=32, holdout_fraction=0.25,
                                        max_bad_fraction=1.0))
    held = HeldOutReader(lenient, 0, 1, 24).decode()
    assert held.rows == 0 and sorted(held.bad) == sorted(lenient.eval_ids.tolist())
    assert all(".jpg (" in v for v in held.bad.values())  # "class_k/img_i.jpg (the decoder's reason)"
    with pytest.raises(SourceError, match=r"10 undecodable held-out image\(s\), more than source.max_bad_fraction "
                                          r"allows \(0\)"):
        HeldOutReader(folder_index(root), 0, 1, 24).decode()


def test_decoding_the_split_imports_no_torch(tmp_path):
    """The module's contract: reading and decoding the split loads no torch."""
    root = write_jpeg_folder(tmp_path / "jpg", n=40)
    code = textwrap.dedent(f"""
        import sys
        from echoray.config import SourceConfig
        from echoray.data.sources import index_source
        from echoray.data.held_out import HeldOutReader
        idx = index_source(SourceConfig(kind="image_folder", path={str(root)!r}, image_size=32,
                                        holdout_fraction=0.25))
        held = HeldOutReader(idx, 0, 1, 24).decode()
        print(held.rows, "torch" in sys.modules)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.split() == ["10", "False"]
