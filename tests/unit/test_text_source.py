"""The text source: read units over byte ranges, packing and sample ids, tokenizers,
invalid UTF-8, refusals. Corpora are generated here (a few KB each)."""

import gzip
import random

import numpy as np
import pyarrow.fs as pafs
import pytest

from echoray.config import SourceConfig
from echoray.config_load import load_config
from echoray.data.sources import SourceError, index_source
from echoray.data.text import corpus, packing
from echoray.data.text.source import TextReader
from echoray.data.text.tokenizers import ByteTokenizer, train_bpe

LOCAL = pafs.LocalFileSystem()


def words(rng: random.Random, n: int) -> str:
    vocab = ["the", "kernel", "module", "driver", "memory", "über", "naïve", "page", "cache", "ring", "€uro"]
    return " ".join(rng.choice(vocab) for _ in range(n))


def write_lines(path, n_lines: int, seed: int) -> bytes:
    rng = random.Random(seed)
    data = "".join(words(rng, rng.randint(0, 14)) + "\n" for _ in range(n_lines)).encode()
    path.write_bytes(data)
    return data


def covered(fs, docs, units) -> dict[int, bytes]:
    """Each document's bytes as the units' pieces cover them, in order."""
    got: dict[int, list[tuple[int, bytes]]] = {}
    for unit in units:
        for doc_i, start, stop in unit:
            got.setdefault(doc_i, []).append((start, corpus.piece_bytes(fs, docs[doc_i], start, stop)))
    return {i: b"".join(b for _, b in sorted(parts)) for i, parts in got.items()}


def test_ranges_of_one_large_file_cover_every_byte_once_cut_after_newlines(tmp_path):
    data = write_lines(tmp_path / "big.txt", 3000, seed=1)
    docs = corpus.list_documents(LOCAL, str(tmp_path), [".txt"], "source.path")
    units = corpus.read_units(LOCAL, docs, [0], range_bytes=1024)
    pieces = [u[0] for u in units]
    assert all(len(u) == 1 for u in units) and len(units) > 10
    assert pieces[0][1] == 0 and pieces[-1][2] == len(data)
    for (_, _, stop), (_, start, _) in zip(pieces, pieces[1:], strict=False):
        assert stop == start and data[stop - 1 : stop] == b"\n"  # contiguous, each cut just after a newline
    assert covered(LOCAL, docs, units)[0] == data


def test_many_small_files_are_grouped_whole_and_small_gz_files_are_one_range(tmp_path):
    originals = {}
    for i in range(40):
        sub = tmp_path / f"d{i % 3}"
        sub.mkdir(exist_ok=True)
        data = write_lines(sub / f"f{i:02d}.rst", 30 + i, seed=i)
        if i % 4 == 0:  # some compressed, one of them larger than a range
            (sub / f"f{i:02d}.rst").unlink()
            payload = data * (30 if i == 0 else 1)
            (sub / f"f{i:02d}.rst.gz").write_bytes(gzip.compress(payload))
            data = payload
        originals[i] = data
    (tmp_path / "notes.bin").write_bytes(b"\x00\x01")  # not a document: suffix not listed
    docs = corpus.list_documents(LOCAL, str(tmp_path), [".rst"], "source.path")
    assert len(docs) == 40 and [d.path for d in docs] == sorted(d.path for d in docs)
    units = corpus.read_units(LOCAL, docs, list(range(40)), range_bytes=4096)
    assert 1 < len(units) < 40  # grouped
    flat = [p for u in units for p in u]
    assert sorted(p[0] for p in flat) == list(range(40))  # every document exactly once, whole
    assert all(p[1:] == (0, corpus.WHOLE) for p in flat)
    by_name = {d.path.split("/")[-1].split(".")[0]: i for i, d in enumerate(docs)}
    got = covered(LOCAL, docs, units)
    assert all(got[by_name[f"f{i:02d}"]] == originals[i] for i in range(40))


def big_gz_twins(tmp_path, members: int = 1) -> bytes:
    """The same lines as plain/big.txt and as gz/big.txt.gz (in `members` gzip members,
    as `cat a.gz b.gz` makes), compressed lightly so the .gz is many ranges stored."""
    (tmp_path / "plain").mkdir()
    (tmp_path / "gz").mkdir()
    data = write_lines(tmp_path / "plain" / "big.txt", 3000, seed=1)
    cut = [len(data) * k // members for k in range(members + 1)]
    (tmp_path / "gz" / "big.txt.gz").write_bytes(
        b"".join(gzip.compress(data[a:b], compresslevel=1) for a, b in zip(cut, cut[1:], strict=False)))
    return data


@pytest.mark.parametrize("members,spacing", [(1, None), (3, None), (1, 40_000), (3, 40_000)])
def test_a_large_gz_file_is_cut_where_its_plain_twin_is_and_read_range_by_range(tmp_path, monkeypatch,
                                                                                members, spacing):
    if spacing:  # access points every 40 KB (1 MiB and more in use): ranges start from the one before them
        monkeypatch.setattr(corpus, "gz_access_spacing", lambda doc, range_bytes: spacing)
    data = big_gz_twins(tmp_path, members)
    plain = corpus.list_documents(LOCAL, str(tmp_path / "plain"), [".txt"], "source.path")
    gz = [corpus.gz_indexed(LOCAL, d, 1024)
          for d in corpus.list_documents(LOCAL, str(tmp_path / "gz"), [".txt"], "source.path")]
    assert gz[0].size > 4 * 1024 and gz[0].length == len(data)
    assert bool(gz[0].gz_index) == bool(spacing)  # an index only where there are access points past the start
    units = corpus.read_units(LOCAL, gz, [0], range_bytes=1024)
    assert units == corpus.read_units(LOCAL, plain, [0], range_bytes=1024)  # the same cuts
    assert len(units) > 10 and all(len(u) == 1 for u in units)
    assert covered(LOCAL, gz, units)[0] == data  # every byte once, each range read on its own
    ends = [corpus.ends_document(gz[0], stop) for (_, _, stop), in units]
    assert ends == [False] * (len(units) - 1) + [True]


def test_a_large_gz_corpus_packs_the_sequences_of_the_same_text_stored_plain(tmp_path):
    big_gz_twins(tmp_path)
    (tmp_path / "eval").mkdir()
    write_lines(tmp_path / "eval" / "held.txt", 200, seed=5)
    idx = {kind: index_source(SourceConfig(kind="text", path=str(tmp_path / kind), seq_len=32,
                                           eval_path=str(tmp_path / "eval")))
           for kind in ("plain", "gz")}
    assert idx["gz"].details["train_units"] == idx["plain"].details["train_units"]
    assert np.array_equal(idx["gz"].details["train_base"], idx["plain"].details["train_base"])
    n = len(idx["gz"].details["train_units"])
    rows = {k: TextReader(i).read_units("train", np.zeros(n, np.int64), np.arange(n)) for k, i in idx.items()}
    assert np.array_equal(rows["gz"]["sample_id"], rows["plain"]["sample_id"])
    assert np.array_equal(rows["gz"]["tokens"], rows["plain"]["tokens"])


@pytest.mark.parametrize("damage", ["truncated", "trailing garbage"])
def test_a_damaged_large_gz_is_refused_at_indexing_naming_the_file(tmp_path, damage):
    big_gz_twins(tmp_path)
    path = tmp_path / "gz" / "big.txt.gz"
    raw = path.read_bytes()
    path.write_bytes(raw[: len(raw) // 2] if damage == "truncated" else raw + b"not gzip at all")
    (tmp_path / "eval").mkdir()
    (tmp_path / "eval" / "held.txt").write_bytes(b"held out\n" * 200)
    with pytest.raises(SourceError, match=r"big\.txt\.gz"):
        index_source(SourceConfig(kind="text", path=str(tmp_path / "gz"), seq_len=32,
                                  eval_path=str(tmp_path / "eval")))


def test_exclude_globs_leave_documents_out_and_an_empty_corpus_names_the_path(tmp_path):
    (tmp_path / "translations").mkdir()
    write_lines(tmp_path / "translations" / "zh.rst", 5, 0)
    write_lines(tmp_path / "en.rst", 5, 0)
    docs = corpus.list_documents(LOCAL, str(tmp_path), [".rst"], "source.path", ["translations/*"])
    assert [d.path.split("/")[-1] for d in docs] == ["en.rst"]
    with pytest.raises(SourceError, match=f"source.path {tmp_path}: no text documents"):
        corpus.list_documents(LOCAL, str(tmp_path), [".md"], "source.path")


def make_corpus(tmp_path, n_docs=30, lines=60):
    tmp_path.mkdir(parents=True, exist_ok=True)
    for i in range(n_docs):
        write_lines(tmp_path / f"doc{i:02d}.txt", lines + 7 * i, seed=100 + i)
    return tmp_path


def text_source(path, **kw) -> SourceConfig:
    return SourceConfig(kind="text", path=str(path), seq_len=kw.pop("seq_len", 32), **kw)


def test_sequences_have_dense_stable_ids_whatever_the_read_order(tmp_path):
    cfg = text_source(make_corpus(tmp_path))
    idx, again = index_source(cfg), index_source(cfg)
    assert np.array_equal(idx.details["train_base"], again.details["train_base"])
    n_units = len(idx.details["train_units"])
    reader = TextReader(idx)
    forward = reader.read_units("train", np.zeros(n_units, np.int64), np.arange(n_units))
    order = np.random.default_rng(3).permutation(n_units)
    shuffled = TextReader(again).read_units("train", np.ones(n_units, np.int64), order)
    assert np.array_equal(forward["sample_id"], np.arange(len(idx.train_ids)))  # dense 0..n-1
    pos = np.argsort(shuffled["sample_id"])
    assert np.array_equal(shuffled["sample_id"][pos], forward["sample_id"])
    assert np.array_equal(shuffled["tokens"][pos], forward["tokens"])
    assert forward["tokens"].shape == (len(idx.train_ids), 33) and forward["tokens"].dtype == np.uint16


def test_packing_is_the_document_bytes_with_end_of_document_between(tmp_path):
    make_corpus(tmp_path, n_docs=6, lines=30)
    write_lines(tmp_path / "long.txt", 400, 9)  # cut into ranges: end-of-document after its last one only
    idx = index_source(text_source(tmp_path, eval_path=None))
    reader, tok = TextReader(idx), ByteTokenizer()
    for u, unit in enumerate(idx.details["train_units"]):
        texts, ends = reader.texts("train", u)
        stream = np.concatenate([np.append(np.frombuffer(t.encode(), np.uint8).astype(np.int32), [tok.eod] * e)
                                 for t, e in zip(texts, ends, strict=True)])
        rows = reader.unit_rows("train", u)
        docs = idx.details["train_docs"]
        assert ends == [stop == corpus.WHOLE or stop == docs[d].size for d, _, stop in unit]
        assert np.array_equal(rows.reshape(-1), stream[: rows.size])  # the short tail alone dropped
        assert len(stream) - rows.size < 33


def test_held_out_documents_are_a_fixed_fraction_or_a_separate_path(tmp_path):
    make_corpus(tmp_path / "a", n_docs=20)
    idx = index_source(text_source(tmp_path / "a", holdout_fraction=0.25))
    train_docs = {p[0] for u in idx.details["train_units"] for p in u}
    eval_docs = {p[0] for u in idx.details["eval_units"] for p in u}
    assert len(eval_docs) == 5 and len(train_docs) == 15 and not train_docs & eval_docs
    make_corpus(tmp_path / "b", n_docs=3)
    sep = index_source(text_source(tmp_path / "a", eval_path=str(tmp_path / "b")))
    assert sep.details["stats"]["train"]["documents"] == 20 and sep.details["stats"]["eval"]["documents"] == 3


def test_invalid_utf8_is_replaced_and_counted(tmp_path):
    make_corpus(tmp_path, n_docs=4)
    (tmp_path / "doc00.txt").write_bytes(b"caf\xe9 ok\n" * 50 + b"\xff\xfe end\n" * 10)
    text, bad = packing.decode_utf8(b"caf\xe9 ok\n\xff\xfe")
    assert text == "caf\ufffd ok\n\ufffd\ufffd" and bad == 3
    idx = index_source(text_source(tmp_path, eval_path=str(tmp_path)))
    assert idx.details["stats"]["train"]["invalid_utf8_replaced"] == 50 + 20


@pytest.mark.parametrize("content, seq_len", [(b"", 8), (b"short\n", 64)])
def test_a_corpus_shorter_than_one_sequence_is_refused_naming_the_path(tmp_path, content, seq_len):
    (tmp_path / "a.txt").write_bytes(content)
    (tmp_path / "b.txt").write_bytes(content)
    with pytest.raises(SourceError, match=f"source.path {tmp_path}: the training text .* shorter than one "
                                          f"sequence of source.seq_len \\+ 1 = {seq_len + 1} tokens"):
        index_source(text_source(tmp_path, seq_len=seq_len))


def test_missing_folder_and_single_document_are_refused(tmp_path):
    with pytest.raises(SourceError, match=f"source.path {tmp_path / 'nope'}: no such directory"):
        index_source(text_source(tmp_path / "nope"))
    write_lines(tmp_path / "only.txt", 400, 0)
    with pytest.raises(SourceError, match="one document cannot be split"):
        index_source(text_source(tmp_path))


def test_bytes_tokenizer_round_trip_and_byte_lengths():
    tok = ByteTokenizer()
    text = "naïve €uro über\n"
    (ids,) = tok.encode([text])
    assert tok.decode(ids) == text and len(ids) == len(text.encode()) and ids.max() < 256
    assert tok.token_bytes[ids].sum() == len(text.encode()) and tok.token_bytes[tok.eod] == 0


def test_bpe_is_deterministic_round_trips_and_counts_bytes():
    rng = random.Random(0)
    docs = [words(rng, 200) for _ in range(30)]
    tok, again = train_bpe(docs, 300), train_bpe(docs, 300)
    assert tok.json_text == again.json_text and tok.vocab_size == 300
    text = "the naïve kernel über €uro cache\n  indented"
    (ids,) = tok.encode([text])
    assert tok.decode(ids) == text and len(ids) < len(text.encode())
    assert int(tok.token_bytes[ids].sum()) == len(text.encode()) and tok.token_bytes[tok.eod] == 0
    for t in (tok, ByteTokenizer()):  # the index counts with lengths, the actors pack encode's ids
        assert t.lengths([*docs, "", text]) == [len(i) for i in t.encode([*docs, "", text])]


def test_bpe_source_trains_once_and_reuses_a_saved_tokenizer(tmp_path):
    make_corpus(tmp_path / "c")
    idx = index_source(text_source(tmp_path / "c", tokenizer={"kind": "bpe", "vocab_size": 300}))
    spec = idx.details["tokenizer"]
    (tmp_path / "tokenizer.json").write_text(spec["json"])
    reused = index_source(text_source(tmp_path / "c", tokenizer={"kind": "bpe", "path": str(tmp_path / "tokenizer.json")}))
    assert reused.details["tokenizer"]["json"] == spec["json"] and idx.num_classes == 300
    assert np.array_equal(reused.details["train_base"], idx.details["train_base"])
    with pytest.raises(SourceError, match="source.tokenizer.path /nope/tok.json: no such file"):
        index_source(text_source(tmp_path / "c", tokenizer={"kind": "bpe", "path": "/nope/tok.json"}))


def test_a_bpe_index_counts_each_unit_as_the_actors_pack_it_and_times_its_phases(tmp_path):
    make_corpus(tmp_path / "c", n_docs=12)
    write_lines(tmp_path / "c" / "long.txt", 500, 7)  # cut into several ranges
    (tmp_path / "c" / "z.txt.gz").write_bytes(gzip.compress((tmp_path / "c" / "doc03.txt").read_bytes()))
    idx = index_source(text_source(tmp_path / "c", tokenizer={"kind": "bpe", "vocab_size": 300}))
    reader = TextReader(idx)
    for split in ("train", "eval"):
        base = idx.details[f"{split}_base"]
        units = idx.details[f"{split}_units"]
        assert len(base) == len(units) + 1
        assert [len(reader.unit_rows(split, u)) for u in range(len(units))] == list(np.diff(base))
    assert base[-1] == len(idx.eval_ids) and idx.details["train_base"][-1] == len(idx.train_ids)
    assert any(len(u) == 1 and u[0][2] != corpus.WHOLE  # a range of long.txt, in one split or the other
               for split in ("train", "eval") for u in idx.details[f"{split}_units"])
    phases = idx.details["stats"]["index_s"]
    assert set(phases) == {"list", "tokenizer", "units", "count"} and all(v >= 0 for v in phases.values())


@pytest.mark.parametrize("override, named", [
    (["model.name=small_cnn"], "source.kind: text goes with model.name: transformer_lm"),
    (["train.metric=accuracy", "train.target=0.5"], "train.metric: text runs score bits_per_byte"),
    (["preprocess.augment.ops=[{op: flip}]"], "preprocess.augment.ops: text has no input augmentation"),
    (["source.limit=10"], "source.limit"),
    (["model.heads=3"], "model.width (128) must be a multiple of model.heads (3)"),
])
def test_text_config_refusals_name_the_key(repo, override, named):
    from echoray.config_load import ConfigError

    with pytest.raises(ConfigError, match=named.replace("(", r"\(").replace(")", r"\)")):
        load_config(repo / "pipelines" / "lm_linux_doc.yaml", override)


def test_text_pipeline_has_no_augmentation_ops(repo):
    cfg = load_config(repo / "pipelines" / "lm_linux_doc.yaml")
    assert cfg.preprocess.augment.ops == [] and cfg.train.metric == "bits_per_byte"


def test_a_search_shares_one_trained_bpe_with_its_trials(tmp_path):
    from echoray.data.text.run_files import share_tokenizer

    make_corpus(tmp_path / "c", n_docs=10)
    cfg = text_source(tmp_path / "c", tokenizer={"kind": "bpe", "vocab_size": 300})
    idx = index_source(cfg)
    tree = {"source": cfg.model_dump(mode="json")}
    shared = share_tokenizer(idx, tree, tmp_path)
    assert shared["source"]["tokenizer"]["path"] == str((tmp_path / "tokenizer.json").resolve())
    assert tree["source"]["tokenizer"]["path"] is None  # the caller's tree is left as it was
    again = index_source(SourceConfig(**shared["source"]))
    assert again.details["tokenizer"]["json"] == idx.details["tokenizer"]["json"]
    bytes_idx = index_source(text_source(tmp_path / "c"))
    assert share_tokenizer(bytes_idx, tree, tmp_path / "none") is tree


def test_a_resumed_bpe_run_loads_the_tokenizer_it_saved(tmp_path, repo):
    from echoray.data.text.run_files import resumed_tokenizer

    cfg = load_config(repo / "pipelines" / "lm_linux_doc.yaml", ["source.tokenizer={kind: bpe, vocab_size: 300}"])
    assert resumed_tokenizer(cfg, tmp_path) is cfg  # nothing saved yet
    (tmp_path / "tokenizer.json").write_text("{}")
    assert resumed_tokenizer(cfg, tmp_path).source.tokenizer.path == str(tmp_path / "tokenizer.json")
    assert resumed_tokenizer(load_config(repo / "pipelines" / "lm_linux_doc.yaml"), tmp_path).source.tokenizer.path is None


def test_a_parquet_text_column_is_one_document_per_row(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = random.Random(5)
    rows = [words(rng, rng.randint(5, 60)) for _ in range(120)]
    rows[7] = None  # a null cell: an empty document
    (tmp_path / "p").mkdir()
    pq.write_table(pa.table({"text": rows[:80], "n": list(range(80))}), tmp_path / "p" / "a.parquet", row_group_size=10)
    pq.write_table(pa.table({"text": rows[80:], "n": list(range(40))}), tmp_path / "p" / "b.parquet", row_group_size=10)
    idx = index_source(text_source(tmp_path / "p", text_column="text", holdout_fraction=0.25))
    docs = idx.details["train_docs"]
    assert len(docs) == 12 and {d.row_group for d in docs} == set(range(8))
    assert idx.details["stats"]["eval"]["documents"] == 3 and idx.details["stats"]["train"]["documents"] == 9
    reader = TextReader(idx)
    texts = [t for u in range(len(idx.details["train_units"])) for t in reader.texts("train", u)[0]]
    eval_texts = [t for u in range(len(idx.details["eval_units"])) for t in reader.texts("eval", u)[0]]
    assert sorted(texts + eval_texts) == sorted(r for r in rows if r is not None)
    rows_of_unit = reader.unit_rows("train", 0)
    texts0, ends0 = reader.texts("train", 0)
    stream = np.concatenate([np.append(np.frombuffer(t.encode(), np.uint8), 256) for t in texts0])
    assert all(ends0) and np.array_equal(rows_of_unit.reshape(-1), stream[: rows_of_unit.size])
    with pytest.raises(SourceError, match="no column 'body' \\(source.text_column\\); it has text, n"):
        index_source(text_source(tmp_path / "p", text_column="body"))


@pytest.mark.parametrize("content", [None, b"tiny\n"])
def test_the_cli_refuses_an_empty_or_too_short_corpus_with_exit_2_naming_the_path(tmp_path, repo, content):
    import subprocess
    import sys

    corpus_dir = tmp_path / "corpus"
    corpus_dir.mkdir()
    for name in ("a.rst", "b.rst") if content is not None else ():
        (corpus_dir / name).write_bytes(content)
    run = tmp_path / "cwd"
    run.mkdir()
    code = (f"import sys; sys.path.insert(0, {str(repo / 'platform')!r}); from echoray.cli import main; "
            "sys.exit(main())")
    out = subprocess.run([sys.executable, "-c", code, "train", str(repo / "pipelines" / "lm_linux_doc.yaml"),
                          "--set", f"source.path={corpus_dir}"], cwd=run, capture_output=True, text=True, timeout=120)
    assert out.returncode == 2, out.stderr
    assert f"source.path {corpus_dir}" in out.stderr
    assert ("no text documents" if content is None else "shorter than one sequence") in out.stderr
    assert list(run.iterdir()) == []  # nothing started, nothing written
