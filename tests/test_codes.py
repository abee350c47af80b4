"""The shared integer codes: src/_native/codes.pxd and its Python mirror loopcore._codes agree,
every module that uses a code takes it from them, and guard state dumps keep their layout."""

from __future__ import annotations

import pathlib
import re

import pytest

from loopcore import _codes
from loopcore.guard import _engine_params
from loopcore.policy import DETECTORS, Policy

ROOT = pathlib.Path(__file__).resolve().parent.parent
PXD = ROOT / "src" / "_native" / "codes.pxd"

_ENUM_MEMBER = re.compile(r"^    ([A-Z][A-Z0-9_]*) = (-?\d+)\b", re.MULTILINE)


def _pxd_codes() -> dict[str, int]:
    text = PXD.read_text(encoding="utf-8")
    return {name: int(value) for name, value in _ENUM_MEMBER.findall(text)}


def _py_codes() -> dict[str, int]:
    return {
        name: value
        for name, value in vars(_codes).items()
        if name.isupper() and isinstance(value, int) and not isinstance(value, bool)
    }


def test_the_pxd_and_the_python_mirror_hold_the_same_codes():
    pxd = _pxd_codes()
    assert len(pxd) >= 40  # the parser read the enums
    assert pxd == _py_codes()


def test_kind_names_follow_the_kind_codes():
    from loopcore.trace import KINDS

    assert KINDS == _codes.KIND_NAMES
    assert len(KINDS) == _codes.N_STEP_KINDS
    for code, name in enumerate(KINDS):
        assert getattr(_codes, "K_" + name.upper()) == code
    assert _codes.K_USER > _codes.K_OTHER  # events come after every step kind


def test_finding_and_detector_codes_name_every_finding_and_detector():
    from loopcore.decision import _DET_NAMES
    from loopcore.encoded import FINDING_KINDS

    assert len(FINDING_KINDS) == _codes.N_FINDING_KINDS
    finds = sorted(v for k, v in vars(_codes).items() if k.startswith("FIND_"))
    assert finds == list(range(1, _codes.N_FINDING_KINDS + 1))
    dets = {v for k, v in vars(_codes).items() if k.startswith("D_")}
    assert dets == set(_DET_NAMES) and len(dets) == len(DETECTORS)


def test_the_twins_export_the_shared_codes(impl):
    g, b, h = impl.guard, impl.burn, impl.hashing
    assert (g.OBSERVE, g.MUTATE, g.EXEC, g.ASK, g.OTHER) == (0, 1, 2, 3, 4)
    assert (g.USER, g.COMPACTION, g.CONDENSATION) == (
        _codes.K_USER,
        _codes.K_COMPACTION,
        _codes.K_CONDENSATION,
    )
    assert b.N_KINDS == _codes.N_FINDING_KINDS
    assert h.MAX_DEPTH == _codes.MAX_DEPTH


def test_the_stored_kind_layout_is_a_bijection():
    values = range(256)
    assert sorted(_codes.kind_to_stored(k) for k in values) == list(values)
    assert all(_codes.kind_from_stored(_codes.kind_to_stored(k)) == k for k in values)
    # the layout guard dumps have always had: other=0, observe=1, mutate=2, exec=3, ask=4
    assert [
        _codes.kind_to_stored(getattr(_codes, "K_" + n.upper())) for n in _codes.KIND_NAMES
    ] == [
        1,
        2,
        3,
        4,
        0,
    ]


@pytest.mark.parametrize(
    ("kind", "stored"),
    [("OBSERVE", 1), ("MUTATE", 2), ("EXEC", 3), ("ASK", 4), ("OTHER", 0), ("USER", 5)],
)
def test_guard_dumps_keep_the_stored_kind_layout(impl, kind, stored):
    """A state dump (what snapshots of every format hold) stores kinds as it always has."""
    eng = impl.guard.Engine(_engine_params(Policy()), [], [])
    st = eng.new_state()
    code = getattr(impl.guard, kind)
    if kind == "USER":
        eng.check(st, 7, 0, code, 0, 0, False, False, -1)
    else:
        eng.record(st, 7, 8, 9, 0, code, 0, 0, -1, 0)
    dump = eng.dump(st)
    assert dump[0] == impl.guard.DUMP_VERSION and dump[4] == 0  # no budget counters
    entry = dump[6:14]
    assert entry[4] == stored
    again = eng.load(dump)
    assert eng.dump(again) == dump
