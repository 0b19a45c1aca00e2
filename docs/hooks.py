"""MkDocs hooks (mkdocs.yml `hooks:`): before every build, write the generated reference
pages (docs/reference/config.md and cli.md, from platform/echoray via
echoray.docs_reference; committed, so a fresh clone's links resolve, and kept equal to
the code by tests/unit/test_docs.py), and serve the benchmark plots in
benchmarks/results/*.png as img/NAME.png without copying them into docs/."""

from __future__ import annotations

import sys
from pathlib import Path

from mkdocs.structure.files import File

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "benchmarks" / "results"


def on_pre_build(config) -> None:
    platform = str(REPO / "platform")
    if platform not in sys.path:
        sys.path.insert(0, platform)
    from echoray.docs_reference import write

    write(Path(config["docs_dir"]) / "reference")


def on_files(files, config):
    for png in sorted(RESULTS.glob("*.png")):
        files.append(File.generated(config, f"img/{png.name}", abs_src_path=str(png)))
    return files
