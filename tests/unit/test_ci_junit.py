"""orchestrator.junit: the gate report as JUnit XML that parses (xml.etree) with the right
counts, and orchestrator.gate's exit codes."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from orchestrator import gate, junit
from orchestrator.gate import Cell, GateReport
from orchestrator.regression import Verdict

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


def test_exit_codes() -> None:
    assert report(ok(), ok("noop:c")).exit_code == gate.EXIT_OK == 0
    assert report(ok(verdict=SLOWER)).exit_code == gate.EXIT_REGRESSED == 3
    assert report(ok(verdict=SLOWER), failed("cancelled")).exit_code == gate.EXIT_FAILED == 1


def test_summary_has_a_regressions_section() -> None:
    lines = gate.summary_lines(report(ok(verdict=SLOWER), failed()))
    text = "\n".join(lines)
    assert "failed jobs (1):" in text and "regressions (1 of 1 judged" in text
    assert lines[-1].startswith("campaign 7: failed (exit 1)")
