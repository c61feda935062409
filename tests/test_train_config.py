"""TrainConfig (gpurl/train/config.py): precedence, validation, derived values; and the CLI front
(gpurl/train/cli.py) that builds it from flags."""
from __future__ import annotations

import dataclasses

import pytest

from gpurl.algos import ALGORITHM_SPECIFIC_FIELDS, ALGORITHMS
from gpurl.train.cli import config_from_args
from gpurl.train.config import PRESETS, TAG_SMALL, TrainConfig, build_config

pytestmark = pytest.mark.cpu


def default(name: str):
    f = TrainConfig.__dataclass_fields__[name]
    return f.default if f.default_factory is dataclasses.MISSING else f.default_factory()


EXPLICIT = dict(iters=1, num_envs=8, frame_stack=3, ent_coef=0.02, hidden=(16,))


@pytest.mark.parametrize("preset", [None, *PRESETS])
def test_precedence_defaults_then_preset_then_explicit(preset):
    values = PRESETS.get(preset, {})
    # the explicit values the preset's algorithm reads (a value for a field it does not read is refused)
    reads = ALGORITHMS[values.get("algo", default("algo"))].config_fields
    explicit = {k: v for k, v in EXPLICIT.items() if k not in ALGORITHM_SPECIFIC_FIELDS or k in reads}
    c = build_config(preset, **explicit)
    for f in dataclasses.fields(TrainConfig):
        if f.name == "preset":
            continue
        want = explicit[f.name] if f.name in explicit else values.get(f.name, default(f.name))
        if f.name == "clip_vloss" and want is None:  # derived: clipped where values are normalised
            want = c.value_norm
        assert getattr(c, f.name) == want, f.name
    assert c.preset == preset
    if preset is not None:  # the preset does change something the explicit values leave alone
        assert any(values[k] != default(k) for k in values if k not in explicit)


def test_explicit_total_steps_replaces_a_presets_iters():
    name = next(p for p in PRESETS if PRESETS[p].get("iters"))
    per_iter = 8 * PRESETS[name]["rollout_len"]
    c = build_config(name, num_envs=8, total_steps=3 * per_iter + 1)
    assert c.iters == 4 != PRESETS[name]["iters"]


def test_validated_copy_does_not_share_env_params():
    params = {"num_runners": 3}
    c = build_config(iters=1, env_params=params)
    c.env_params["num_runners"] = 4
    assert params == {"num_runners": 3}


def test_unknown_preset_lists_the_presets():
    with pytest.raises(ValueError, match="tag-nope") as err:
        build_config("tag-nope", iters=1)
    assert all(name in str(err.value) for name in PRESETS)


def test_from_dict_rejects_unknown_key_by_name():
    with pytest.raises(ValueError, match="learning_rate"):
        TrainConfig.from_dict({"iters": 1, "learning_rate": 0.1})


@pytest.mark.parametrize("overrides, field", [
    (dict(num_envs=0), "num_envs"),
    (dict(gamma=1.5), "gamma"),
    (dict(hidden=()), "hidden"),
    (dict(algo="sac"), "algo"),
    (dict(iters=0, total_steps=0), "total_steps"),
    (dict(num_envs=True), "num_envs"),        # a bool is not an int here
    (dict(lr=0.0), "lr"),
], ids=["num_envs", "gamma", "hidden", "algo", "no_length", "bool_num_envs", "lr"])
def test_validation_error_names_the_field(overrides, field):
    values = dict(iters=1, **overrides) if "iters" not in overrides else overrides
    with pytest.raises(ValueError, match=field):
        build_config(**values)


@pytest.mark.parametrize("total_steps, iters", [(96, 3), (97, 4), (100, 4), (1, 1)])
def test_total_steps_derive_iters_by_ceiling(total_steps, iters):
    c = build_config(num_envs=4, rollout_len=8, total_steps=total_steps)  # 32 env steps per iteration
    assert c.iters == iters
    assert build_config(num_envs=4, rollout_len=8, iters=2, total_steps=total_steps).iters == 2  # iters wins


def test_a2c_is_one_unclipped_epoch():
    c = build_config(iters=1, algo="a2c")
    assert (c.epochs, c.minibatches, c.clip_coef, c.clip_vloss) == (1, 1, 0.0, False)
    # values A2C would not use are refused, not silently replaced (issue 40); its own are accepted
    with pytest.raises(ValueError, match="epochs=4 is not read by algo 'a2c' .read by: mappo, ppo.; minibatches=8 .*; "
                                         "clip_coef=0.3 is not read"):
        build_config(iters=1, algo="a2c", epochs=4, minibatches=8, clip_coef=0.3)
    assert build_config(iters=1, algo="a2c", epochs=1, minibatches=1, clip_coef=0.0).epochs == 1
    ppo = build_config(iters=1, algo="ppo", epochs=4, minibatches=8, clip_coef=0.3)
    assert (ppo.epochs, ppo.minibatches, ppo.clip_coef) == (4, 8, 0.3)


# ---- CLI ---------------------------------------------------------------------------------------------


def test_cli_flags_refine_the_preset():
    c = config_from_args(["--preset", "tag-small", "--iters", "1", "--hidden", "32,32", "--no-anneal-lr",
                          "--env-param", "num_runners=7", "--device", "cpu"])
    assert c.hidden == (32, 32)
    assert c.anneal_lr is False
    assert c.env_params == {**TAG_SMALL, "num_runners": 7}   # one param changed, the preset's others kept
    assert TAG_SMALL["num_runners"] != 7
    assert c.preset == "tag-small" and c.frame_stack == PRESETS["tag-small"]["frame_stack"]


def test_cli_unknown_flag_exits(capsys):
    with pytest.raises(SystemExit) as err:
        config_from_args(["--iters", "1", "--frobnicate"])
    assert err.value.code == 2 and "--frobnicate" in capsys.readouterr().err


def test_cli_invalid_value_exits_naming_the_field(capsys):
    with pytest.raises(SystemExit) as err:
        config_from_args(["--preset", "tag-small", "--iters", "1", "--gamma", "2"])
    assert err.value.code == 2 and "gamma" in capsys.readouterr().err
