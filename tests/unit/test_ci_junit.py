"""orchestrator.junit: the gate report as JUnit XML that parses (xml.etree) with the right
counts and validates (lxml) against the schema Jenkins' xunit plugin reads
(tests/data/junit_xunit.xsd), and orchestrator.gate's exit codes."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from orchestrator import gate, junit
from orchestrator.gate import Cell, GateReport
from orchestrator.regression import Verdict
from tests.conftest import require

SLOWER = Verdict(0.4, 1e-9, True, "mann-whitney")
SAME = Verdict(0.01, 0.4, False, "mann-whitney")


def report(*cells: Cell) -> GateReport:
    return GateReport(7, "nightly \x01<&>", list(cells), baseline="campaign 3")


def ok(device: str = "noop:a", verdict: Verdict | None = SAME) -> Cell:
    return Cell(1, "mobilenet", device, "cpu", "succeeded", "", 1.5, verdict, 3)


def failed(state: str = "failed", reason: str = "boom\x07 <bad> & worse\nline 2") -> Cell:
    return Cell(2, "mobilenet", "noop:b", "gpu-fp32", state, reason, None)


def parse(r: GateReport, tmp_path: Path) -> ET.Element:
    return ET.parse(junit.write(r, tmp_path / "junit.xml")).getroot()


def test_a_clean_campaign_has_no_failures(tmp_path: Path) -> None:
    root = parse(report(ok(), ok("noop:c", None)), tmp_path)
    suite = root.find("testsuite")
    assert root.get("tests") == suite.get("tests") == "2"
    assert root.get("failures") == suite.get("failures") == "0"
    assert len(suite.findall("testcase")) == 2 and not list(root.iter("failure"))
    assert [c.get("name") for c in suite.iter("testcase")] == ["noop:a cpu", "noop:c cpu"]


def test_failed_jobs_and_regressions_are_failures(tmp_path: Path) -> None:
    r = report(ok(verdict=SLOWER), failed(), failed("timed_out"), ok("noop:c"))
    root = parse(r, tmp_path)
    assert (root.get("tests"), root.get("failures")) == ("4", "3")
    cases = root.find("testsuite").findall("testcase")
    kinds = [[f.get("type") for f in c.findall("failure")] for c in cases]
    assert kinds == [["regression"], ["failed"], ["timed_out"], []]
    assert "+40.0%" in cases[0].find("failure").get("message")
    # control bytes could not be written as XML: replaced; markup is escaped, not parsed
    assert cases[1].find("failure").text == "boom\ufffd <bad> & worse\nline 2"
    assert root.find("testsuite").get("name") == "campaign 7: nightly \ufffd<&>"


def running(state: str = "running") -> Cell:
    return Cell(3, "mobilenet", "android:x", "gpu-fp16", state, "", None)


XSD = Path(__file__).resolve().parents[1] / "data" / "junit_xunit.xsd"


@pytest.fixture(scope="module")
def xunit_schema():
    import importlib.util

    require(importlib.util.find_spec("lxml") is not None, "lxml (the dev extra)")
    from lxml import etree

    return etree.XMLSchema(etree.parse(str(XSD)))


def assert_valid(schema, data: bytes) -> None:
    from lxml import etree

    doc = etree.fromstring(data)
    assert schema.validate(doc), "\n".join(str(e) for e in schema.error_log)


def test_the_schema_refuses_what_xunit_refuses(xunit_schema) -> None:
    # the file Jenkins refused: `skipped` on <testsuites>; and a time in exponent form
    bad = [
        b'<testsuites skipped="0"><testsuite name="a" tests="0" failures="0" errors="0"/>'
        b"</testsuites>",
        b'<testsuites><testsuite name="a" tests="0" failures="0" errors="0" time="1e-05"/>'
        b"</testsuites>",
        b'<testsuites><testsuite name="a" tests="1" failures="0" errors="0">'
        b"<testcase classname='m'/></testsuite></testsuites>",
    ]
    from lxml import etree

    assert [xunit_schema.validate(etree.fromstring(b)) for b in bad] == [False] * 3


REPORTS = {
    "clean": report(ok(), ok("noop:c", None)),
    "failed and regressed": report(ok(verdict=SLOWER), failed(), failed("timed_out")),
    "unfinished": report(ok(), running(), running("queued")),
    "empty": report(),
}


@pytest.mark.parametrize("name", list(REPORTS))
def test_reports_validate_against_the_xunit_schema(xunit_schema, name: str) -> None:
    assert_valid(xunit_schema, junit.to_xml(REPORTS[name]))


def test_jobs_still_running_are_errors_that_say_why(tmp_path: Path) -> None:
    r = report(ok(), running(), running("queued"))
    out = tmp_path / "junit.xml"
    junit.write(r, out, ended="--wait-timeout 60 s passed")
    root = ET.parse(out).getroot()
    suite = root.find("testsuite")
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("3", "0", "2")
    assert root.get("errors") == "2" and root.get("skipped") is None
    errors = [e for c in suite.iter("testcase") for e in c.findall("error")]
    assert [e.get("type") for e in errors] == ["unfinished", "unfinished"]
    assert errors[0].get("message") == "running when the wait ended: --wait-timeout 60 s passed"


def test_exit_codes() -> None:
    assert report(ok(), ok("noop:c")).exit_code == gate.EXIT_OK == 0
    assert report(ok(verdict=SLOWER)).exit_code == gate.EXIT_REGRESSED == 3
    assert report(ok(verdict=SLOWER), failed("cancelled")).exit_code == gate.EXIT_FAILED == 1


def test_summary_has_a_regressions_section() -> None:
    lines = gate.summary_lines(report(ok(verdict=SLOWER), failed()))
    text = "\n".join(lines)
    assert "failed jobs (1):" in text and "regressions (1 of 1 judged" in text
    assert lines[-1].startswith("campaign 7: failed (exit 1)")
