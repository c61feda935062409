"""An unusable build-cache folder (gpurl/kernels/build_cache.py) is said once, in one line naming the variable,
the path and why, and the builds go to the next folder of the list (or are not cached): before, a
GPURL_CACHE_DIR that was a file made every process compile everything again without a word."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from gpurl.kernels import build_cache

pytestmark = pytest.mark.cpu


@pytest.fixture
def fresh(monkeypatch, tmp_path):
    """No verdict or warning of an earlier test; the default folder under tmp_path/xdg."""
    monkeypatch.setattr(build_cache, "_warned", set())
    monkeypatch.setattr(build_cache, "_usable", {})
    monkeypatch.delenv("NUMBA_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    return tmp_path / "xdg" / "gpurl" / "builds"


def test_a_file_gives_way_to_the_default_folder_said_once(fresh, monkeypatch, tmp_path, capsys):
    not_a_folder = tmp_path / "cache"
    not_a_folder.write_text("")
    monkeypatch.setenv("GPURL_CACHE_DIR", str(not_a_folder))
    assert build_cache.cache_dir() == fresh
    assert build_cache.cache_dir() == fresh
    err = capsys.readouterr().err
    assert err == (f"gpurl: GPURL_CACHE_DIR={not_a_folder} is unusable (it is a file, not a folder): CPU kernel "
                   f"builds are cached in {fresh} instead\n")


def test_a_folder_inside_a_file_and_every_candidate_unusable(fresh, monkeypatch, tmp_path, capsys):
    blocker = tmp_path / "blocker"
    blocker.write_text("")
    monkeypatch.setenv("GPURL_CACHE_DIR", str(blocker / "builds"))
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(blocker))
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))
    assert build_cache.cache_dir() is None
    lines = capsys.readouterr().err.splitlines()
    assert lines == [
        f"gpurl: GPURL_CACHE_DIR={blocker / 'builds'} is unusable ({blocker} is a file, not a folder): CPU kernel "
        "builds are not cached",
        f"gpurl: NUMBA_CACHE_DIR={blocker} ({blocker / 'gpurl-builds'}) is unusable ({blocker} is a file, not a "
        "folder): CPU kernel builds are not cached",
        f"gpurl: XDG_CACHE_HOME={blocker} ({blocker / 'gpurl' / 'builds'}) is unusable ({blocker} is a file, not a "
        "folder): CPU kernel builds are not cached",
    ]


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a read-only folder")
def test_a_read_only_folder_gives_way(fresh, monkeypatch, tmp_path, capsys):
    read_only = tmp_path / "ro"
    read_only.mkdir(mode=0o500)
    monkeypatch.setenv("GPURL_CACHE_DIR", str(read_only))
    assert build_cache.cache_dir() == fresh
    assert f"GPURL_CACHE_DIR={read_only} is unusable (it is not writable" in capsys.readouterr().err


def test_usable_folders_are_said_nothing_of_and_not_created(fresh, monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("GPURL_CACHE_DIR", str(tmp_path / "new" / "builds"))
    assert build_cache.cache_dir() == tmp_path / "new" / "builds"
    assert not (tmp_path / "new").exists()  # Numba makes it when it saves the first build
    assert capsys.readouterr().err == ""


TOY = textwrap.dedent('''
    import json
    import numpy as np
    from gpurl.kernels import EnvKernel, per_agent

    def phase(e, i, x):
        x[e, i] += np.float32(1)

    kernel = EnvKernel("cache_dir_toy", [per_agent(phase)], nargs=1)
    kernel.launch("cpu", 2, 3, np.zeros((2, 3), np.float32))
    print(json.dumps({"hits": sum(kernel.build("cpu").stats.cache_hits.values())}))
''')


def test_a_second_process_with_a_file_for_a_cache_dir_loads_its_build(tmp_path):
    module = tmp_path / "toy.py"
    module.write_text(TOY)
    (tmp_path / "file").write_text("")
    env = {**os.environ, "GPURL_CACHE_DIR": str(tmp_path / "file"), "XDG_CACHE_HOME": str(tmp_path / "xdg")}
    env.pop("NUMBA_CACHE_DIR", None)
    runs = [subprocess.run([sys.executable, str(module)], capture_output=True, text=True, env=env, cwd=tmp_path,
                           timeout=300) for _ in range(2)]
    assert all(r.returncode == 0 for r in runs), runs[-1].stderr[-3000:]
    assert [json.loads(r.stdout.splitlines()[-1])["hits"] for r in runs] == [0, 1]
    said = [line for line in runs[0].stderr.splitlines() if line.startswith("gpurl: GPURL_CACHE_DIR")]
    assert said == [f"gpurl: GPURL_CACHE_DIR={tmp_path / 'file'} is unusable (it is a file, not a folder): CPU kernel "
                    f"builds are cached in {tmp_path / 'xdg' / 'gpurl' / 'builds'} instead"]
