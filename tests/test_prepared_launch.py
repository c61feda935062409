"""Prepared CUDA launches (gpurl.kernels.prepared_launch) without a GPU: the parameter block is packed once and
only the varying data pointers are rewritten; an env step through a prepared launch neither types nor marshals
its arguments. The launches themselves are checked against ordinary ones on a GPU (test_gpu_prepared_launch.py).
"""
import ctypes

import numpy as np
import pytest
import torch

import gpurl
from gpurl.envs.launch_path import DirectLauncher, PreparedLauncher
from gpurl.kernels.prepared_launch import NotPrepared, PreparedLaunch, flatten_arguments

pytestmark = pytest.mark.cpu

pytest.importorskip("cuda.core._kernel_arg_handler")

# numba-cuda's flattening of a launch (n, x[3] float32, 5 as int32, True, 2.5 as float32, y[10] int32):
# an array is meminfo, parent, size, itemsize, data, shape..., strides...
X_DATA, Y_DATA = 0x7F00_0000_1000, 0x7F00_0000_9000
PARAMETERS = [7, 0, 0, 3, 4, X_DATA, 3, 4, ctypes.c_int32(5), True, ctypes.c_float(2.5), 0, 0, 10, 4, Y_DATA, 10, 4]
SIZES = [8, 8, 8, 8, 8, 8, 8, 8, 4, 1, 4, 8, 8, 8, 8, 8, 8, 8]


class RecordingDriver:
    """cuLaunchKernel's stand-in: decodes the parameter block it is given, as the driver would read it."""

    def __init__(self, result=0):
        self.calls, self.result = [], result

    def __call__(self, function, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
        values = []
        for k, size in enumerate(SIZES):
            address = ctypes.c_void_p.from_address(params + k * ctypes.sizeof(ctypes.c_void_p)).value
            values.append(ctypes.string_at(address, size))
        self.calls.append(dict(function=function, grid=(gx, gy, gz), block=(bx, by, bz), stream=stream,
                               values=values))
        return (self.result,)


def _packed(value, size):
    if isinstance(value, ctypes._SimpleCData):
        return bytes(value)
    return int(value).to_bytes(size, "little")


def test_launch_rewrites_only_the_varying_pointers():
    driver = RecordingDriver()
    launch = PreparedLaunch("fn", 4096, 32, PARAMETERS, varying=[5, 15], launch_kernel=driver)
    assert launch.pointers == (X_DATA, Y_DATA)
    launch.launch((0xAAAA_0000, 0xBBBB_0000), stream=77)
    launch.launch((0xCCCC_0000, Y_DATA), stream=78)
    first, second = driver.calls
    assert (first["function"], first["grid"], first["block"], first["stream"]) == ("fn", (4096, 1, 1), (32, 1, 1), 77)
    want = [_packed(v, s) for v, s in zip(PARAMETERS, SIZES)]
    for call, (x, y) in zip(driver.calls, [(0xAAAA_0000, 0xBBBB_0000), (0xCCCC_0000, Y_DATA)]):
        expected = list(want)
        expected[5], expected[15] = x.to_bytes(8, "little"), y.to_bytes(8, "little")
        assert call["values"] == expected
    assert second["stream"] == 78


def test_a_failed_launch_raises():
    launch = PreparedLaunch("fn", 1, 32, PARAMETERS, varying=[5], launch_kernel=RecordingDriver(result=700))
    with pytest.raises(RuntimeError, match="cuLaunchKernel failed: 700"):
        launch.launch((X_DATA,), stream=0)


def test_a_varying_parameter_that_is_not_a_pointer_is_refused():
    with pytest.raises(NotPrepared, match="parameter 8 did not pack as a 64-bit pointer"):
        PreparedLaunch("fn", 1, 32, [*PARAMETERS[:8], ctypes.c_int32(-1), *PARAMETERS[9:]], varying=[8],
                       launch_kernel=RecordingDriver())


class FakeDeviceArray:
    def __init__(self, pointer, shape):
        self.shape = shape
        self.__cuda_array_interface__ = {"data": (pointer, False), "shape": shape}


class FakeOverload:
    """An overload whose _prepare_args flattens as numba-cuda's does (arrays: 5 + 2 * ndim parameters)."""

    argument_types = ("int64", ("array", "int32"), "array")

    def __init__(self, pointer_shift=0):
        self.shift = pointer_shift

    def _prepare_args(self, ty, value, stream, written_back, parameters):
        if ty == "array":
            data = value.__cuda_array_interface__["data"][0] + self.shift
            parameters += [0, 0, int(np.prod(value.shape)), 4, data, *value.shape, *(4,) * len(value.shape)]
        else:
            parameters.append(value)


def test_flatten_finds_the_data_pointers_of_the_varying_arrays():
    x, y = FakeDeviceArray(X_DATA, (2, 3)), FakeDeviceArray(Y_DATA, (5,))
    parameters, indices = flatten_arguments(FakeOverload(), (9, (x, 4), y), varying=[(2,), (1, 0)])
    assert parameters[:2] == [9, 0] and parameters[indices[0]] == Y_DATA and parameters[indices[1]] == X_DATA
    assert indices == [1 + 9 + 1 + 4, 1 + 4]


def test_flatten_refuses_a_layout_it_does_not_know():
    x, y = FakeDeviceArray(X_DATA, (2, 3)), FakeDeviceArray(Y_DATA, (5,))
    with pytest.raises(NotPrepared, match=r"the data pointer of argument \(2,\) is not its parameter 15"):
        flatten_arguments(FakeOverload(pointer_shift=8), (9, (x, 4), y), varying=[(2,)])


class FakePrepared:
    """A prepared launch that records what a step passes it."""

    def __init__(self, pointers):
        self.pointers, self.launches = pointers, []

    def launch(self, pointers, stream):
        self.launches.append((tuple(pointers), stream))


def _forbid(reason):
    def fail(*args, **kwargs):
        raise AssertionError(f"a prepared step {reason}")
    return fail


def test_a_prepared_step_neither_types_nor_marshals_its_arguments(monkeypatch):
    """An env whose launches are prepared (as on CUDA after the first ones) steps through the prepared launch
    alone: no ordinary launch, no kernel view (marshalling), no Numba typing; the actions' and the outputs'
    pointers are those of this very call."""
    import numba

    env = gpurl.make("simple_tag", num_envs=4, seed=0, device="cpu", validate=False)
    env.reset()
    assert isinstance(env.launcher, DirectLauncher)  # CPU envs launch their own way (gpurl.kernels.direct_launch)
    own = tuple(t.data_ptr() for t in (env.obs, env.final_obs, env.reward, env.terminated, env.truncated,
                                       *env._state_buffers))
    # Prepared at a step into a trainer's slot: a later step without out= must still write the env's own buffers.
    fake = FakePrepared(tuple(range(0x1000, 0x1008)))
    env.launcher = PreparedLauncher(env)  # the CUDA path's launcher, over the CPU env's buffers
    env.launcher._prepared = {id(env._consts): (env._consts, fake)}
    monkeypatch.setattr(type(env.kernel), "launch", _forbid("launched the ordinary way"))
    monkeypatch.setattr("gpurl.envs.launch_path.kernel_view", _forbid("made a kernel view"))
    monkeypatch.setattr(numba, "typeof", _forbid("typed an argument"))
    monkeypatch.setattr("gpurl.envs.launch_path.current_stream_handle", lambda device: 1234)
    actions = torch.zeros(4, env.num_agents, 1, dtype=torch.int64)
    for _ in range(3):
        env.step(actions)
    assert fake.launches == [((actions.data_ptr(), *own), 1234)] * 3

    slot = gpurl.envs.StepOutputs(obs=torch.zeros_like(env.obs), reward=torch.zeros_like(env.reward),
                                  terminated=torch.zeros_like(env.terminated),
                                  truncated=torch.zeros_like(env.truncated), final_obs=torch.zeros_like(env.obs))
    int32_actions = actions.to(torch.int32)  # widened into the env's own int64 buffer first
    env.step(int32_actions, out=slot)
    pointers, _ = fake.launches[-1]
    assert pointers == (env._int64_actions.data_ptr(), slot.obs.data_ptr(), slot.final_obs.data_ptr(),
                        slot.reward.data_ptr(), slot.terminated.data_ptr(), slot.truncated.data_ptr(), *own[5:])

