"""A gate report as JUnit XML, the format CI systems show: one testsuite per campaign, one
testcase per job (`classname` the model, `name` device and configuration), a `failure`
element for a job that did not succeed, for a latency that regressed, and for a suspect
latency that its confirmation could not decide (`unconfirmed`).
"""

from __future__ import annotations

import os
import re
import xml.etree.ElementTree as ET
from pathlib import Path

from .gate import GateReport

#: Characters XML 1.0 cannot hold (control bytes from device logs, errors quoting models).
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _text(value: object) -> str:
    return _NOT_XML.sub("\ufffd", str(value))


def to_xml(report: GateReport) -> bytes:
    """The report as a JUnit XML document (UTF-8)."""
    failures = len(report.failed) + len(report.regressions) + len(report.undecided)
    total_s = sum(c.seconds or 0.0 for c in report.cells)
    counts = {
        "tests": str(len(report.cells)),
        "failures": str(failures),
        "errors": "0",
        "skipped": "0",
        "time": f"{total_s:.3f}",
    }
    root = ET.Element("testsuites", {"name": "devicefarm", **counts})
    suite = ET.SubElement(
        root,
        "testsuite",
        {"name": _text(f"campaign {report.campaign_id}: {report.name}"), **counts},
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
        if c.failed:
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


def write(report: GateReport, path: str | os.PathLike) -> Path:
    """Write the report's JUnit XML to `path` (through a temporary file and a rename)."""
    out = Path(path)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_bytes(to_xml(report))
    os.replace(tmp, out)
    return out
