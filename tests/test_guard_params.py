"""The engine's named parameters: the C struct and its Python mirror are one list."""

from __future__ import annotations

import pathlib
import re

import pytest

from loopcore import Policy
from loopcore._guard_params import PARAM_NAMES, engine_params

PXD = pathlib.Path(__file__).resolve().parent.parent / "src" / "_native" / "guard_params.pxd"


def test_pxd_struct_fields_equal_the_python_mirror():
    body = PXD.read_text().split("cdef struct Params:", 1)[1]
    fields = re.findall(r"^\s+int64_t\s+(\w+)\s*$", body, re.M)
    assert tuple(fields) == PARAM_NAMES


@pytest.mark.parametrize("name", Policy.presets())
def test_every_preset_maps_to_every_parameter(name):
    params = engine_params(Policy.preset(name))
    assert tuple(params) == PARAM_NAMES
    assert all(type(v) is int for v in params.values())


def test_engines_take_parameters_by_name(impl):
    params = engine_params(Policy.default())
    eng = impl.guard.Engine(params, [25], [50])
    assert eng.window == 30
    for broken in (
        {k: v for k, v in params.items() if k != "global_block"},
        {**params, "nope": 1},
        tuple(params.values()),
    ):
        with pytest.raises(ValueError, match="engine parameters"):
            impl.guard.Engine(broken, [25], [50])
