"""Policy: validation, presets, round trips (plain data; no twin involved)."""

from __future__ import annotations

import pytest

from loopcore import Policy, PolicyError
from loopcore.policy import DETECTORS


def test_default_thresholds_match_the_design_table():
    p = Policy.default()
    assert p.window == 30
    assert p.budgets["update_plan"] == (25, 50)
    assert (p.generic_warn, p.generic_block) == (10, 20)
    assert (p.poll_warn, p.poll_block) == (10, 20)
    assert (p.cycle_warn, p.cycle_block, p.cycle_periods) == (10, 20, (2, 3, 4, 5))
    assert p.global_block == 30
    assert p.unknown_block == 10
    assert (p.error_warn, p.error_block) == (3, 5)
    assert p.redundant_observation and p.redundant_warn == 1
    for tool in ("update_plan", "TodoWrite", "todowrite", "todo_write"):
        assert tool in p.budgets


def test_presets_listing_and_lookup():
    names = Policy.presets()
    assert names == (
        "default",
        "openclaw",
        "opencode",
        "gemini_cli",
        "openhands",
        "cline",
        "roo",
        "altimate",
    )
    for name in names:
        p = Policy.preset(name)
        assert isinstance(p, Policy) and p.name == name
    assert Policy.preset("gemini-cli").name == "gemini_cli"
    with pytest.raises(ValueError, match="unknown policy preset 'nope'.*default"):
        Policy.preset("nope")


def test_presets_switch_the_right_detectors():
    oc = Policy.openclaw()
    assert oc.cycle_periods == (2,) and not oc.tool_budget and not oc.redundant_observation
    assert oc.generic_repeat and oc.poll_no_progress and oc.global_breaker and oc.unknown_tool
    op = Policy.opencode()
    assert [d for d in DETECTORS if op.detector_on(d)] == ["consecutive_repeat"]
    assert op.repeat_block == 3
    cl = Policy.cline()
    assert (cl.repeat_warn, cl.repeat_block) == (3, 5)
    gm = Policy.gemini_cli()
    assert gm.cycle_unit == "repeats" and gm.cycle_block == 5 and gm.repeat_block == 5
    oh = Policy.openhands()
    assert oh.monologue and oh.error_block == 3 and oh.repeat_block == 5 and oh.cycle_block == 7


@pytest.mark.parametrize(
    "changes, match",
    [
        (
            {"generic_warn": 20, "generic_block": 20},
            r"generic_warn/generic_block.*warn threshold \(20\) must be below",
        ),
        ({"poll_warn": 30}, r"poll_warn/poll_block.*below the block threshold \(20\)"),
        ({"error_warn": 0}, r"Policy.error_warn must be a positive int; got 0"),
        ({"window": -1}, r"Policy.window must be a positive int"),
        ({"window": 10_000}, r"at most 4096"),
        ({"global_block": 2.5}, r"Policy.global_block must be a positive int; got 2.5"),
        ({"unknown_block": True}, r"Policy.unknown_block must be a positive int; got True"),
        ({"budgets": {"todo": (50, 25)}}, r"budgets\['todo'\].*must be below"),
        ({"budgets": {"todo": 5}}, r"must be a \(warn, block\) pair"),
        ({"cycle_periods": (1, 2)}, r"cycle_periods must be .* 2\.\.5"),
        ({"cycle_unit": "turns"}, r"cycle_unit must be 'calls' or 'repeats'"),
        ({"exec_tools": "bash"}, r"exec_tools must be a collection"),
        ({"cycle": 1}, r"Policy.cycle must be True or False"),
    ],
)
def test_validation_names_the_field(changes, match):
    with pytest.raises(PolicyError, match=match):
        Policy(**changes)


def test_policy_error_is_a_value_error():
    assert issubclass(PolicyError, ValueError)


def test_none_switches_a_level_off_and_budget_pairs_may_be_half_open():
    p = Policy(generic_warn=None, budgets={"todo": (None, 5), "plan": (3, None)})
    assert p.generic_warn is None and p.budgets["todo"] == (None, 5)


def test_replace_validates_and_marks_custom():
    p = Policy.openclaw().replace(window=8)
    assert p.window == 8 and p.name == "openclaw+custom"
    with pytest.raises(PolicyError):
        Policy.default().replace(cycle_warn=30)


def test_to_dict_round_trip_for_every_preset():
    for name in Policy.presets():
        p = Policy.preset(name)
        assert Policy.from_dict(p.to_dict()) == p
    with pytest.raises(PolicyError, match="unknown Policy fields: bogus"):
        Policy.from_dict({"bogus": 1})


def test_enabled_rejects_unknown_detectors():
    with pytest.raises(KeyError, match="unknown detector"):
        Policy.default().detector_on("nope")
