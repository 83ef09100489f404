"""The suite's own scheduling: pyproject's pytest options give a test file to one pytest-xdist worker, so that a
module fixture is built once and the tests of a file never run at the same time (several edit a shared copy of the
smoke study one after another, tests/conftest.py's ``smoke_scratch``). A scheduler that ignored it would leave every
test passing and the suite slower; this test fails instead."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from tests.conftest import ROOT

# Two files of three tests each; every test records its worker, and the module fixture records each time it is built.
TEST_FILE = textwrap.dedent('''\
    import os
    from pathlib import Path

    import pytest

    LOG = Path(__file__).parent / "log"


    def _record(what):
        with LOG.open("a") as log:
            log.write(f"{what} {Path(__file__).stem} {os.environ.get('PYTEST_XDIST_WORKER', 'none')}\\n")


    @pytest.fixture(scope="module")
    def built():
        _record("built")


    @pytest.mark.parametrize("n", range(3))
    def test_one(built, n):
        _record("ran")
''')


@pytest.mark.slow  # a pytest with two workers inside the suite: 42 s on a 2-core EPYC of family 23
def test_the_two_workers_take_a_file_each_and_build_its_module_fixture_once(tmp_path):
    for name in ("test_a.py", "test_b.py"):
        (tmp_path / name).write_text(TEST_FILE)
    result = subprocess.run([sys.executable, "-m", "pytest", "-c", str(ROOT / "pyproject.toml"), "--rootdir",
                             str(tmp_path), "-q", "-p", "no:cacheprovider", str(tmp_path)],
                            cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    records = [line.split() for line in (tmp_path / "log").read_text().splitlines()]
    assert {worker for *_, worker in records} <= {"gw0", "gw1"}, "the suite no longer runs on pytest-xdist workers"
    for stem in ("test_a", "test_b"):
        built = [worker for what, file, worker in records if what == "built" and file == stem]
        ran = {worker for what, file, worker in records if what == "ran" and file == stem}
        assert len(built) == 1 and ran == set(built), f"{stem}: fixture built on {built}, tests ran on {ran}"


def test_workers_wait_passively_unless_the_caller_chose_a_policy(monkeypatch):
    from types import SimpleNamespace

    from tests.conftest import pytest_configure

    def configured(workers, worker=None, policy=None):
        for name, value in (("PYTEST_XDIST_WORKER", worker), ("OMP_WAIT_POLICY", policy)):
            monkeypatch.delenv(name, raising=False)
            if value is not None:
                monkeypatch.setenv(name, value)
        pytest_configure(SimpleNamespace(option=SimpleNamespace(numprocesses=workers)))
        import os

        return os.environ.get("OMP_WAIT_POLICY")

    assert configured(2) == "PASSIVE"  # the controller, before it starts two workers
    assert configured(2, policy="ACTIVE") == "ACTIVE"  # the caller's choice stands
    assert configured(0) is None and configured(None) is None  # one process: libgomp's default
    assert configured(2, worker="gw0") is None  # a worker inherits the controller's; it sets nothing itself
