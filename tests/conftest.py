"""Shared fixtures. Every core test takes ``impl`` and so runs once per twin (ids c / py)."""

from __future__ import annotations

import pathlib

import pytest

from loopcore import _native_flag

ROOT = pathlib.Path(__file__).resolve().parent.parent
SHARED_TRACES = ROOT.parent / "shared" / "traces"


COMPONENTS = frozenset({"hashing", "guard", "burn", "shell", "textloop", "encode"})


ANALYSERS = frozenset({"analyse_burn", "analyse_many", "analyse_encoded"})


class Impl:
    """One implementation of the core: ``impl.hashing``, ``impl.guard``, ``impl.burn``...

    Attribute access imports the twin module of that component (``loopcore._native_X`` for
    ``c``, ``loopcore._X_py`` for ``py``) through the same loader the guard uses.
    ``impl.analyse_burn``, ``impl.analyse_many`` and ``impl.analyse_encoded`` are the public
    functions of that name run on this twin's burn kernel (the private factories behind them).
    """

    def __init__(self, name: str) -> None:
        self.name = name

    def __getattr__(self, component: str):
        if component in ANALYSERS:
            return self._analyser(component)
        if component not in COMPONENTS:  # dunders, and probes such as hypothesis' mock check
            raise AttributeError(component)
        mod = _native_flag.load_twin(component, self.name)
        setattr(self, component, mod)
        return mod

    def _analyser(self, name: str):
        import functools

        from loopcore import burn

        kernel = self.burn.analyse_columns
        private = {
            "analyse_burn": burn._analyse_burn,
            "analyse_many": burn._analyse_many,
            "analyse_encoded": _encoded_on,
        }[name]
        fn = functools.partial(private, kernel)
        setattr(self, name, fn)
        return fn

    def __repr__(self) -> str:
        return f"Impl({self.name!r})"


def _encoded_on(kernel, enc, *, charge_turn_output=False):
    from loopcore.encoded import _run_kernel

    return _run_kernel(kernel, enc, charge_turn_output)


_TWINS: dict[str, Impl] = {}


def twin(name: str) -> Impl:
    """The Impl of twin *name* ("c" or "py"), for tests that compare against a fixed twin."""
    if name not in _TWINS:
        _TWINS[name] = Impl(name)
    return _TWINS[name]


IMPL_PARAMS = [
    pytest.param("c", id="c", marks=pytest.mark.c_extension),
    pytest.param("py", id="py"),
]


@pytest.fixture(scope="session", params=IMPL_PARAMS)
def impl(request) -> Impl:
    if request.param == "c" and _native_flag.NO_EXTENSIONS:
        pytest.skip("LOOPCORE_NO_EXTENSIONS=1: the compiled core is deselected on purpose")
    return twin(request.param)


@pytest.fixture(scope="session")
def shared_traces() -> pathlib.Path:
    """../shared/traces beside the checkout; tests that need it skip when it is absent."""
    if not SHARED_TRACES.is_dir():
        pytest.skip(
            f"real traces not found at {SHARED_TRACES} (they live beside the checkout, never in it)"
        )
    return SHARED_TRACES


def package_env(base: dict | None = None) -> dict:
    """An environment for a child interpreter that imports the same loopcore as this test run.

    That is the installed package in CI (a clean clone's ``src/`` holds no compiled twin) and
    ``src/`` in an in-place developer build (``PYTHONPATH=src``); never a guess at ``src/``.
    """
    import os

    import loopcore

    env = dict(os.environ if base is None else base)
    where = os.path.dirname(os.path.dirname(os.path.abspath(loopcore.__file__)))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [where, env.get("PYTHONPATH")]))
    return env


@pytest.fixture
def make(impl):
    """``make(policy, **kw)``: a Guard on the twin the ``impl`` fixture selects (the peers'
    cases in tests/peers use it; modules with a ``make`` of their own keep theirs)."""
    from loopcore.guard import Guard, _make_guard

    def make(policy, **kw) -> Guard:
        return _make_guard(policy, impl=impl.name, **kw)

    return make
