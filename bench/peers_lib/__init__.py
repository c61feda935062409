"""Support modules of ``bench/peers.py`` (not scripts): the env-throughput runners (``envs``), the JAX
IPPO baseline (``jax_ippo``) and the training comparison (``train``)."""
