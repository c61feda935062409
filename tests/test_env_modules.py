"""``env_modules`` (TrainConfig; CLI ``--env-module``): the modules that register custom envs are imported
by the entry points, never by validation: ``TrainConfig.import_env_modules()``, which ``train()`` (a fresh
run, a resumed one, every torchrun rank) and the CLI call; given as a .py path or a module name; and
``gpurl.register`` tolerates the same definition registered again (a re-import)."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

import gpurl
from gpurl.envs import import_env_module, registry
from gpurl.train.cli import config_from_args
from gpurl.train.config import TrainConfig, build_config
from gpurl.train.resume import resume_config

pytestmark = pytest.mark.cpu

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = "examples/custom_env.py"

TINY_ENV = '''
import gpurl


def make_tiny(**kwargs):
    return gpurl.make("tag_continuous", num_taggers=1, num_runners=2, **kwargs)


gpurl.register("tiny_tag", make_tiny)
'''


@pytest.fixture
def isolated(monkeypatch):
    """A private registry without the example's env, and sys.path; the env modules imported earlier in
    this process (other tests import the example) are set aside, and those the test imports forgotten."""
    prefixes = ("_gpurl_env_module_", "examples", "tiny_env_mod", "broken_env_mod")
    monkeypatch.setattr(registry, "_FACTORIES", {k: v for k, v in registry._FACTORIES.items() if k != "foraging"})
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.chdir(REPO)
    earlier = {name: sys.modules.pop(name) for name in list(sys.modules) if name.startswith(prefixes)}
    yield
    for name in [n for n in sys.modules if n.startswith(prefixes)]:
        del sys.modules[name]
    sys.modules.update(earlier)


def test_validation_imports_nothing(isolated):
    c = build_config(env="foraging", env_modules=(EXAMPLE,), iters=1)
    assert c.env_modules == (EXAMPLE,) and "foraging" not in gpurl.registered()
    assert not [n for n in sys.modules if n.startswith("_gpurl_env_module_")]


def test_a_py_path_is_imported_once_and_its_env_made(isolated):
    assert "foraging" not in gpurl.registered()
    c = build_config(env="foraging", env_modules=(EXAMPLE,), iters=1)
    c.import_env_modules()
    assert "foraging" in gpurl.registered()
    env = gpurl.make("foraging", num_envs=2, device="cpu", seed=0, num_agents=3)
    assert env.num_agents == 3 and type(env).__module__.startswith("_gpurl_env_module_custom_env_")
    module = sys.modules[type(env).__module__]
    c.import_env_modules()  # imported again (train, each rank): the module is not executed again
    assert import_env_module(str(REPO / EXAMPLE)) is module  # same file, same module
    assert gpurl.make("foraging", num_envs=1, device="cpu").__class__ is type(env)


def test_a_module_name_is_imported_from_the_working_directory(isolated, tmp_path, monkeypatch):
    (tmp_path / "tiny_env_mod.py").write_text(TINY_ENV)
    monkeypatch.chdir(tmp_path)  # not on sys.path: bench/tag_ppo.py's sys.path starts at bench/
    assert str(tmp_path) not in sys.path
    build_config(env="tiny_tag", env_modules=("tiny_env_mod",), iters=1).import_env_modules()
    env = gpurl.make("tiny_tag", num_envs=2, device="cpu")
    assert env.num_agents == 3


def test_the_cli_flag_is_repeatable_and_comma_separated(isolated):
    c = config_from_args(["--env-module", EXAMPLE, "--env-modules", "json,math", "--env", "foraging",
                          "--iters", "1"])
    assert c.env_modules == (EXAMPLE, "json", "math") and c.env == "foraging"
    assert "foraging" in gpurl.registered()


def test_config_round_trips_and_resume_re_imports(isolated):
    c = build_config(env="foraging", env_modules=(EXAMPLE,), iters=1)
    assert TrainConfig.from_dict(c.to_dict()) == c
    # A fresh process resuming the checkpoint: nothing registered yet.
    resumed = resume_config({"config": c.to_dict()}, {"iters": 2})
    assert resumed.env_modules == (EXAMPLE,) and resumed.iters == 2 and "foraging" not in gpurl.registered()
    resumed.import_env_modules()  # what train() does first
    assert "foraging" in gpurl.registered()
    moved = resume_config({"config": c.to_dict()}, {"env_modules": ["examples.custom_env"]})  # file moved
    moved.import_env_modules()
    assert moved.env_modules == ("examples.custom_env",) and "examples.custom_env" in sys.modules


@pytest.mark.parametrize("spec, words", [
    ("nope/missing_env.py", ["nope/missing_env.py", "no such file"]),
    ("no_such_env_module_xyz", ["no_such_env_module_xyz", "not found"]),
    ("broken_env_mod", ["broken_env_mod", "not_a_real_dependency_xyz"]),
])
def test_a_bad_module_is_a_clear_error_naming_it(isolated, tmp_path, monkeypatch, spec, words):
    (tmp_path / "broken_env_mod.py").write_text("import not_a_real_dependency_xyz\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ValueError, match="env_modules") as err:
        build_config(env_modules=(spec,), iters=1).import_env_modules()
    assert all(w in str(err.value) for w in words), str(err.value)


def test_a_bad_module_on_the_cli_exits_naming_it(isolated, capsys):
    with pytest.raises(SystemExit):
        config_from_args(["--env-module", "nope/missing_env.py", "--iters", "1"])
    assert "nope/missing_env.py" in capsys.readouterr().err


def test_re_registering_the_same_definition_is_fine_another_factory_is_not(isolated):
    by_path = import_env_module(EXAMPLE)
    by_name = import_env_module("examples.custom_env")  # the same file again, as another module
    assert by_path is not by_name and gpurl.make("foraging", num_envs=1, device="cpu").__class__ is by_name.Foraging
    gpurl.register("foraging", by_path.Foraging)  # and back: same file, same class
    with pytest.raises(ValueError, match="foraging.*already registered"):
        gpurl.register("foraging", lambda **kw: None)
    with pytest.raises(ValueError, match="tag_continuous"):
        gpurl.register("tag_continuous", by_path.Foraging)
