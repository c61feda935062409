"""TrainConfig (gpurl/train/config.py): the run's fields and the algorithm's typed parameters
(gpurl/algos/params.py, ppo_params.py, q_params.py); precedence, validation, derived values, saved forms; and
the CLI front (gpurl/train/cli.py) that builds it from flags."""
from __future__ import annotations

import dataclasses

import pytest

from gpurl.algos import (ALGORITHMS, BUILT_IN, A2CParams, DDPGParams, MAPPOParams, PPOParams, QParams, SACParams,
                         TD3Params)
from gpurl.algos.params import default_of, param_fields
from gpurl.envs.tag_continuous.params import TAG_SMALL
from gpurl.train.cli import build_parser, config_from_args
from gpurl.train.config import RUN_FIELDS, TrainConfig, build_config
from gpurl.train.presets import PRESETS

pytestmark = pytest.mark.cpu


def defaults(algo: str) -> dict:
    """Every value of a fresh config of ``algo`` by flag name: the run's field defaults and its parameters'."""
    run = {f.name: default_of(f) for f in dataclasses.fields(TrainConfig) if f.name != "algo_params"}
    params = {name: default_of(f) for name, f in param_fields(ALGORITHMS[algo].params_type).items()}
    return {**run, **params, "algo": algo}


EXPLICIT = dict(iters=1, num_envs=8, frame_stack=3, ent_coef=0.02, hidden=(16,))


@pytest.mark.parametrize("preset", [None, *PRESETS])
def test_precedence_defaults_then_preset_then_explicit(preset):
    values = PRESETS.get(preset, {})
    algo = values.get("algo", "ppo")
    base = defaults(algo)
    # the explicit values the preset's algorithm reads (a value for a parameter it does not read is refused)
    explicit = {k: v for k, v in EXPLICIT.items() if k in base}
    c = build_config(preset, **explicit)
    assert type(c.algo_params) is ALGORITHMS[algo].params_type
    flat = c.flat()
    assert set(flat) == set(base)
    for name in base:
        if name == "preset":
            continue
        want = explicit[name] if name in explicit else values.get(name, base[name])
        if name == "clip_vloss" and want is None:  # derived: clipped where values are normalised
            want = flat.get("value_norm", False)
        assert flat[name] == want, name
    assert c.preset == preset
    if preset is not None:  # the preset does change something the explicit values leave alone
        assert any(values[k] != base[k] for k in values if k not in explicit)


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


def test_a2c_is_ppo_with_one_unclipped_epoch_by_default():
    p = build_config(iters=1, algo="a2c").algo_params
    assert type(p) is A2CParams and isinstance(p, PPOParams)
    assert (p.epochs, p.minibatches, p.clip_coef, p.clip_vloss) == (1, 1, 0.0, False)
    # PPO's parameters with other defaults: a value given is used, as for PPO
    assert build_config(iters=1, algo="a2c", epochs=2).algo_params.epochs == 2
    ppo = build_config(iters=1, algo="ppo", epochs=4, minibatches=8, clip_coef=0.3).algo_params
    assert (ppo.epochs, ppo.minibatches, ppo.clip_coef) == (4, 8, 0.3)


@pytest.mark.parametrize("algo, values, message", [
    ("ppo", dict(q_batch=3), "q_batch=3 is not read by algo 'ppo' .read by: iddpg, iql, isac, maddpg, masac, matd3, qmix, vdn."),
    ("iql", dict(recurrent="gru"), "recurrent='gru' is not read by algo 'iql' .read by: a2c, mappo, ppo."),
    ("ppo", dict(value_norm=True), "value_norm=True is not read by algo 'ppo' .read by: mappo."),
    ("a2c", dict(epochs=2, q_updates=1, critic_agent_id=False), "q_updates=1 is not read .*; critic_agent_id=False"),
])
def test_a_parameter_the_algorithm_does_not_read_is_refused_naming_its_readers(algo, values, message):
    with pytest.raises(ValueError, match=message):
        build_config(iters=1, algo=algo, **values)


def test_each_algorithm_declares_its_own_parameters():
    # tests may register more (tests/reinforce_algo.py)
    assert {name: ALGORITHMS[name].params_type for name in BUILT_IN} == {
        "maddpg": DDPGParams, "iddpg": DDPGParams, "matd3": TD3Params, "masac": SACParams, "isac": SACParams,
        "ppo": PPOParams, "a2c": A2CParams, "mappo": MAPPOParams, "iql": QParams, "vdn": QParams, "qmix": QParams}
    # the run's fields and an algorithm's parameters never share a name: each flag has one room
    for cls in ALGORITHMS.values():
        assert not RUN_FIELDS & set(param_fields(cls.params_type)), cls.name


def test_a_preset_with_another_algorithm_keeps_only_what_that_algorithm_reads():
    c = build_config("simple-spread", algo="ppo", iters=1)  # the preset is MAPPO's (value_norm=True)
    assert type(c.algo_params) is PPOParams and c.algo_params.lr == PRESETS["simple-spread"]["lr"]


def test_saved_forms_round_trip_and_an_old_flat_checkpoint_config_loads():
    c = build_config("simple-spread-qmix", iters=2)
    assert TrainConfig.from_dict(c.to_dict()) == c
    assert isinstance(c.to_dict()["algo_params"], dict)
    # a config saved before the algorithms declared their parameters: every field side by side, each
    # algorithm's values among them; the ones this algorithm does not read are dropped
    old = {**c.flat(), "epochs": 4, "clip_coef": 0.2, "recurrent": "none", "value_norm": False}
    assert TrainConfig.from_dict(old) == c
    with pytest.raises(ValueError, match="takes QParams, got algo_params of type PPOParams"):
        dataclasses.replace(c, algo_params=PPOParams()).validated()


def test_cli_help_shows_each_algorithms_default_and_readers():
    text = build_parser().format_help().replace("\n", " ")
    assert "(default: 4; a2c: 1; read by ppo, a2c, mappo; allowed: >= 1)" in " ".join(text.split())
    assert "--q-batch" in text and "--value-norm" in text


# ---- CLI ---------------------------------------------------------------------------------------------


def test_cli_flags_refine_the_preset():
    c = config_from_args(["--preset", "tag-small", "--iters", "1", "--hidden", "32,32", "--no-anneal-lr",
                          "--env-param", "num_runners=7", "--device", "cpu"])
    assert c.algo_params.hidden == (32, 32)
    assert c.algo_params.anneal_lr is False
    assert c.env_params == {**TAG_SMALL, "num_runners": 7}   # one param changed, the preset's others kept
    assert TAG_SMALL["num_runners"] != 7
    assert c.preset == "tag-small" and c.algo_params.frame_stack == PRESETS["tag-small"]["frame_stack"]


def test_cli_unknown_flag_exits(capsys):
    with pytest.raises(SystemExit) as err:
        config_from_args(["--iters", "1", "--frobnicate"])
    assert err.value.code == 2 and "--frobnicate" in capsys.readouterr().err


def test_cli_invalid_value_exits_naming_the_field(capsys):
    with pytest.raises(SystemExit) as err:
        config_from_args(["--preset", "tag-small", "--iters", "1", "--gamma", "2"])
    assert err.value.code == 2 and "gamma" in capsys.readouterr().err
