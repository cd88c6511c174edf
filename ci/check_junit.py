#!/usr/bin/env python3
"""Parses a JUnit file strictly (junitparser, and lxml with recovery off, which refuses what
libxml2 refuses) and checks that the counts in the attributes match the test cases, as
TestGrid would read them, and that both parsers count the same cases. Exit 1 on any mismatch.

usage: check_junit.py FILE [--expect-tests N]
"""
import sys
import xml.etree.ElementTree as ET

import junitparser
from lxml import etree


def main() -> int:
    path = sys.argv[1]
    expect = int(sys.argv[sys.argv.index("--expect-tests") + 1]) if "--expect-tests" in sys.argv else None
    root = ET.parse(path).getroot()
    if root.tag != "testsuites":
        print(f"{path}: root is <{root.tag}>, TestGrid wants <testsuites>")
        return 1
    xml = junitparser.JUnitXml.fromfile(path)
    problems = []
    strict = etree.parse(path, etree.XMLParser(recover=False, huge_tree=False)).getroot()
    lxml_cases = len(strict.findall("./testsuite/testcase"))
    total = 0
    for suite in xml:
        cases = list(suite)
        failures = sum(1 for c in cases for r in c.result if isinstance(r, junitparser.Failure))
        skipped = sum(1 for c in cases for r in c.result if isinstance(r, junitparser.Skipped))
        if suite.tests != len(cases):
            problems.append(f"suite {suite.name}: tests={suite.tests} but {len(cases)} testcases")
        if suite.failures != failures:
            problems.append(f"suite {suite.name}: failures={suite.failures} but {failures} failed")
        if suite.skipped != skipped:
            problems.append(f"suite {suite.name}: skipped={suite.skipped} but {skipped} skipped")
        for c in cases:
            for r in c.result:
                if isinstance(r, junitparser.Skipped) and not (r.message or "").strip():
                    problems.append(f"{c.name}: skip without a message")
                if isinstance(r, junitparser.Failure) and "\n" in (r.message or ""):
                    problems.append(f"{c.name}: failure message spans lines")
        total += len(cases)
    if lxml_cases != total:
        problems.append(f"lxml counts {lxml_cases} testcases, junitparser {total}")
    if expect is not None and total != expect:
        problems.append(f"expected {expect} testcases, found {total}")
    for p in problems:
        print(f"{path}: {p}")
    print(f"{path}: {total} testcases, {'OK' if not problems else 'INVALID'}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
