"""The tool taxonomy: what kind of call a tool call is (observe / mutate / exec / ask / other)
and what it touches (its target), per harness.

``classify("Read", {"file_path": "a.ts"}, "claude-code")`` -> ``("observe", "a.ts")``;
``classify_shell("sed -i s/x/y/ a.py")`` -> ``("mutate", "a.py")``. Add your own tools with
``PROFILES["generic"].extend({"my_reader": ("observe", "doc_id")})`` or pass a mapping as
``loopcore.load(..., profile={...})``.
"""

from __future__ import annotations

from .profiles import PROFILES, Profile, Rule, classify, get_profile, shell_rule
from .shell import classify_shell, parse_patch_targets

__all__ = [
    "PROFILES",
    "Profile",
    "Rule",
    "classify",
    "classify_shell",
    "get_profile",
    "parse_patch_targets",
    "shell_rule",
]
