"""The device kit (scripts/device-kit, scripts/device-install), built and installed as on a GPU machine.

The device image holds the packages of scripts/device-image.txt and reaches no registry. Here the kit is
built for this interpreter (CI's Python; the device's is 3.12), installed with `--no-index` into a fresh
folder by scripts/device-install, and every `study` and `benchmarks` module is imported in a process that may load
only the standard library, the image's packages, the kit and the checkout: an import finder refuses every other
package of this environment. So a dependency the kit forgot fails here, not on a lent GPU.
"""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# Written as sitecustomize.py first on PYTHONPATH: every Python started in the test's environment (`study`,
# `dvc`) then refuses a top-level package that neither the image nor the kit provides.
IMAGE_ONLY = '''
import importlib.metadata, re, sys
from pathlib import Path

def _norm(name):
    return re.sub(r"[-_.]+", "-", name).lower()

IMAGE = {_norm(l) for l in Path(__IMAGE__).read_text().splitlines() if l.strip() and not l.startswith("#")}
SITE = Path(__SITE__)
BLOCKED = set()
for top, dists in importlib.metadata.packages_distributions().items():
    in_kit = (SITE / top).exists() or any(SITE.glob(top + ".*"))
    own = top in ("study", "benchmarks")  # the checkout's packages (study gpu-acceptance imports benchmarks)
    if not own and not in_kit and not any(_norm(d) in IMAGE for d in dists):
        BLOCKED.add(top)

class _ImageOnly:
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"{name} is neither in the device image nor in the kit", name=name)
        return None

sys.meta_path.insert(0, _ImageOnly())
'''

IMPORT_EVERY_MODULE = '''
import importlib, pkgutil, study, benchmarks
names = [m.name for package in (study, benchmarks)
         for m in pkgutil.walk_packages(package.__path__, package.__name__ + ".") if m.name != "study.__main__"]
for name in names:
    importlib.import_module(name)
import dvc.repo, kornia, pydantic
print(len(names), "modules")
'''


def _pypi_reachable() -> bool:
    try:
        socket.create_connection(("pypi.org", 443), timeout=5).close()
        return True
    except OSError:
        return False


@pytest.fixture(scope="module")
def kit(tmp_path_factory) -> Path:
    """The kit for this interpreter, without the dataset (pip's cache keeps a second build quick)."""
    if not _pypi_reachable():
        pytest.skip("pypi.org is unreachable: the kit cannot be downloaded here")
    folder = tmp_path_factory.mktemp("kit") / "kit"
    python = f"{sys.version_info.major}.{sys.version_info.minor}"
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "device-kit"), "--out", str(folder),
                           "--python-version", python, "--no-dataset"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "of the 64 MiB the device tool carries" in done.stdout
    return folder


def _image_only_env(tmp_path: Path, site: Path) -> Path:
    guard = tmp_path / "guard"
    guard.mkdir()
    image = repr(str(ROOT / "scripts" / "device-image.txt"))
    (guard / "sitecustomize.py").write_text(IMAGE_ONLY.replace("__IMAGE__", image).replace("__SITE__", repr(str(site))))
    return guard


def test_the_kit_holds_what_the_image_lacks_and_nothing_it_has(kit):
    image = {line.strip() for line in (ROOT / "scripts" / "device-image.txt").read_text().splitlines()
             if line.strip() and not line.startswith("#")}
    names = {w.name.split("-")[0].replace("_", "-").lower() for w in kit.glob("*.whl")}
    assert {"dvc", "kornia", "pydantic", "pydantic-core"} <= names
    assert not names & image, f"the kit repeats the image's {sorted(names & image)}"
    assert "torch" not in names and not any(n.startswith("nvidia") for n in names)
    assert "ray" not in names  # 75.6 MiB: larger than the device tool carries


def test_the_kit_installs_offline_and_every_study_module_imports_beside_the_image_alone(kit, tmp_path):
    site = tmp_path / "site"
    guard = _image_only_env(tmp_path, site)
    script = (f'export KIT="{kit}" DEVICE_SITE="{site}" PYTHON="{sys.executable}" PIP_NO_INDEX=1 && '
              f'. scripts/device-install && export PYTHONPATH="{guard}:$PYTHONPATH" && '
              f'python -c \'{IMPORT_EVERY_MODULE}\' && study gpu-acceptance --help >/dev/null && dvc version')
    done = subprocess.run(["bash", "-c", script], cwd=ROOT, capture_output=True, text=True,
                          env={"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "HOME": str(tmp_path)})
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    assert "modules" in done.stdout and "DVC version" in done.stdout
    assert (site / "dvc").is_dir() and (site / "bin" / "study").exists()


def test_the_guard_refuses_a_package_of_this_environment_that_neither_image_nor_kit_has(tmp_path):
    """The import check above would be worthless if the guard let this environment's packages through."""
    guard = _image_only_env(tmp_path, tmp_path / "empty-site")
    done = subprocess.run([sys.executable, "-c", "import dvc"], capture_output=True, text=True,
                          env={"PYTHONPATH": str(guard), "PATH": "/usr/bin:/bin"})
    assert done.returncode != 0 and "neither in the device image nor in the kit" in done.stderr
    done = subprocess.run([sys.executable, "-c", "import torch, yaml"], capture_output=True, text=True,
                          env={"PYTHONPATH": str(guard), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr[-2000:]
