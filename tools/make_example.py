"""Write the bundled example trace, src/loopcore/examples/session.jsonl.

    python tools/make_example.py            # (re)write it
    python tools/make_example.py --check    # exit 1 when the committed file is stale

The session is invented by this script (no third-party trace is copied): a coding agent fixes a
time-zone bug in a small TypeScript date library. Most of it is honest work (exploring, reading
each file once, editing, running the tests after each change), with the waste patterns loopcore
exists to find mixed in the way they show up in real sessions:

* re-reads: ``src/date.ts`` is read again twice while nothing changed it (a redundant observation);
* a duplicate search: the same ``grep`` for ``toISOString`` runs twice with nothing in between;
* an undo/redo oscillation: ``src/format.ts`` is switched to UTC, back, and to UTC again;
* a question loop: three turns in a row that only ask the user the same kind of question.

Token counts are plausible per-call usage (result text / 4 into the context, a little output),
written as if read from usage fields, so the example shows exact rather than estimated figures.
The file is deterministic: same script, same bytes.
"""

from __future__ import annotations

import json
import os
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

# The generator needs only the data model, never the compiled core: it must run before a build.
os.environ.setdefault("LOOPCORE_NO_EXTENSIONS", "1")

from loopcore.trace import Step  # noqa: E402

OUT = ROOT / "src" / "loopcore" / "examples" / "session.jsonl"
SESSION = "example-fix-timezone"


def _ts_module(name: str, n_funcs: int, body_hint: str) -> str:
    # Plausible-looking TypeScript of a realistic size (a real read costs real tokens).
    lines = [f"// {name}: part of the tiny-dates library", "import { pad } from './util';", ""]
    for i in range(n_funcs):
        lines += [
            f"/** {body_hint} helper {i}: returns the {i}th representation of a date. */",
            f"export function {body_hint}{i}(d: Date, opts: FormatOptions = {{}}): string {{",
            "  const y = d.getFullYear();",
            "  const m = pad(d.getMonth() + 1);",
            "  const day = pad(d.getDate());",
            f"  if (opts.separator === undefined) return `${{y}}-${{m}}-${{day}}#{i}`;",
            f"  return [y, m, day].join(opts.separator) + '#{i}';",
            "}",
            "",
        ]
    return "\n".join(lines)


DATE_TS = _ts_module("src/date.ts", 22, "parseDate")
FORMAT_TS = _ts_module("src/format.ts", 12, "formatDate")
UTIL_TS = "export function pad(n: number): string {\n  return n < 10 ? '0' + n : String(n);\n}\n"
TEST_TS = _ts_module("test/date.test.ts", 10, "testCase")
README = (
    "# tiny-dates\n\nSmall date helpers.\n\n## Usage\n\n```ts\nimport { formatDate0 } from 'tiny-dates';\n```\n"
    * 3
)
PKG = json.dumps(
    {
        "name": "tiny-dates",
        "version": "1.4.2",
        "scripts": {"test": "vitest run"},
        "devDependencies": {"vitest": "^1.6.0", "typescript": "^5.4.0"},
    },
    indent=2,
)
FORMAT_TEST_TS = _ts_module("test/format.test.ts", 9, "formatCase")
INDEX_TS = "".join(f"export * from './{m}';\n" for m in ("date", "format", "util"))
TSCONFIG = json.dumps(
    {
        "compilerOptions": {
            "target": "ES2020",
            "module": "ESNext",
            "strict": True,
            "outDir": "dist",
            "declaration": True,
        },
        "include": ["src"],
    },
    indent=2,
)
CHANGELOG = (
    "# Changelog\n\n## Unreleased\n\n"
    + "".join(
        f"## 1.{i}.0\n\n- Fixed an edge case in formatDate{i}.\n- Faster parseDate{i}.\n\n"
        for i in range(4, 0, -1)
    )
    * 6
)
API_MD = "# API\n\n" + "".join(
    f"## formatDate{i}(d, opts)\n\nFormats *d* as `YYYY-MM-DD#{i}` in the local time zone. `opts.separator` "
    f"replaces the dash. Throws a RangeError for an invalid date.\n\n```ts\nformatDate{i}(new Date(2024, 2, 10)) "
    f"// '2024-03-10#{i}'\n```\n\n"
    for i in range(40)
)
SEARCH_HITS = [
    {
        "title": "Date.prototype.toISOString() - JavaScript | MDN",
        "url": "https://developer.mozilla.org/en-US/docs/Web/JavaScript/Reference/Global_Objects/Date/toISOString",
        "snippet": "The timezone is always UTC, as denoted by the suffix Z.",
    },
    {
        "title": "Why does toISOString return the previous day?",
        "url": "https://stackoverflow.com/questions/tagged/javascript+date",
        "snippet": "toISOString converts to UTC first; in zones east of UTC local midnight is the previous day.",
    },
]
FORMAT_LOCAL = "  const y = d.getFullYear();"
FORMAT_UTC = "  const y = d.getUTCFullYear();"


def _tokens(text: str) -> int:
    return max(1, len(text) // 4)


class Session:
    def __init__(self) -> None:
        self.steps: list[Step] = []
        self.turn = 0
        self.n = 0

    def next_turn(self) -> None:
        self.turn += 1

    def call(
        self,
        kind: str,
        name: str,
        args: dict,
        result: object,
        *,
        target=None,
        error=None,
        thinking: int = 40,
    ) -> None:
        self.n += 1
        text = result if isinstance(result, str) else json.dumps(result)
        self.steps.append(
            Step(
                session=SESSION,
                turn=self.turn,
                kind=kind,
                name=name,
                target=target,
                args=args,
                result=result,
                error=error,
                tokens_in=_tokens(text) + (_tokens(json.dumps(error)) if error else 0),
                tokens_out=thinking + _tokens(json.dumps(args)),
                call_id=f"call_{self.n:03d}",
            )
        )

    # the tools of a typical coding harness
    def read(self, path: str, text: str, thinking: int = 30) -> None:
        self.call("observe", "read_file", {"path": path}, text, target=path, thinking=thinking)

    def grep(self, pattern: str, where: str, hits: list[str]) -> None:
        self.call(
            "observe",
            "grep",
            {"pattern": pattern, "path": where},
            "\n".join(hits),
            target=where,
            thinking=60,
        )

    def ls(self, path: str, names: list[str]) -> None:
        self.call("observe", "list_dir", {"path": path}, names, target=path, thinking=20)

    def edit(self, path: str, old: str, new: str, thinking: int = 120) -> None:
        self.call(
            "mutate",
            "edit_file",
            {"path": path, "old_string": old, "new_string": new},
            {"ok": True, "replacements": 1},
            target=path,
            thinking=thinking,
        )

    def write(self, path: str, content: str) -> None:
        self.call(
            "mutate",
            "write_file",
            {"path": path, "content": content},
            {"ok": True, "bytes": len(content)},
            target=path,
            thinking=200,
        )

    def test(self, passed: int, failed: int, detail: str = "") -> None:
        out = f" RUN  v1.6.0 /repo\n\n Test Files  {1 if failed else 0} failed | 3 passed\n"
        out += f"      Tests  {failed} failed | {passed} passed\n" + detail
        self.call(
            "exec",
            "bash",
            {"command": "npm test --silent"},
            {"exit_code": 1 if failed else 0, "stdout": out},
            thinking=50,
        )

    def search(self, query: str, hits: list[dict]) -> None:
        self.call("observe", "web_search", {"query": query}, hits, thinking=70)

    def ask(self, question: str, answer: str) -> None:
        self.call("ask", "ask_user", {"question": question}, answer, thinking=90)


def build() -> list[Step]:
    """The example session's steps, in order."""
    s = Session()
    s.next_turn()  # explore
    s.ls(".", ["CHANGELOG.md", "README.md", "docs", "package.json", "src", "test", "tsconfig.json"])
    s.read("README.md", README)
    s.read("package.json", PKG)
    s.read("tsconfig.json", TSCONFIG)
    s.ls("docs", ["API.md"])
    s.read("docs/API.md", API_MD, thinking=90)
    s.ls("src", ["date.ts", "format.ts", "index.ts", "util.ts"])
    s.read("src/index.ts", INDEX_TS)
    s.next_turn()  # reproduce
    s.test(
        41,
        2,
        " FAIL test/date.test.ts > formatDate0 keeps the calendar day in UTC+13\n"
        "   expected '2024-03-10' received '2024-03-09'\n",
    )
    s.read("test/date.test.ts", TEST_TS)
    s.read("src/date.ts", DATE_TS, thinking=150)
    s.read("src/util.ts", UTIL_TS)
    s.next_turn()  # look for the culprit
    s.grep("toISOString", "src", ["src/date.ts:88:  return d.toISOString().slice(0, 10);"])
    s.read("src/format.ts", FORMAT_TS, thinking=120)
    s.search("javascript Date toISOString local day off by one timezone", SEARCH_HITS)
    s.read("CHANGELOG.md", CHANGELOG)
    s.search(
        "javascript Date toISOString local day off by one timezone", SEARCH_HITS
    )  # duplicate search
    s.read("src/date.ts", DATE_TS, thinking=80)  # re-read: nothing changed it
    s.next_turn()
    s.read("src/date.ts", DATE_TS, thinking=80)  # and again
    s.next_turn()  # undo/redo oscillation on format.ts
    s.edit("src/format.ts", FORMAT_LOCAL, FORMAT_UTC)
    s.read("test/format.test.ts", FORMAT_TEST_TS)
    s.edit("src/format.ts", FORMAT_UTC, FORMAT_LOCAL, thinking=160)  # undo
    s.grep("getUTC", "src", [])
    s.edit("src/format.ts", FORMAT_LOCAL, FORMAT_UTC, thinking=160)  # and redo
    s.test(40, 3, " FAIL test/format.test.ts > formatDate3 local midnight\n")
    s.next_turn()  # question loop: asks, touches nothing, asks again, gets the same answer
    s.ask("Should formatDate use UTC or the local time zone?", "Whatever the tests expect.")
    s.next_turn()
    s.ask("To confirm: UTC or local time for formatDate?", "Whatever the tests expect.")
    s.next_turn()
    s.ask("Which time zone should formatDate use, UTC or local?", "Whatever the tests expect.")
    s.next_turn()  # back to honest work: the real fix is in date.ts
    s.edit("src/format.ts", FORMAT_UTC, FORMAT_LOCAL, thinking=200)
    s.edit(
        "src/date.ts",
        "  return d.toISOString().slice(0, 10);",
        "  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}`;",
        thinking=400,
    )
    s.read("src/date.ts", DATE_TS.replace("#0", "#0 "), thinking=60)  # after the edit: not waste
    s.test(43, 0)
    s.next_turn()  # add a regression test and finish
    s.write(
        "test/timezone.test.ts",
        "import { parseDate0 } from '../src/date';\n"
        "test('UTC+13 keeps the day', () => {\n  expect(parseDate0(new Date(2024, 2, 10))).toMatch(/^2024-03-10/);\n});\n",
    )
    s.test(44, 0)
    s.call(
        "exec",
        "bash",
        {"command": "npm run lint"},
        {
            "exit_code": 0,
            "stdout": "> tiny-dates@1.4.2 lint\n> eslint src test\n\n"
            + "\n".join(
                f"/repo/src/format.ts\n  {10 + 9 * i}:3  warning  Prefer template literals  prefer-template"
                for i in range(12)
            )
            + "\n\n✖ 12 problems (0 errors, 12 warnings)\n",
        },
        thinking=40,
    )
    s.edit(
        "CHANGELOG.md",
        "## Unreleased\n",
        "## Unreleased\n\n- formatDate0 keeps the local calendar day.\n",
    )
    s.call(
        "exec",
        "bash",
        {"command": "git diff --stat"},
        {
            "exit_code": 0,
            "stdout": " CHANGELOG.md | 2 ++\n src/date.ts | 2 +-\n test/timezone.test.ts | 4 ++++\n"
            " 3 files changed",
        },
        thinking=30,
    )
    return s.steps


def render(steps: list[Step]) -> bytes:
    """The steps as loopcore JSONL: one Step.to_dict() per line, keys sorted, UTF-8."""
    return "".join(
        json.dumps(st.to_dict(), sort_keys=True, ensure_ascii=False) + "\n" for st in steps
    ).encode()


def main(argv: list[str]) -> int:
    data = render(build())
    if "--check" in argv:
        if not OUT.exists() or OUT.read_bytes() != data:
            print(f"{OUT} is stale: run python tools/make_example.py", file=sys.stderr)
            return 1
        return 0
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_bytes(data)
    lines = data.count(b"\n")
    print(f"wrote {OUT} ({len(data):,} bytes, {lines} steps)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
