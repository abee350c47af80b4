"""The compiled shell classifier's shortcuts give the pure twin's answers.

The compiled twin (loopcore._native_shell) takes paths the pure one (loopcore._shell_py) does not
have: it stops lexing at the first command that runs unknown code, looks program names and
options up in tables of their ASCII bytes, reads the words of the common readers (cat, head,
grep, sed, find...) in place and makes strs of their operands only, keeps heredoc bodies as
ranges of the script, has posixpath.normpath and the sed no-op test in C. Each shortcut is
crossed here against the pure twin on the inputs that could tell them apart: names next to the
table's keys, non-ASCII and NUL characters, commands around the number of words kept in place,
paths of every shape, unterminated quotes and heredocs after the point where lexing stops.
"""

from __future__ import annotations

import itertools
import shlex

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loopcore import _native_flag
from loopcore import _shell_py as ref


@pytest.fixture(scope="module")
def twins():
    """(compiled, pure); the tests skip when the compiled core is deselected."""
    if _native_flag.NO_EXTENSIONS:
        pytest.skip("LOOPCORE_NO_EXTENSIONS=1: no compiled twin to compare")
    return _native_flag.load_twin("shell", "c"), _native_flag.load_twin("shell", "py")


def assert_same(twins, command):
    c, py = twins
    assert c.classify_shell(command) == py.classify_shell(command), repr(command)
    assert c.classify_shell_access(command) == py.classify_shell_access(command), repr(command)
    assert c.lex(command) == py.lex(command), repr(command)


def table_names() -> list[str]:
    names = set()
    for table in (
        ref._PREFIX_WORDS,
        ref._NEUTRAL_SEGMENTS,
        ref._NEUTRAL,
        ref._READERS,
        ref._PATTERN_READERS,
        ref._SYSTEM_OBSERVERS,
        ref._WRITERS,
        ref._WRAPPERS,
        ref._SHELLS,
        ref._VALUE_OPTS,
    ):
        names |= set(table)
    names |= {"git", "find", "perl", "sed", "gsed", "awk", "sort", "tr", "tee", "dd", "patch"}
    names |= {"mv", "cp", "ln", "install", "rsync", "scp", "chmod", "chown", "chgrp"}
    names |= {"apply_patch", "applypatch", "timeout", "env", "xargs", "time"}
    return sorted(names)


NAMES = table_names()


def near_misses(name: str) -> list[str]:
    """*name* and words that differ from it by a little: what a hash table could confuse."""
    out = [name, name + "x", name[:-1], name.upper(), name + "\x00", "\x00" + name, name + "é"]
    out += [name[::-1], name[0] + name, name + name[-1], "/usr/bin/" + name, "./" + name]
    out += [name + "\u0301", name.replace(name[0], "\u0441", 1)]  # a combining accent, Cyrillic
    out += ["'" + name + "'", '"' + name[:1] + '"' + name[1:], name[:1] + "\\" + name[1:]]
    return [w for w in out if w]


@pytest.mark.parametrize("name", NAMES)
def test_program_names_and_their_neighbours(twins, name):
    """Each program the tables know, and words next to it, as the program and as an option."""
    for word in near_misses(name):
        for command in (
            f"{word} a.py",
            f"{word} -n 3 a.py b/",
            f"cd /r && {word} x | head -5",
            f"A=1 {word} -- -x y",
            f"if {word} a; then cat b; fi",
            f"cat {word} > out",
        ):
            assert_same(twins, command)


@pytest.mark.parametrize("program", sorted(ref._VALUE_OPTS))
def test_options_that_take_a_value(twins, program):
    """Every option the tables say takes a value, and its neighbours, on its program."""
    for option in sorted(ref._VALUE_OPTS[program]):
        for word in (option, option + "x", option[:-1], option + "=v", option.upper()):
            for command in (
                f"{program} {word} v a.py b.py",
                f"{program} -x {word} v -- -a c",
                f"sudo {program} {word} 'v w' ./d/../e.txt",
            ):
                assert_same(twins, command)


# ------------------------------------------------------------------------------------------
# Lexing stops at the first command that runs unknown code


UNKNOWN = ["python", "python3", "pytest", "./run.sh", "/opt/x/tool", "catx", "Cat", "gre", "é"]
PREFIXES = [
    "",
    "if ",
    "time ",
    "! ",
    "A=1 ",
    "a[1]=x B+=2 ",
    "{ ",
    "cd /r && ",
    "cat a; ",
    "x=$(y) ",
]
TAILS = [
    "",
    " -c 'print(1)'",
    ' -c "unterminated',
    " 'unterminated",
    " <<EOF\nbody\nEOF",
    " <<'EOF'\nnever closed",
    " $(((( ",
    " `x",
    " \\",
    " && rm -rf /",
    " | tee out.txt; cat done",
    " x\x00y",
    " " + "w" * 5000,
    " && " + "cat a && " * 200 + "rm b",
]


@pytest.mark.parametrize(
    "prefix,program,tail",
    [(p, u, t) for p in PREFIXES for u in UNKNOWN for t in TAILS[::2]]
    + [(p, "python", t) for p in PREFIXES[:3] for t in TAILS],
)
def test_unknown_code_stops_the_lexer(twins, prefix, program, tail):
    assert_same(twins, prefix + program + tail)


stop_fragments = st.lists(
    st.sampled_from(
        UNKNOWN
        + NAMES[::7]
        + PREFIXES
        + TAILS[:12]
        + ["cat", "grep x", "sed -n 1p", "find . -name x", " ", "\n", "; ", " | ", "'", '"', "\\"]
    ),
    max_size=10,
).map("".join)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stop_fragments)
def test_unknown_code_stops_the_lexer_random(twins, command):
    assert_same(twins, command)


# ------------------------------------------------------------------------------------------
# Words read in place


READER_LINES = [
    "cat",
    "head -n 5",
    "tail -f",
    "ls -la",
    "ls",
    "tree -L 2",
    "wc -l",
    "nl -ba",
    "grep -n pat",
    "grep -e pat",
    "grep --regexp=x",
    "grep --file=f",
    "rg --files",
    "rg -g '*.py' pat",
    "egrep -rn 'a|b'",
    "sed -n '1,5p'",
    "sed -i 's/a/b/'",
    "sed -ni p",
    "sed -e p -i",
    "sed --in-place=.bak s/x/y/",
    "sed -f script",
    "sed --expression=p",
    "find . -name '*.py'",
    "find src -delete",
    "find . -exec cat {} \\;",
    "find . -exec rm {} +",
    "find -type f -exec grep -l x {} \\; -exec sed -i s/a/b/ {} \\;",
    "ps aux",
    "echo hi",
    "tr a b",
    "fi",
]
OPERANDS = [
    "a.py",
    "--",
    "-",
    "-x",
    "./b/../c",
    "é.txt",
    "日本/x",
    "\U0001f600",
    "a\x00b",
    "$f",
    "'q r'",
]


@pytest.mark.parametrize("line", READER_LINES)
def test_readers_around_the_words_kept_in_place(twins, line):
    """The common readers with 0 to 12 operands: commands of 8 words or fewer are read in
    place, longer ones from their word list; both must give the pure twin's answer."""
    for k in range(13):
        for ops in (OPERANDS[:k], OPERANDS[::-1][:k], (OPERANDS * 2)[k : 2 * k]):
            command = line + "".join(" " + o for o in ops)
            assert_same(twins, command)
            assert_same(twins, "cd /repo/x && " + command + " 2>/dev/null | head -3")
            assert_same(twins, "sudo " + command)  # a wrapper: the word-list path


in_place_commands = st.builds(
    lambda line, ops, glue: line + "".join(glue + o for o in ops),
    st.sampled_from(READER_LINES),
    st.lists(st.sampled_from(OPERANDS + ["-n", "5", "{}", ";", "\\;", "-exec", "x"]), max_size=12),
    st.sampled_from([" ", "  ", " '' ", ' "" ', "\\\n"]),
)


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(in_place_commands, st.sampled_from(["", "\u00e9 ", "\u65e5 ", "\U0001f600 "]))
def test_readers_random(twins, command, echo):
    """Also in scripts of 2- and 4-byte characters (the words are then read as such)."""
    assert_same(twins, command)
    assert_same(twins, "echo " + echo + "; " + command)


# ------------------------------------------------------------------------------------------
# posixpath.normpath in C


def test_paths_of_every_shape(twins):
    """Every path of up to 7 characters of "/", "." and "a" (all the shapes normpath tells
    apart: leading slashes, empty, "." and ".." parts, trailing slashes), as a read target, as a
    cd target and under a cd."""
    for n in range(1, 8):
        for chars in itertools.product("/.a", repeat=n):
            p = "".join(chars)
            for command in (f"cat {p}", f"cd {p} && cat x/./y", f"cd /r && cat {p}"):
                assert_same(twins, command)


@pytest.mark.parametrize(
    "path",
    [
        "a/" * 600 + "..",  # more parts than C keeps on its stack: Python's normpath
        "./" + "x" * 1100,  # longer than the C path takes
        "./" + "x" * 1019,  # at the limit
        "./" + "/." * 511 + "a",
        "../" * 300,
        "/" * 5 + "a/./b//",
        "./a\x00b",  # NUL: Python's normpath
        "./é/../b",
        "./\U0001f600/.",
        "//a/../..",
        "///a/..",
    ],
)
def test_paths_the_c_normpath_leaves_to_python(twins, path):
    for command in (f"cat {shlex.quote(path)}", f"cd /r && cat {shlex.quote(path)}"):
        assert_same(twins, command)


# ------------------------------------------------------------------------------------------
# Heredoc bodies kept as ranges


@pytest.mark.parametrize(
    "command",
    [
        "bash <<A <<B\ncat a\nA\nrm b\nB",
        "bash <<A <<B <<C\ncat a\nA\nrm b\nB\ncat c\nC",
        "apply_patch <<A <<B\n*** Add File: x.py\nA\n*** Update File: y.py\nB",
        "sh <<'E'\ncd /r && sed -i 's/a/b/' f\nE\ncat g",
        "cat > out <<EOF\n\u00e9\U0001f600\nEOF\nbash <<X\ncat \u65e5\nX",
        "bash <<EOF a b c d e f g h i j\ncat x\nEOF",
        "cat <<EOF\nunterminated",
    ],
)
def test_heredocs(twins, command):
    assert_same(twins, command)


# ------------------------------------------------------------------------------------------
# The sed no-op test in C


sed_scripts = st.one_of(
    st.builds(
        lambda d, t, t2, tail: "s" + d + t + d + t2 + d + tail,
        st.sampled_from(list("/|#,:@!;x")),
        st.text(alphabet=st.sampled_from(list("ab x.*é\n\\/|;")), max_size=6),
        st.sampled_from(["", "a", "ab", "b"]),
        st.sampled_from(["", "g", "gg", "x", "p", "\n"]),
    ).map(lambda s: s.replace("__", "_")),
    st.text(alphabet=st.sampled_from(list("s/|#,:@!gab .\\;\né")), max_size=12),
)


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sed_scripts, st.sampled_from(["", "-e ", "--expression=", "-n -e ", "-f "]))
def test_sed_no_op(twins, script, how):
    q = shlex.quote(script)
    for command in (
        f"sed -i {how}{q} f.py",
        f"sed -i.bak {how}{q} -e {q} a b",
        f"gsed {how}{q} -i x",
    ):
        assert_same(twins, command)


@pytest.mark.parametrize(
    "script,no_op",
    [
        ("s/x/x/", True),
        ("s/x/x/g", True),
        ("s|a b|a b|", True),
        ("s/é/é/", True),
        ("s/x/x/gg", False),
        ("s/x/y/", False),
        ("s//x/", False),
        ("s/a.b/a.b/", False),  # "." matches any character: not a literal text
    ],
)
def test_sed_no_op_examples(twins, script, no_op):
    for impl in twins:
        assert impl.classify_shell_access(f"sed -i '{script}' f.py") == (
            "mutate",
            "f.py",
            ("f.py",),
            ("f.py",),
            no_op,
        )


# ------------------------------------------------------------------------------------------
# The lexer kept between calls


def test_threads_share_no_lexer(twins):
    """The compiled twin keeps one lexer for the next call and takes it while in use: threads
    (switching inside apply_patch's Python parser and nested scripts) get their own answers."""
    import threading

    c, py = twins
    commands = [
        "apply_patch <<'EOF'\n*** Begin Patch\n*** Update File: a.py\n*** End Patch\nEOF",
        "bash -c 'cd /r && cat x | grep y' && sed -n 1p z",
        "cd /repo && grep -rn 'def f' src/ tests/ | head -3",
        "find . -name '*.py' -exec sed -i 's/a/b/' {} \\;",
        "cat > out.txt <<EOF\nbody\nEOF\nbash <<X\nrm -f y\nX",
    ] * 40
    expected = [py.classify_shell_access(cmd) for cmd in commands]
    results: dict[int, list] = {}

    def work(k):
        results[k] = [c.classify_shell_access(cmd) for cmd in commands]

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(results[k] == expected for k in range(4))
