"""Fidelity of the burn analysis: its findings on ../shared/traces against the project's labels.

    python benchmarks/bench_fidelity.py [--traces DIR] [--labels FILE] [--impl c|py|both]
                                        [--cases] [--json FILE]

tests/labels/shared_traces.json labels steps of the real traces in ../shared/traces by the
trace's own coordinate (``{"message": 116}`` = ``messages[116]``), as waste (with the finding
kind a reviewer expects) or not waste, and lists the real loops found by reading the traces
(docs/fidelity.md has the schema and how labels are made). This script runs the analysis
(``analyse_many`` on the compiled kernel and on its pure twin), matches every charged step to
the labels by coordinate and prints, per twin:

* precision: charged labelled steps that are labelled waste / charged labelled steps;
* recall: labelled loops found (at least one of a loop's ``charged`` steps charged with its
  kind) / labelled loops; beside it the waste cases charged with the right kind;
* the tokens and steps charged per finding kind over all of ../shared/traces.

A step's coordinate is ``Step.ref`` when the adapter sets it; otherwise it is rebuilt here from
the trace file (``step_refs``), which knows the tool-call layout of the formats in
../shared/traces. ``--cases`` lists every labelled case and loop the analysis gets wrong.
Exit status 0 when the two twins agree, 1 otherwise (wrong labels are reported, not failed:
the test suite, tests/test_fidelity.py, asserts them).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# ../shared/traces beside the checkout; LOOPCORE_SHARED_TRACES names another place (a worktree
# that does not sit beside it).
DEFAULT_TRACES = os.environ.get("LOOPCORE_SHARED_TRACES") or os.path.join(
    os.path.dirname(ROOT), "shared", "traces"
)
DEFAULT_LABELS = os.path.join(ROOT, "tests", "labels", "shared_traces.json")

# mini-swe-agent 1.x's action regex: a text turn runs a command only with exactly one match.
_ACTION_RE = re.compile(r"```bash\s*\n(.*?)\n```", re.DOTALL)


# ----------------------------------------------------------------------------- labels


def load_labels(path: str = DEFAULT_LABELS) -> dict[str, Any]:
    """The label file as a dict; raises ValueError when a case or loop is malformed."""
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    if doc.get("schema") != 1:
        raise ValueError(f"{path}: unknown label schema {doc.get('schema')!r}")
    seen = set()
    for case in doc["cases"]:
        if case["verdict"] not in ("waste", "not_waste"):
            raise ValueError(f"{case['id']}: verdict must be waste or not_waste")
        if case["verdict"] == "waste" and not accepted_kinds(case):
            raise ValueError(f"{case['id']}: a waste case needs its finding kind")
        key = (case["file"], case.get("session"), _coord_key(case["at"]))
        if key in seen:
            raise ValueError(f"{case['id']}: a second label for the same step")
        seen.add(key)
    for loop in doc["loops"]:
        if not loop["charged"] or not accepted_kinds(loop):
            raise ValueError(f"{loop['id']}: a loop needs its kind and the steps to charge")
    return doc


def accepted_kinds(label: dict[str, Any]) -> tuple[str, ...]:
    """The finding kinds a label accepts (``kind`` is one name or a list of names)."""
    kind = label.get("kind")
    if kind is None:
        return ()
    return (kind,) if isinstance(kind, str) else tuple(kind)


def _coord_key(coord: dict[str, Any]) -> tuple:
    return tuple(sorted(coord.items()))


def ref_matches(ref: dict[str, Any] | None, coord: dict[str, Any]) -> bool:
    """True when *ref* (a step's trace coordinate) names the labelled coordinate.

    Only the label's keys are compared, so a ref that also carries ``file`` or an entry index
    still matches ``{"message": 116}``.
    """
    return ref is not None and all(ref.get(k) == v for k, v in coord.items())


# ----------------------------------------------------------------------------- coordinates


def _read_doc(path: str) -> Any:
    with (
        gzip.open(path, "rt", encoding="utf-8")
        if path.endswith(".gz")
        else open(path, encoding="utf-8") as f
    ):
        return json.load(f)


def _messages_of(trace: Any, doc: Any) -> tuple[list, bool]:
    """The message list a trace's steps come from, and whether it is a text-action trace."""
    if isinstance(doc, list):  # tau-bench: one entry per trace, source "path#n"
        n = int(trace.source.rpartition("#")[2])
        return doc[n]["traj"], False
    if isinstance(doc.get("messages"), list):
        text = doc.get("trajectory_format") == "mini-swe-agent-1" or not any(
            isinstance(m, dict) and m.get("tool_calls") for m in doc["messages"]
        )
        return doc["messages"], text
    return doc.get("history") or [], False


def _issues_call(m: dict, text: bool) -> bool:
    if text:
        content = m.get("content")
        return isinstance(content, str) and len(_ACTION_RE.findall(content)) == 1
    calls = m.get("tool_calls")
    return (
        bool(isinstance(calls, list) and calls)
        or bool(isinstance(m.get("action"), str) and m["action"].strip())
        or isinstance(m.get("function_call"), dict)
    )


def step_refs(trace: Any, doc: Any) -> list[dict[str, int]]:
    """``{"message": i}`` for every step of *trace*, rebuilt from its parsed file *doc*.

    A step's ``turn`` counts the model turns (assistant messages) of its trace, so turn k is the
    k-th assistant message of ``messages`` (mini-swe-agent), ``history`` (SWE-agent, demo
    messages aside) or the tau-bench entry's ``traj``; that also places the steps an adapter makes
    of turns that ran nothing. Raises ValueError when a tool-call step lands on a turn that
    issued no call (the layout is not one this knows: the adapter must set ``Step.ref``).
    """
    messages, text = _messages_of(trace, doc)
    turns = [
        i
        for i, m in enumerate(messages)
        if isinstance(m, dict) and m.get("role") == "assistant" and not m.get("is_demo")
    ]
    refs: list[dict[str, int]] = []
    for s in trace.steps:
        if not 0 <= s.turn < len(turns):
            raise ValueError(
                f"{trace.source}: step of turn {s.turn}, the trace has {len(turns)} model turns"
            )
        i = turns[s.turn]
        if s.name and getattr(s, "rejected", None) is None and not _issues_call(messages[i], text):
            raise ValueError(
                f"{trace.source}: the call {s.name!r} of turn {s.turn} is not at messages[{i}]"
            )
        refs.append({"message": i})
    return refs


def trace_refs(trace: Any, doc_cache: dict[str, Any]) -> list[dict[str, Any] | None]:
    """Each step's coordinate: ``Step.ref`` when the adapter set it, else :func:`step_refs`.

    When an adapter sets ``ref`` on some steps only, the others stay None (unmatched) unless the
    rebuilt coordinates line up with the steps one for one.
    """
    own = [getattr(s, "ref", None) for s in trace.steps]
    if all(r is not None for r in own):
        return own
    path = trace.source.rpartition("#")[0] if "#" in trace.source else trace.source
    if path not in doc_cache:
        doc_cache[path] = _read_doc(path)
    try:
        rebuilt = step_refs(trace, doc_cache[path])
    except ValueError:
        if any(r is not None for r in own):
            return own
        raise
    return [r if r is not None else b for r, b in zip(own, rebuilt)]


# ----------------------------------------------------------------------------- analysis


@dataclass
class Charge:
    """One charged step: its finding kind, coordinate, the first occurrence's coordinate."""

    kind: str
    ref: dict[str, Any] | None
    of_ref: dict[str, Any] | None
    tokens: int = 0


@dataclass
class Run:
    """The analysis of ../shared/traces by one twin."""

    impl: str
    charges: dict[tuple[str, str | None], list[Charge]] = field(default_factory=dict)
    by_kind: dict[str, dict[str, int]] = field(default_factory=dict)
    total_tokens: int = 0
    wasted_tokens: int = 0
    traces: int = 0
    steps: int = 0


def _rel(path: str, root: str) -> str:
    return os.path.relpath(path, root).replace(os.sep, "/")


def _finding_refs(finding: Any, refs: list) -> tuple[list, Any]:
    d = finding.to_dict()
    own = d.get("refs") or [None] * len(finding.steps)  # the analysis names its coordinates itself
    step_refs_ = [r if r is not None else refs[s] for r, s in zip(own, finding.steps)]
    of_ref = d.get("of_ref")
    if of_ref is None and finding.of_step is not None and 0 <= finding.of_step < len(refs):
        of_ref = refs[finding.of_step]
    return step_refs_, of_ref


def run_analysis(
    traces_dir: str,
    impl: str,
    labelled: Iterable[tuple[str, str | None]] = (),
    traces: list | None = None,
) -> Run:
    """Analyse every trace under *traces_dir* with twin *impl* ("c" or "py").

    Charges are kept, with coordinates, for the traces in *labelled* ((file, session) pairs;
    a session of None names the only trace of that file); every trace counts in ``by_kind``.
    """
    from loopcore.adapters import load
    from loopcore.burn import _analyse_many
    from loopcore.encoded import _kernel_of

    if traces is None:
        traces = list(load(traces_dir))
    reports = _analyse_many(_kernel_of(impl), traces)
    wanted = set(labelled)
    wanted_files = {f for f, _ in wanted}
    run = Run(impl)
    docs: dict[str, Any] = {}
    for trace, report in zip(traces, reports):
        run.traces += 1
        run.steps += len(trace.steps)
        run.total_tokens += report.total_tokens
        run.wasted_tokens += report.wasted_tokens
        for f in report.findings:
            k = run.by_kind.setdefault(f.kind, {"tokens": 0, "steps": 0})
            k["tokens"] += f.tokens
            k["steps"] += len(f.steps)
        path = trace.source.rpartition("#")[0] if "#" in (trace.source or "") else trace.source
        rel = _rel(path, traces_dir)
        if rel not in wanted_files:
            continue
        key = (rel, trace.session)
        if key not in wanted:
            key = (rel, None)
            if key not in wanted:
                continue
        charges = run.charges.setdefault(key, [])
        if not report.findings:
            continue
        refs = trace_refs(trace, docs)
        for f in report.findings:
            step_refs_, of_ref = _finding_refs(f, refs)
            for r in step_refs_:
                charges.append(Charge(f.kind, r, of_ref))
    return run


# ----------------------------------------------------------------------------- judging


def charges_at(run: Run, label: dict[str, Any], coord: dict[str, Any]) -> list[Charge]:
    """The charges of *run* on the labelled step *coord* of the label's trace."""
    key = (label["file"], label.get("session"))
    return [c for c in run.charges.get(key, ()) if ref_matches(c.ref, coord)]


def judge_case(run: Run, case: dict[str, Any]) -> tuple[bool, str]:
    """(right, what the analysis did) for one labelled case."""
    got = charges_at(run, case, case["at"])
    kinds = sorted({c.kind for c in got})
    if case["verdict"] == "not_waste":
        return (not got, "not charged" if not got else f"charged as {', '.join(kinds)}")
    if not got:
        return False, "not charged"
    ok = any(k in accepted_kinds(case) for k in kinds)
    return ok, f"charged as {', '.join(kinds)}"


def judge_loop(run: Run, loop: dict[str, Any]) -> tuple[bool, int]:
    """(found, how many of its charged steps were charged with its kind) for one loop."""
    kinds = accepted_kinds(loop)
    hit = sum(
        1 for coord in loop["charged"] if any(c.kind in kinds for c in charges_at(run, loop, coord))
    )
    return hit > 0, hit


@dataclass
class Score:
    impl: str
    charged_labelled: int = 0
    charged_waste: int = 0
    charged_right_kind: int = 0
    waste_cases: int = 0
    waste_found: int = 0
    not_waste_cases: int = 0
    not_waste_clear: int = 0
    loops: int = 0
    loops_found: int = 0
    loop_steps: int = 0
    loop_steps_found: int = 0
    wrong: list[tuple[str, str]] = field(default_factory=list)

    @property
    def precision(self) -> float | None:
        return self.charged_waste / self.charged_labelled if self.charged_labelled else None

    @property
    def recall(self) -> float | None:
        return self.loops_found / self.loops if self.loops else None


def score(run: Run, labels: dict[str, Any]) -> Score:
    """Precision, recall and the list of labels the run gets wrong."""
    s = Score(run.impl)
    for case in labels["cases"]:
        right, what = judge_case(run, case)
        charged = bool(charges_at(run, case, case["at"]))
        if charged:
            s.charged_labelled += 1
        if case["verdict"] == "waste":
            s.waste_cases += 1
            s.charged_waste += charged
            s.charged_right_kind += right
            s.waste_found += right
        else:
            s.not_waste_cases += 1
            s.not_waste_clear += right
        if not right:
            s.wrong.append((case["id"], what))
    for loop in labels["loops"]:
        found, hit = judge_loop(run, loop)
        s.loops += 1
        s.loops_found += found
        s.loop_steps += len(loop["charged"])
        s.loop_steps_found += hit
        if not found:
            s.wrong.append((loop["id"], "not found"))
    return s


def dump_labels(labels: dict[str, Any], path: str) -> None:
    """Write *labels* back in the file's layout: one case or loop per line, so a diff shows labels."""
    head = {k: v for k, v in labels.items() if k not in ("cases", "loops")}
    lines = ["{"]
    for k, v in head.items():
        lines.append(f"  {json.dumps(k)}: {json.dumps(v, ensure_ascii=False)},")
    for name in ("cases", "loops"):
        items = labels[name]
        lines.append(f'  "{name}": [')
        for i, d in enumerate(items):
            comma = "," if i + 1 < len(items) else ""
            lines.append("    " + json.dumps(d, ensure_ascii=False) + comma)
        lines.append("  ]," if name == "cases" else "  ]")
    lines.append("}")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")


def mark_known_wrong(labels: dict[str, Any], s: Score) -> int:
    """Set ``known_wrong_today`` on exactly the labels *s* gets wrong; returns how many changed."""
    wrong = {ident for ident, _ in s.wrong}
    changed = 0
    for d in labels["cases"] + labels["loops"]:
        now = d["id"] in wrong
        if bool(d.get("known_wrong_today")) != now:
            changed += 1
        if now:
            d["known_wrong_today"] = True
        else:
            d.pop("known_wrong_today", None)
    return changed


def labelled_traces(labels: dict[str, Any]) -> set[tuple[str, str | None]]:
    return {(d["file"], d.get("session")) for d in labels["cases"] + labels["loops"]}


# ----------------------------------------------------------------------------- output


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


def _print_score(s: Score, run: Run) -> None:
    print(
        f"[{s.impl}] {run.traces} traces, {run.steps:,} steps, {run.total_tokens:,} tokens, "
        f"{run.wasted_tokens:,} wasted"
    )
    print(
        f"  precision  {_pct(s.precision):>6}  ({s.charged_waste} of {s.charged_labelled} charged labelled steps "
        f"are labelled waste; {s.charged_right_kind} with the labelled kind)"
    )
    print(
        f"  recall     {_pct(s.recall):>6}  ({s.loops_found} of {s.loops} labelled loops found; "
        f"{s.loop_steps_found} of {s.loop_steps} of their steps charged)"
    )
    print(
        f"  waste cases charged with the right kind: {s.waste_found} of {s.waste_cases}; "
        f"not-waste cases left alone: {s.not_waste_clear} of {s.not_waste_cases}"
    )
    print("  by kind (all traces):")
    for kind in sorted(run.by_kind):
        v = run.by_kind[kind]
        print(f"    {kind:<24} {v['tokens']:>10,} tokens  {v['steps']:>5} steps")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--traces", default=DEFAULT_TRACES)
    ap.add_argument("--labels", default=DEFAULT_LABELS)
    ap.add_argument("--impl", choices=("c", "py", "both"), default="both")
    ap.add_argument("--cases", action="store_true", help="list every label the analysis gets wrong")
    ap.add_argument("--json", metavar="FILE", help="write the figures as JSON")
    ap.add_argument(
        "--write-known-wrong",
        action="store_true",
        help="rewrite the label file's known_wrong_today marks from this run (twins must agree)",
    )
    args = ap.parse_args(argv)
    if not os.path.isdir(args.traces):
        print(f"bench_fidelity: no traces at {args.traces}", file=sys.stderr)
        return 1
    from loopcore.adapters import load

    labels = load_labels(args.labels)
    by_id = {d["id"]: d for d in labels["cases"] + labels["loops"]}
    traces = list(load(args.traces))
    impls = ("c", "py") if args.impl == "both" else (args.impl,)
    runs = [run_analysis(args.traces, impl, labelled_traces(labels), traces) for impl in impls]
    scores = [score(r, labels) for r in runs]
    print(
        f"labels: {args.labels} ({len(labels['cases'])} cases, "
        f"{sum(c['verdict'] == 'waste' for c in labels['cases'])} waste; {len(labels['loops'])} loops)"
    )
    for s, r in zip(scores, runs):
        _print_score(s, r)
    if args.cases:
        print(f"wrong today ({len(scores[0].wrong)}):")
        for ident, what in scores[0].wrong:
            d = by_id[ident]
            where = d.get("at") or d["charged"]
            kind = accepted_kinds(d)
            print(
                f"  {ident} {d['file'].rsplit('/', 1)[-1]} {d.get('session') or ''} {where}: "
                f"labelled {d.get('verdict', 'loop')}{' ' + '/'.join(kind) if kind else ''}, {what}"
            )
    agree = all(s.wrong == scores[0].wrong for s in scores) and all(
        r.by_kind == runs[0].by_kind for r in runs
    )
    if len(runs) > 1:
        print("twins agree" if agree else "TWINS DISAGREE")
    if args.write_known_wrong:
        if not agree:
            print(
                "bench_fidelity: the twins disagree; known_wrong_today marks left as they are",
                file=sys.stderr,
            )
        else:
            n = mark_known_wrong(labels, scores[0])
            dump_labels(labels, args.labels)
            print(
                f"known_wrong_today: {len(scores[0].wrong)} labels marked, {n} changed in {args.labels}"
            )
    if args.json:
        out = {
            s.impl: {
                "precision": s.precision,
                "recall": s.recall,
                "charged_labelled": s.charged_labelled,
                "charged_waste": s.charged_waste,
                "waste_cases": s.waste_cases,
                "waste_found": s.waste_found,
                "loops": s.loops,
                "loops_found": s.loops_found,
                "by_kind": r.by_kind,
                "total_tokens": r.total_tokens,
                "wasted_tokens": r.wasted_tokens,
                "wrong": [ident for ident, _ in s.wrong],
            }
            for s, r in zip(scores, runs)
        }
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(out, f, indent=1)
    return 0 if agree else 1


if __name__ == "__main__":
    sys.exit(main())
