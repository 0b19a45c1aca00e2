"""`platform/` holds the code but must never become a package: a top-level
`platform` package would shadow Python's stdlib module in every Ray worker."""

import subprocess
import sys


def test_no_platform_init(repo):
    assert not (repo / "platform" / "__init__.py").exists()


def test_import_platform_from_repo_root_is_the_stdlib(repo):
    code = "import platform, sysconfig; print(platform.__file__); print(platform.system())"
    out = subprocess.run([sys.executable, "-c", code], cwd=repo, capture_output=True, text=True, check=True)
    path, system = out.stdout.split()
    assert path.startswith(sysconfig_stdlib()) and system == "Linux"


def sysconfig_stdlib() -> str:
    import sysconfig

    return sysconfig.get_paths()["stdlib"]
