"""The GPU delegate's switchboard is the one place a switch or tuning constant is read
(issue 41, gpu/switches.py): no environment read elsewhere in delegate_runtime, and no
module-level number or flag in delegate_runtime/gpu, but the facts listed here with why
each is no tuning. A new one fails here: put it on the switchboard, or list it with its
reason. The fusions' rules and the squeeze-excite kernel's limits are switches too:
the session's reach each rule through the fusion plan's Scope."""

from __future__ import annotations

import ast
from pathlib import Path

from delegate_runtime.gpu.switches import LAYOUT

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "delegate_runtime"
SWITCHBOARD = "delegate_runtime/gpu/switches.py"

#: Files that touch the environment outside the switchboard -> (how many places, why).
ENVIRONMENT_FACTS: dict[str, tuple[int, str]] = {
    "delegate_runtime/gpu/opencl/cache.py": (
        4,
        "XDG_CACHE_HOME says where the user's cache lies; the drivers' cache variables are "
        "set for the drivers (a user's own setting kept): facts of the host, no tuning; "
        "$DEVICEFARM_KERNEL_CACHE_BYTES: how much disk the host gives the compiled units, "
        "the lab's storage policy, not what a session runs",
    ),
    "delegate_runtime/gpu/opencl/build_workers.py": (
        1,
        "the environment handed to the build worker processes as it is",
    ),
    "delegate_runtime/gpu/opencl/build_pool.py": (
        1,
        "the environment handed to the resident builders as it is (the drivers' caches set "
        "as the sessions set them)",
    ),
    "delegate_runtime/tools/config_record.py": (
        1,
        "the CPU reference's BLAS thread variables, read to record them (an observer)",
    ),
    "delegate_runtime/env_numbers.py": (
        1,
        "the whole numbers its callers name, read for them: each caller in delegate_runtime "
        "is listed here itself (a call of whole_number counts as its read)",
    ),
    "delegate_runtime/gpu/opencl/lowering_cache.py": (
        1,
        "$DEVICEFARM_LOWERING_CACHE_BYTES: how much disk the host gives the kept lowerings, "
        "the lab's storage policy, not what a session runs",
    ),
}

#: Module-level numbers and flags in delegate_runtime/gpu that are no tuning, beside the
#: kernels' layout (switches.LAYOUT): module path -> name -> why.
NOT_TUNING: dict[str, dict[str, str]] = {
    "delegate_runtime/gpu/cpu_run_bounds.py": {
        "MAX_LOOP_TRIPS": "a safety bound on the loops LiteRT may run, as the farm's limits "
        "are: it decides where a loop runs, not how fast",
    },
    "delegate_runtime/gpu/opencl/build_pool.py": {
        "HEARTBEAT_S": "the resident builders' liveness protocol, not what runs",
        "HEARTBEAT_STALE_S": "the resident builders' liveness protocol, not what runs",
        "START_TIMEOUT_S": "a bound on builders that never start",
        "JOB_MAX_AGE_S": "when a dead session's job is cleared from the spool",
        "IDLE_RELEASE_S": "when an idle builder gives its context up: the lab's policy for "
        "its resident processes, not what a session runs (start_pool and `devicefarm "
        "build-pool --idle-release` set it)",
        "KEEP_HELD": "how many resident builders keep their contexts idle: the lab's policy "
        "for its resident processes, not what a session runs",
    },
    "delegate_runtime/gpu/opencl/lowering_cache.py": {
        "DEFAULT_BOUND": "the kept lowerings' disk bound: the host's storage policy, not what "
        "a session runs ($DEVICEFARM_LOWERING_CACHE_BYTES sets it)",
        "FORMAT_VERSION": "the kept lowerings' entry format",
        "ALIGN": "where the kept lowerings' arrays lie in their entry: the format",
    },
    "delegate_runtime/gpu/opencl/unit_claims.py": {
        "POLL_S": "how often the builders look at claims and jobs, not what runs",
    },
    "delegate_runtime/gpu/opencl/cache.py": {
        "CACHE_FORMAT_VERSION": "the cache entries' format",
        "MAX_ENTRY_BYTES": "a guard against a corrupt entry, not what runs",
        "DEFAULT_BOUND": "the compiled units' disk bound: the host's storage policy, not "
        "what a session runs ($DEVICEFARM_KERNEL_CACHE_BYTES sets it)",
    },
    "delegate_runtime/gpu/opencl/host_edges.py": {
        "MEM_LOCATION_HOST_NV": "cl_nv_create_buffer's flag value (the extension's API)",
    },
    "delegate_runtime/gpu/opencl/native_library.py": {
        "COMPILE_TIMEOUT_S": "a hung compiler's bound; the library is the same whatever it is",
        "VERSION_TIMEOUT_S": "a hung `cc --version`'s bound",
    },
    "delegate_runtime/gpu/opencl/records/reduce.py": {
        "WIDE_GROUP": "reduce4d_wide's work group, which reduce.cl is written for (layout)",
    },
}


def _modules(under: Path) -> list[tuple[str, ast.Module]]:
    return [
        (path.relative_to(ROOT).as_posix(), ast.parse(path.read_text(), str(path)))
        for path in sorted(under.rglob("*.py"))
    ]


def environment_reads(tree: ast.Module) -> list[int]:
    """Lines touching the environment: `os.environ`, `environ` imported from os, `getenv`,
    and calls of env_numbers.whole_number (a read on its caller's behalf)."""
    lines = [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and getattr(node.func, "id", getattr(node.func, "attr", None)) == "whole_number"
    ]
    imported = {
        alias.asname or alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module == "os"
        for alias in node.names
        if alias.name in ("environ", "getenv")
    }
    for node in ast.walk(tree):
        attribute = isinstance(node, ast.Attribute) and node.attr in ("environ", "getenv")
        if attribute or (isinstance(node, ast.Name) and node.id in imported):
            lines.append(node.lineno)
    return lines


def module_switches(tree: ast.Module) -> dict[str, int]:
    """Module-level UPPER_CASE names bound to a bool, int or float (literal or arithmetic
    of literals: `1 << 16`) -> their line."""
    found = {}
    for node in tree.body:
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        else:
            continue
        try:
            constant = eval(compile(ast.Expression(value), "<constant>", "eval"), {})  # noqa: S307
        except Exception:  # names, calls: not a literal number
            continue
        if not isinstance(constant, bool | int | float):
            continue
        for target in targets:
            if isinstance(target, ast.Name) and target.id.isupper():
                found[target.id] = node.lineno
    return found


def copies_of_defaults(tree: ast.Module) -> list[int]:
    """Lines of module-level assignments that read a field of the switchboard's DEFAULTS:
    a limit copied at import, which a session's own switches never reach."""
    return [
        node.lineno
        for node in tree.body
        if isinstance(node, ast.Assign | ast.AnnAssign)
        and any(
            isinstance(n, ast.Attribute)
            and isinstance(n.value, ast.Name)
            and n.value.id == "DEFAULTS"
            for n in ast.walk(node)
        )
    ]


def test_no_environment_read_outside_the_switchboard():
    touched = {
        path: len(lines)
        for path, tree in _modules(PACKAGE)
        if path != SWITCHBOARD and (lines := environment_reads(tree))
    }
    assert touched == {path: count for path, (count, _) in ENVIRONMENT_FACTS.items()}


def test_no_module_level_switch_in_the_gpu_delegate():
    layout = {(module.replace(".", "/") + ".py", attr) for module, attr in LAYOUT.values()}
    found = {
        (path, name)
        for path, tree in _modules(PACKAGE / "gpu")
        if path != SWITCHBOARD
        for name in module_switches(tree)
    }
    listed = {(path, name) for path, names in NOT_TUNING.items() for name in names}
    assert found - layout - listed == set(), "put it on gpu/switches.py, or list it"
    assert layout <= found, "a layout constant is gone: take it off switches.LAYOUT"
    assert listed <= found, "a listed fact is gone: take it off the list"


def test_no_limit_is_copied_from_the_defaults_at_import():
    """The rules read the session's switches when they run (fusions/scope.py's Scope
    carries them), never a copy taken at import, which an override would not reach."""
    copied = {
        path: lines
        for path, tree in _modules(PACKAGE)
        if path != SWITCHBOARD and (lines := copies_of_defaults(tree))
    }
    assert copied == {}


def test_the_checks_find_what_they_look_for():
    source = (
        "import os\nfrom os import environ as env\nFAST = True\nSPLIT = 1 << 4\nNAME = 'x'\n"
        "def f():\n    return os.getenv('A'), env['B'], os.environ.get('C')\n"
    )
    tree = ast.parse(source)
    assert environment_reads(tree) == [7, 7, 7]
    assert module_switches(tree) == {"FAST": 3, "SPLIT": 4}
    copied = "LIMIT = DEFAULTS.depthwise_aligned\ndef f(s=DEFAULTS):\n    return s.fuse\n"
    assert copies_of_defaults(ast.parse(copied)) == [1]
