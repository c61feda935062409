"""Side-by-side comparison with gpurl's peers, used by ``bench/peers.py`` (needs the ``peers`` extra:
``pip install -e ".[peers]"``): the env-throughput runners (``envs``), the JAX IPPO baseline
(``jax_ippo``) and the training comparison (``train``). It lives with the benchmarks: the installed
gpurl package never imports it. A library, not a script: ``bench/peers.py`` prints the RESULT line."""
