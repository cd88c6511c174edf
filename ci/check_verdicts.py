#!/usr/bin/env python3
"""Compares a conformance run of upstream's CCMs with the verdicts we expect of them.

Every case that does not pass with an upstream CCM must be listed in the expectations file
with the reason and the upstream file or issue it comes from (ci/upstream-verdicts.tsv).
This script fails (exit 1) when:
  - a case fails that is not listed as an expected failure (a regression, or a new finding
    that needs investigating before it can be listed);
  - a case is skipped that the reference CCM passes, and it is not listed as an expected
    skip (skips both CCMs share carry their reason in the JUnit file already);
  - a provider's upstream CCM passes fewer than --min-ratio of the cases the reference CCM
    passes (when --reference gives the reference run's JUnit). The ratio is over the
    conformance suites, not the Chaos suite: its five short soaks per provider tend to break
    on one upstream bug together, which the list names case by case. `--min-ratio 0.9` holds
    every provider; `--min-ratio azure=0.6` (repeatable) one provider, whose upstream CCM
    differs from the reference by design in listed, cited cases.
A listed case that now passes is reported (the list is stale) but does not fail the check:
the cases with timing in them may pass on a quiet machine. With --retry (the JUnit of a
rerun of the failed cases, `ccm-conformance run --rerun-failed`), an unlisted failure that
passed on the rerun is reported as flaky instead of failing the check.

With --matrix it prints the README's matrix: provider x suite -> pass / fail / skip, with
the reference CCM's column beside it.

usage: check_verdicts.py JUNIT --expected TSV [--reference JUNIT] [--retry JUNIT]
                         [--min-ratio 0.9] [--min-ratio PROVIDER=RATIO ...] [--matrix]
"""
import argparse
import os
import re
import sys
import xml.etree.ElementTree as ET
from collections import defaultdict

NAME = re.compile(r"^\[sig-cloud-provider\] \[(?P<provider>[a-z]+)\] (?P<suite>\S+) .*\((?P<id>[A-Z]+-\d+[a-z]?)\)")


def verdicts(path):
    """{(provider, id): (suite, verdict, message)} from a JUnit file."""
    out = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        m = NAME.match(case.get("name", ""))
        if not m:
            continue
        if case.find("failure") is not None or case.find("error") is not None:
            el = case.find("failure") if case.find("failure") is not None else case.find("error")
            verdict, message = "fail", el.get("message", "")
        elif case.find("skipped") is not None:
            verdict, message = "skip", case.find("skipped").get("message", "")
        else:
            verdict, message = "pass", ""
        out[(m["provider"], m["id"])] = (m["suite"], verdict, message)
    return out


def expected(path):
    """{(provider, id): (verdict, category, reason)} from the TSV (# comments allowed)."""
    out = {}
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            cols = line.split("\t")
            if len(cols) != 5 or cols[2] not in ("fail", "skip"):
                sys.exit(f"{path}:{n}: want provider<TAB>id<TAB>fail|skip<TAB>category<TAB>reason")
            provider, case_id, verdict, category, reason = cols
            if not reason.strip():
                sys.exit(f"{path}:{n}: {provider} {case_id} has no reason")
            out[(provider, case_id)] = (verdict, category, reason)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("junit")
    ap.add_argument("--expected", required=True)
    ap.add_argument("--reference")
    ap.add_argument("--retry")
    ap.add_argument("--min-ratio", action="append", default=[])
    ap.add_argument("--matrix", action="store_true")
    args = ap.parse_args()

    min_ratio, min_ratio_of = 0.9, {}
    for r in args.min_ratio:
        provider, sep, value = r.rpartition("=")
        try:
            ratio = float(value)
        except ValueError:
            sys.exit(f"--min-ratio {r!r}: want RATIO or PROVIDER=RATIO")
        if sep:
            min_ratio_of[provider] = ratio
        else:
            min_ratio = ratio

    got = verdicts(args.junit)
    want = expected(args.expected)
    if not got:
        print(f"{args.junit}: no conformance cases found")
        return 1
    ref = verdicts(args.reference) if args.reference else {}
    retry = verdicts(args.retry) if args.retry and os.path.exists(args.retry) else {}
    problems, stale, flaky = [], [], []
    for key, (suite, verdict, message) in sorted(got.items()):
        listed = want.get(key)
        if verdict == "pass":
            if listed:
                stale.append(f"{key[0]} {key[1]}: listed as {listed[0]} but passed")
            continue
        if verdict == "skip" and not listed and (not ref or ref.get(key, ("", "skip"))[1] != "pass"):
            continue
        if not listed and verdict == "fail" and retry.get(key, ("", ""))[1] == "pass":
            flaky.append(f"{key[0]} {key[1]} ({suite}): failed, then passed on the rerun: {message[:300]}")
            continue
        if not listed:
            problems.append(f"{key[0]} {key[1]} ({suite}): unexpected {verdict}: {message[:300]}")
        elif listed[0] != verdict:
            problems.append(f"{key[0]} {key[1]}: expected {listed[0]}, got {verdict}: {message[:300]}")

    providers = sorted({p for p, _ in got})
    for p in providers:
        # A failure that passed on the rerun counts as a pass here (it is reported as flaky).
        ups = sum(1 for k, v in got.items() if k[0] == p and v[0] != "Chaos" and (
            v[1] == "pass" or (v[1] == "fail" and retry.get(k, ("", ""))[1] == "pass")))
        # Over the cases the upstream run has: a suite it left out counts on neither side.
        refs = sum(1 for k, v in ref.items()
                   if k[0] == p and v[0] != "Chaos" and v[1] == "pass" and k in got)
        line = f"{p}: upstream passes {ups}"
        if ref:
            ratio = ups / refs if refs else 1.0
            line += f", reference {refs} ({ratio:.0%})"
            floor = min_ratio_of.get(p, min_ratio)
            if ratio < floor:
                problems.append(f"{p}: upstream passes {ups} of the reference's {refs} ({ratio:.0%} < {floor:.0%})")
        print(line)

    if args.matrix:
        table = defaultdict(lambda: defaultdict(int))
        for (p, _), (suite, verdict, _) in got.items():
            table[(p, suite)]["up_" + verdict] += 1
        # Only the providers the upstream run covered (a reference run may cover more).
        covered = {p for p, _ in got}
        for (p, _), (suite, verdict, _) in ref.items():
            if p in covered:
                table[(p, suite)]["ref_" + verdict] += 1
        print("\n| provider | suite | upstream pass / fail / skip | reference pass / fail / skip |")
        print("|---|---|---|---|")
        for (p, suite) in sorted(table):
            t = table[(p, suite)]
            print(f"| {p} | {suite} | {t['up_pass']} / {t['up_fail']} / {t['up_skip']} "
                  f"| {t['ref_pass']} / {t['ref_fail']} / {t['ref_skip']} |")

    for s in stale:
        print(f"note: {s} (update {args.expected})")
    for f in flaky:
        print(f"FLAKY: {f}")
    for p in problems:
        print(f"ERROR: {p}")
    if problems:
        print(f"{len(problems)} problems; every non-pass must be listed in {args.expected} with its upstream reason")
        return 1
    print(f"verdicts as expected ({len(got)} cases, {len(want)} listed non-passes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
