"""Reading actions safely: a discrete value as an index that stays inside its table, a Box value clipped.

``env.step(actions)`` checks the values of the actions only with ``validate=True`` (that check reads
the device); with ``validate=False`` a value outside its space reaches the kernels. The built-in envs
read every discrete action through :func:`clamp_action`, so such a value selects the nearest valid action
instead of reading or writing outside an array: the rule of docs/specs/API.md ("Errors"), the same in
the CPU and CUDA builds (and in CUDA C twins, which write the same two comparisons). A custom env that
uses an action as an index (a table, a branch per action) reads it the same way:
``s.table[clamp_action(actions[e, i, 0], s.table.shape[0])]``. Box components go through :func:`clip_action`
(NaN acts as the lower bound).
"""
from .targets import device


@device
def clamp_action(a, n):
    """Discrete action value ``a`` (an int) of a space of ``n`` actions, clamped into ``0..n-1``: a
    negative value acts as 0 and a value >= n as n - 1 (a valid action passes unchanged). Two integer
    comparisons: free beside any use of the action."""
    if a < 0:
        return 0
    if a >= n:
        return n - 1
    return a


@device
def clip_action(a, low, high):
    """Box action component ``a`` (a float) clipped into ``[low, high]``; NaN acts as ``low``. Written with
    comparisons, not ``min``/``max``, so that NaN has one meaning in every build (a GPU's ``fmaxf`` drops a
    NaN operand, NumPy's ``maximum`` keeps it). Pass ``low``/``high`` of ``a``'s type (``np.float32``)."""
    if a >= low:  # false for NaN
        return a if a <= high else high
    return low
