"""The documentation: every config key has a description for the generated reference,
the CLI reference lists every command and option, every results file the docs name
exists, and the site builds with `mkdocs build --strict` (a broken link, a missing page
or image fails)."""

import re
import subprocess
import sys

from echoray.cli import build_parser
from echoray.docs_reference import cli_markdown, config_keys, config_markdown, missing_descriptions
from helpers import REPO


def test_every_config_key_has_a_description():
    assert missing_descriptions() == []


def test_config_reference_lists_every_key_with_its_default():
    text = config_markdown()
    for key in config_keys():
        assert f"`{key.key}`" in text
    assert "| `train.target` | float \\| null | `0.97` | >= 0, `null` |" in text
    assert "`echo.stage` | str | `none` | `none`, `before_augment`, `after_augment`, `batch` |" in text


def test_cli_reference_lists_every_command_and_option():
    text = cli_markdown()
    parser = build_parser()
    (sub,) = [a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction"]
    for name, command in sub.choices.items():
        assert f"## `echoray {name}`" in text
        for action in command._actions:
            for option in action.option_strings:
                if option not in ("-h", "--help"):
                    assert f"`{option}" in text, (name, option)


def test_every_results_file_the_docs_name_exists():
    """Outside the tables `make bench-report` writes (they name files no run has written yet
    as "no results yet": tests/unit/test_bench_report.py)."""
    pages = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
    generated = re.compile(r"<!-- bench-report:([\w-]+) -->.*?<!-- /bench-report:\1 -->", re.S)
    named = {m for p in pages
             for m in re.findall(r"benchmarks/results/([\w.-]+\.(?:json|png))", generated.sub("", p.read_text()))}
    assert named, "the docs quote no results file"
    assert sorted(n for n in named if not (REPO / "benchmarks" / "results" / n).exists()) == []


def test_site_builds_strict(tmp_path):
    out = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "-f",
                          str(REPO / "mkdocs.yml"), "-d", str(tmp_path / "site")],
                         capture_output=True, text=True, timeout=300, cwd=REPO,
                         env={**__import__("os").environ, "NO_MKDOCS_2_WARNING": "1"})
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    site = tmp_path / "site"
    for page in ("concepts", "reference/config", "reference/cli", "how-to/cluster", "benchmarks/echo"):
        assert (site / page / "index.html").exists(), page
    assert (site / "img" / "echo_study_figure3.png").exists()
    assert "ray job submit --address" in (site / "how-to" / "cluster" / "index.html").read_text()
    assert not (site / "hooks.py").exists()


def test_committed_reference_pages_are_what_the_generator_writes():
    """docs/reference/config.md and cli.md are committed (a fresh clone's links resolve);
    after a change to a config field or a CLI option, regenerate them with
    `PYTHONPATH=platform python -m echoray.docs_reference docs/reference`."""
    ref = REPO / "docs" / "reference"
    assert (ref / "config.md").read_text() == config_markdown(), "regenerate docs/reference (see the docstring)"
    assert (ref / "cli.md").read_text() == cli_markdown(), "regenerate docs/reference (see the docstring)"


LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def _target(page, link: str):
    """The file a relative link of `page` names: docs' img/NAME.png is served from
    benchmarks/results/ (docs/hooks.py)."""
    path = (page.parent / link.split("#", 1)[0]).resolve()
    docs_img = (REPO / "docs" / "img").resolve()
    if path.parent == docs_img:
        return REPO / "benchmarks" / "results" / path.name
    return path


def test_every_relative_link_in_the_readme_and_docs_resolves_inside_the_repository():
    pages = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
    broken, outside = [], []
    for page in pages:
        for link in LINK.findall(page.read_text()):
            if re.match(r"[a-z][a-z0-9+.-]*:", link) or link.startswith("#"):
                continue  # a URL, or an anchor on the page
            target = _target(page, link)
            if not target.is_relative_to(REPO.resolve()):
                outside.append(f"{page.relative_to(REPO)}: {link}")
            elif not target.exists():
                broken.append(f"{page.relative_to(REPO)}: {link}")
    assert broken == [] and outside == []
    readme = (REPO / "README.md").read_text()
    assert "../" not in readme  # no file outside the repository, linked or quoted
