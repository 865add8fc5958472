"""A gate report as JUnit XML, the format CI systems show: one testsuite per campaign, one
testcase per job (`classname` the model, `name` device and configuration), a `failure`
element for a job that did not succeed, for a latency that regressed, and for a suspect
latency that its confirmation could not decide (`unconfirmed`); an `error` for a job that
had not ended when the wait did (`unfinished`: a --wait-timeout, an interrupt).

The document keeps to the schema Jenkins' xunit plugin validates JUnit files against
(its junit-10.xsd; tests/data/junit_xunit.xsd restates it): `<testsuites>` carries only
name, time, tests, failures and errors; times have at most three decimals.
"""

from __future__ import annotations

import os
import re
import xml.etree.ElementTree as ET
from pathlib import Path

from farm_core.schema import ACTIVE_STATES

from .gate import Cell, GateReport

#: Characters XML 1.0 cannot hold (control bytes from device logs, errors quoting models).
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _text(value: object) -> str:
    return _NOT_XML.sub("\ufffd", str(value))


def _unfinished(c: Cell) -> bool:
    return c.state in ACTIVE_STATES


def to_xml(report: GateReport, ended: str = "") -> bytes:
    """The report as a JUnit XML document (UTF-8); `ended`: why the wait ended before every
    job did (said in each unfinished job's error)."""
    unfinished = [c for c in report.cells if _unfinished(c)]
    failed = [c for c in report.failed if not _unfinished(c)]
    failures = len(failed) + len(report.regressions) + len(report.undecided)
    total_s = sum(c.seconds or 0.0 for c in report.cells)
    counts = {
        "tests": str(len(report.cells)),
        "failures": str(failures),
        "errors": str(len(unfinished)),
        "time": f"{total_s:.3f}",
    }
    root = ET.Element("testsuites", {"name": "devicefarm", **counts})
    suite = ET.SubElement(
        root,
        "testsuite",
        {"name": _text(f"campaign {report.campaign_id}: {report.name}"), **counts, "skipped": "0"},
    )
    for c in report.cells:
        case = ET.SubElement(
            suite,
            "testcase",
            {
                "classname": _text(c.model),
                "name": _text(f"{c.device} {c.config}"),
                "time": f"{c.seconds or 0.0:.3f}",
            },
        )
        if _unfinished(c):
            why = f"{c.state} when the wait ended" + (f": {ended}" if ended else "")
            error = ET.SubElement(case, "error", {"type": "unfinished", "message": _text(why)})
            error.text = _text(why)
        elif c.failed:
            first = c.reason.splitlines()[0][:200] if c.reason else ""
            failure = ET.SubElement(
                case, "failure", {"type": c.state, "message": _text(f"{c.state}: {first}")}
            )
            failure.text = _text(c.reason)
        elif c.regressed or c.undecided:
            kind = "regression" if c.regressed else "unconfirmed"
            what = f"latency {c.describe()}"
            against = f" (baseline: {report.baseline})"
            failure = ET.SubElement(
                case, "failure", {"type": kind, "message": _text(what + against)}
            )
            failure.text = _text(what + against)
    ET.indent(root)
    return ET.tostring(root, encoding="utf-8", xml_declaration=True)


def write(report: GateReport, path: str | os.PathLike, ended: str = "") -> Path:
    """Write the report's JUnit XML to `path` (through a temporary file and a rename)."""
    out = Path(path)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_bytes(to_xml(report, ended))
    os.replace(tmp, out)
    return out
