#!/usr/bin/env python3
"""Checks that cases run on a real kube-apiserver got the verdicts they got on the embedded
API server (issue 14: where a verdict differs, the embedded server is wrong until shown
otherwise).

For every case in REAL's JUnit file, the same case (provider and ID) in EMBEDDED's must have
the same verdict (pass, fail or skip). A failure that passed on a rerun of the failed cases
(--retry for the real run's rerun, --embedded-retry for the embedded run's) counts as a pass
and is reported as flaky. Exit 1 on any difference, or when REAL has no cases.

With --exact the two must hold the same cases of the suites REAL has per provider (no
case missing on either side): how .ci/run holds a sharded and merged run to the unsharded one (issue 19),
with --labels unsharded,merged for the words.

usage: check_same_verdicts.py EMBEDDED_JUNIT REAL_JUNIT [--retry JUNIT] [--embedded-retry JUNIT]
                              [--exact] [--labels FIRST,SECOND]
"""
import argparse
import os
import sys

from check_verdicts import verdicts


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("embedded")
    ap.add_argument("real")
    ap.add_argument("--retry")
    ap.add_argument("--embedded-retry")
    ap.add_argument("--exact", action="store_true")
    ap.add_argument("--labels", default="embedded,real")
    args = ap.parse_args()
    first, second = (args.labels.split(",") + ["second"])[:2]

    flaky = []

    def settled(path, retry_path, server):
        """Verdicts of a run, a failure that passed on its rerun counted as a pass."""
        out = verdicts(path)
        retry = verdicts(retry_path) if retry_path and os.path.exists(retry_path) else {}
        for key, (suite, verdict, message) in out.items():
            if verdict == "fail" and retry.get(key, ("", ""))[1] == "pass":
                flaky.append(f"{key[0]} {key[1]} ({suite}): failed on the {server} run, "
                             f"then passed on the rerun: {message[:300]}")
                out[key] = (suite, "pass", "")
        return out

    embedded = settled(args.embedded, args.embedded_retry, first)
    real = settled(args.real, args.retry, second)
    if not real:
        print(f"{args.real}: no conformance cases found")
        return 1
    problems = []
    for key, (suite, verdict, message) in sorted(real.items()):
        theirs = embedded.get(key)
        if theirs is None:
            problems.append(f"{key[0]} {key[1]} ({suite}): not in {args.embedded}")
        elif theirs[1] != verdict:
            problems.append(
                f"{key[0]} {key[1]} ({suite}): {verdict} on the {second} run, {theirs[1]} on the {first} one: "
                f"{(message or theirs[2])[:300]}")
    if args.exact:
        groups = {(p, suite) for (p, _), (suite, _, _) in real.items()}
        for key, (suite, _, _) in sorted(embedded.items()):
            if (key[0], suite) in groups and key not in real:
                problems.append(f"{key[0]} {key[1]} ({suite}): not in {args.real}")
    for f in flaky:
        print(f"FLAKY: {f}")
    for p in problems:
        print(f"ERROR: {p}")
    if problems:
        print(f"{len(problems)} cases differ between the {first} and the {second} run")
        return 1
    counts = {v: sum(1 for x in real.values() if x[1] == v) for v in ("pass", "fail", "skip")}
    print(f"same verdicts in the {first} and the {second} run: {len(real)} cases "
          f"({counts['pass']} pass, {counts['fail']} fail, {counts['skip']} skip)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
