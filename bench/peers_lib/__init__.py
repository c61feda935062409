"""Side-by-side comparison with gpurl's peers, used by ``bench/peers.py`` (needs the ``peers`` extra:
``pip install -e ".[peers]"``): the MPE suite's table (``mpe_suite``: mpe2's defaults, how each peer builds
a scenario, what differs from mpe2), the env-throughput runners (``envs``), one cell and one scenario of
the table (``cells``, ``suite``), the JAX IPPO baseline (``jax_ippo``) and the training comparison
(``train``); for ``bench/benchmarl_offpolicy.py``, BenchMARL's side (``benchmarl_side``) and the matrix products'
floor (``gemm_floor``). It lives with the benchmarks: the installed gpurl package never imports it. A library, not
a script: the bench scripts print the RESULT lines."""
