"""Outputs written into their inputs' memory (`mlirfuse.lowering.gpu.in_place`): which
(input, output) pairs the analysis of the `gpu` stage allows, and, on the GPU emulator, that an
allowed pair computes the same results in place while a refused one really would not. No GPU
needed."""

from __future__ import annotations

import numpy as np
import pytest
from gpu_emulator import Emulator, MemRef, of_array
from emulator_rules import kind_of

import mlirfuse
from mlirfuse import ops
from mlirfuse.lowering.gpu import toolchain
from mlirfuse.lowering.host_abi import in_place_line, parse_in_place

pytestmark = pytest.mark.skipif(toolchain.find().libdevice is None, reason="no libdevice")

RNG = np.random.default_rng(0)


def _compiled(fn, *args):
    return mlirfuse.jit(fn).compile(*args, backend="gpu", arch="sm_90")


def _emulate(stage: str, inputs: list, shapes: list[tuple[int, ...]], into: dict[int, int]) -> list[np.ndarray]:
    """The fusion run on the emulator with output k written into input `into[k]`'s memory."""
    args = [of_array(np.ascontiguousarray(a).copy()) if isinstance(a, np.ndarray) else a for a in inputs]
    outs = [args[into[k]] if k in into else of_array(np.full(s, np.nan, np.float32)) for k, s in enumerate(shapes)]
    emu = Emulator(stage)
    with emu.ctx:
        block = emu.entry.regions[0].blocks[0]
        values = [a if isinstance(a, MemRef) else kind_of(b.type).of(a) for a, b in zip(args + outs, block.arguments)]
    emu.run(values)
    return [m.data[:int(np.prod(s))].reshape(s) for m, s in zip(outs, shapes)]


def test_pointwise_outputs_may_be_written_into_inputs_read_at_the_same_index() -> None:
    """p - g * s: the update may overwrite p or g (each thread reads an element, then writes
    it); the 0-d s + 1 may not overwrite s, which every thread reads."""
    p, g = RNG.standard_normal((37, 50), np.float32), RNG.standard_normal((37, 50), np.float32)
    s = np.float32(0.5) * np.ones((), np.float32)
    c = _compiled(lambda p, g, s: (p - g * s, s + 1.0), p, g, s)
    assert c.kernel.in_place == {(0, 0), (1, 0)}
    got, _ = _emulate(c.stages["gpu"], [p, g, s], [(37, 50), ()], {0: 0})
    np.testing.assert_array_equal(got, p - g * s)


def test_a_transposed_read_keeps_its_input_apart(monkeypatch) -> None:
    """p + g.T: g's element (j, i) is read by another thread than the one writing (i, j), so
    the sum may overwrite p but not g. Written into g anyway, one block reads what another
    writes: a data race (the emulator's race check), and, run in the emulator's order (4
    squares of 32 x 32 a block, so 128 x 128 for several blocks), transposed tiles already
    overwritten."""
    from emulator_rules import RACES, EmulationError

    p, g = RNG.standard_normal((128, 128), np.float32), RNG.standard_normal((128, 128), np.float32)
    c = _compiled(lambda p, g: (p + ops.permute(g, (1, 0)),), p, g)
    assert c.kernel.in_place == {(0, 0)}
    want = p + g.T
    np.testing.assert_array_equal(_emulate(c.stages["gpu"], [p, g], [(128, 128)], {0: 0})[0], want)
    with pytest.raises(EmulationError, match="data race: thread .* of block 1 reads element .* of block 0 wrote"):
        _emulate(c.stages["gpu"], [p, g], [(128, 128)], {0: 1})
    monkeypatch.setattr(RACES, "on", False)
    assert not np.array_equal(_emulate(c.stages["gpu"], [p, g], [(128, 128)], {0: 1})[0], want)


def test_an_input_reduced_first_may_hold_a_later_kernels_output() -> None:
    """p - p.sum(-1) and g * 2: p's rows are summed by the normalization kernel (whose two
    variants are separate launches), so neither of its outputs goes into p, but g * 2, a later
    launch, may: p is read by then."""
    p, g = RNG.standard_normal((16, 300), np.float32), RNG.standard_normal((16, 300), np.float32)
    c = _compiled(lambda p, g: (p - p.sum(-1, keepdim=True), g * 2.0), p, g)
    assert (0, 0) not in c.kernel.in_place and (0, 1) in c.kernel.in_place and (1, 1) in c.kernel.in_place
    first, second = _emulate(c.stages["gpu"], [p, g], [(16, 300), (16, 300)], {1: 0})
    np.testing.assert_allclose(first, p - p.sum(-1, keepdims=True), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(second, g * 2)


def test_a_broadcast_input_keeps_apart() -> None:
    """x * row: row [1, N] is read by every row's threads, so nothing goes into it."""
    x, row = RNG.standard_normal((8, 40), np.float32), RNG.standard_normal((1, 40), np.float32)
    c = _compiled(lambda x, row: (x * row,), x, row)
    assert c.kernel.in_place == {(0, 0)}


def test_the_pairs_survive_the_disk_cache() -> None:
    """The host module's text (what the cache keeps) carries the pairs on its second line."""
    pairs = frozenset({(0, 0), (3, 1), (12, 7)})
    assert parse_in_place("// mlirfuse: 2 launch(es) a call\n" + in_place_line(pairs) + "module {}") == pairs
    assert parse_in_place("// mlirfuse: 2 launch(es) a call\nmodule {}") == frozenset()
