"""The public API is the one docs/api.md lists: loopcore.__all__ equals the page's table."""

from __future__ import annotations

import pathlib
import re

import loopcore

ROOT = pathlib.Path(__file__).resolve().parent.parent
API_PAGE = ROOT / "docs" / "api.md"


def documented_api() -> list[str]:
    """The names docs/api.md's table lists, in its order."""
    text = API_PAGE.read_text(encoding="utf-8")
    table = text.split("<!-- api:begin -->", 1)[1].split("<!-- api:end -->", 1)[0]
    return re.findall(r"^\| `([A-Za-z_][A-Za-z0-9_]*)` \|", table, re.MULTILINE)


def test_all_is_the_documented_list():
    documented = documented_api()
    assert len(documented) == len(set(documented))
    assert sorted(loopcore.__all__) == sorted(documented)


def test_the_top_level_stays_small():
    assert len(loopcore.__all__) <= 21


def test_every_documented_name_resolves():
    for name in documented_api():
        assert getattr(loopcore, name) is not None, name


def test_plumbing_lives_in_submodules():
    import loopcore.adapters
    import loopcore.encoded
    import loopcore.hashing
    import loopcore.policy
    import loopcore.taxonomy
    import loopcore.trace

    for name in ("KINDS", "FORMATS", "PROFILES", "NO_EXTENSIONS", "MAX_DEPTH", "encode"):
        assert name not in loopcore.__all__
    assert loopcore.trace.KINDS and loopcore.adapters.FORMATS and loopcore.taxonomy.PROFILES
    assert loopcore.hashing.MAX_DEPTH == 256 and callable(loopcore.encoded.encode)
    assert loopcore.policy.DETECTORS


def test_no_public_function_takes_a_twin_parameter():
    import inspect

    import loopcore.burn
    import loopcore.encoded

    for fn in (
        loopcore.analyse_burn,
        loopcore.analyse_many,
        loopcore.encoded.analyse_encoded,
        loopcore.burn.would_repeat,
    ):
        params = inspect.signature(fn).parameters
        assert "impl" not in params and "implementation" not in params, fn.__name__
