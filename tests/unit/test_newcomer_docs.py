"""What a newcomer reads agrees with itself (issue 18): one name for the test database's
variable, and the README warns that PoCL is no measure of a GPU's speed."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: Where the test database's variable is named: the test script, the docs, the tests.
NAMING_FILES = ("scripts/*", "docs/*.md", "README.md", "tests/**/*.py")


def test_the_test_database_variable_has_one_name() -> None:
    names: dict[str, set[str]] = {}
    for pattern in NAMING_FILES:
        for path in ROOT.glob(pattern):
            if path.is_file() and path != Path(__file__).resolve():
                for name in re.findall(r"DEVICEFARM_TEST_PG\w*", path.read_text(errors="replace")):
                    names.setdefault(name, set()).add(str(path.relative_to(ROOT)))
    assert set(names) == {"DEVICEFARM_TEST_PG_URL"}, names


def test_the_readme_says_pocl_is_slow() -> None:
    text = " ".join((ROOT / "README.md").read_text().split())
    assert "PoCL runs OpenCL on the CPU, so it is much slower than a real GPU" in text
