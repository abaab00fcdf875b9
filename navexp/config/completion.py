"""Tab completion of ``navexp-train`` (``eval "$(navexp-train -sc install=bash)"``): Hydra's own answer,
seen through the app's view of its config.

Hydra's completion lists what its config loader holds: the schemas stored in the ConfigStore as group
options (``reward=base_reward``) and the data folders of ``configs/`` as groups (``scenarios=``,
``suites=``), and it knows nothing of the old PPO key names the app still accepts. ``tidy`` takes
Hydra's words for the word being completed and returns the app's: no schema entries, no data folders,
and the old names (``ppo.desi`` -> ``ppo.desired_kl=``, ``navexp.config.aliases``) beside today's.
"""

from __future__ import annotations

import contextlib
import io
import os
from collections.abc import Callable

from navexp.config.aliases import RENAMED_KEYS
from navexp.config.keys import NOT_GROUPS

QUERY_FLAGS = ("-sc", "--shell-completion")


def is_query(argv: list[str]) -> bool:
    """``navexp-train -sc query=bash`` (what the installed shell function runs on TAB)."""
    return any(a in QUERY_FLAGS for a in argv) and any(a.startswith("query=") for a in argv)


def current_word(line: str) -> str:
    """The word being completed: the last one of the command line, or "" after a space."""
    return "" if not line or line[-1] == " " else line.split()[-1]


def tidy(words: list[str], word: str) -> list[str]:
    """Hydra's completions for ``word``, as the app offers them (sorted, each once)."""
    kept = [w for w in words if not _hidden(w)]
    if "." in word and len(word.partition(".")[2]) > 0:  # "ppo.desi": the old names too
        kept += [f"{old}=" for old in RENAMED_KEYS if old.startswith(word)]
    return sorted(set(kept))


def _hidden(word: str) -> bool:
    """A schema entry offered as a group option (``reward=base_reward``) or a data folder offered as
    a group or a key (``suites=``, ``scenarios/``)."""
    group, sep, option = word.partition("=")
    if sep and option.startswith("base_"):
        return True
    head = group.split("/")[0].split(".")[0]
    return head in NOT_GROUPS


def answer_query(main: Callable[[], object]) -> None:
    """Run Hydra's completion query (``main``: the Hydra app, its ``sys.argv`` holding ``-sc query=``)
    and print its words tidied; the separator Hydra used (a space for bash, a newline for fish) kept."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        main()
    text = out.getvalue()
    words = tidy(text.split(), current_word(os.environ.get("COMP_LINE", "")))
    print(("\n" if "\n" in text.strip() else " ").join(words))
