#!/usr/bin/env python3
"""Holds a run with the reference CCM to its recorded verdicts: every case passes except the
ones ci/reference-skips.tsv lists, which are skipped. A redesign of the harness must not
change a verdict (issue 30); neither may a new skip appear unnoticed, nor a listed skip
start to run. When a verdict changes on purpose (a new case, a provider learning to express
a situation), the TSV changes in the same commit, with the reason.

Cases listed for a provider the run did not include are not looked for (a run of some
providers only). Exit 1 on any difference, or when the run has no cases.

usage: check_reference_verdicts.py JUNIT [--expected ci/reference-skips.tsv]
"""
import argparse
import os
import sys

from check_verdicts import verdicts

HERE = os.path.dirname(os.path.abspath(__file__))


def listed_skips(path):
    """{(provider, id)} from the TSV (# comments allowed)."""
    out = set()
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if not line.strip() or line.startswith("#"):
                continue
            cols = line.split("\t")
            if len(cols) < 2:
                sys.exit(f"{path}:{n}: want provider<TAB>id<TAB>reason")
            out.add((cols[0], cols[1]))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("junit")
    ap.add_argument("--expected", default=os.path.join(HERE, "reference-skips.tsv"))
    args = ap.parse_args()
    run = verdicts(args.junit)
    if not run:
        sys.exit(f"{args.junit}: no cases")
    skips = listed_skips(args.expected)
    providers = {p for p, _ in run}
    problems = []
    for (p, i), (_suite, verdict, message) in sorted(run.items()):
        want = "skip" if (p, i) in skips else "pass"
        if verdict != want:
            why = f": {message[:200]}" if message else ""
            problems.append(f"{p} {i}: {verdict}, recorded {want}{why}")
    for p, i in sorted(skips):
        if p in providers and (p, i) not in run:
            problems.append(f"{p} {i}: recorded as skipped, not in the run")
    for line in problems:
        print(line)
    counts = {v: sum(1 for x in run.values() if x[1] == v) for v in ("pass", "fail", "skip")}
    if problems:
        print(f"{len(problems)} reference verdicts differ from {args.expected}", file=sys.stderr)
        return 1
    print(f"reference verdicts as recorded: {len(run)} cases ({counts['pass']} pass, "
          f"{counts['skip']} skip)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
