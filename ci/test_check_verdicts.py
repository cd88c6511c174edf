#!/usr/bin/env python3
"""Tests of ci/check_verdicts.py, ci/check_same_verdicts.py and
ci/check_reference_verdicts.py on small JUnit files: each
rule they enforce fails the check when broken and passes it when kept. Run by .ci/run
before the checks themselves."""
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
NAME = "[sig-cloud-provider] [{p}] {suite} some title ({id}) [Mock]"


def junit(cases):
    """cases: [(provider, id, 'pass'|'fail'|'skip')]"""
    body = []
    for p, i, v in cases:
        inner = {"pass": "", "fail": '<failure message="boom"/>', "skip": '<skipped message="why"/>'}[v]
        suite = "Chaos" if i.startswith("CH-") else "NodeInit"
        body.append(f'<testcase name="{NAME.format(p=p, suite=suite, id=i)}">{inner}</testcase>')
    return f'<testsuites><testsuite name="x">{"".join(body)}</testsuite></testsuites>'


class CheckVerdicts(unittest.TestCase):
    def run_check(self, up, expected, ref=None, retry=None, min_ratio="0.5", extra=()):
        d = tempfile.mkdtemp()
        files = {}
        for name, text in [("up.xml", junit(up)), ("exp.tsv", expected)] + (
            [("ref.xml", junit(ref))] if ref else []) + ([("retry.xml", junit(retry))] if retry else []):
            files[name] = os.path.join(d, name)
            with open(files[name], "w") as f:
                f.write(text)
        args = [sys.executable, os.path.join(HERE, "check_verdicts.py"), files["up.xml"],
                "--expected", files["exp.tsv"], "--min-ratio", min_ratio, *extra]
        if ref:
            args += ["--reference", files["ref.xml"]]
        if retry:
            args += ["--retry", files["retry.xml"]]
        return subprocess.run(args, capture_output=True, text=True)

    def test_listed_failure_passes_unlisted_fails(self):
        listed = "aws\tNI-01\tfail\tupstream-bug\tcited reason\n"
        self.assertEqual(self.run_check([("aws", "NI-01", "fail"), ("aws", "NI-02", "pass")], listed).returncode, 0)
        r = self.run_check([("aws", "NI-01", "fail"), ("aws", "NI-02", "fail")], listed)
        self.assertEqual(r.returncode, 1, r.stdout)
        self.assertIn("aws NI-02", r.stdout)

    def test_skip_only_upstream_has_must_be_listed(self):
        ref = [("aws", "NI-06", "pass")]
        r = self.run_check([("aws", "NI-06", "skip")], "", ref=ref, min_ratio="0")
        self.assertEqual(r.returncode, 1, r.stdout)
        listed = "aws\tNI-06\tskip\treference-only\tquirk\n"
        self.assertEqual(self.run_check([("aws", "NI-06", "skip")], listed, ref=ref, min_ratio="0").returncode, 0)
        # A skip both CCMs share needs no entry.
        self.assertEqual(self.run_check([("aws", "NA-02", "skip")], "", ref=[("aws", "NA-02", "skip")]).returncode, 0)

    def test_flaky_is_reported_not_failed(self):
        r = self.run_check([("aws", "LB-14", "fail")], "", retry=[("aws", "LB-14", "pass")])
        self.assertEqual(r.returncode, 0, r.stdout)
        self.assertIn("FLAKY: aws LB-14", r.stdout)
        r = self.run_check([("aws", "LB-14", "fail")], "", retry=[("aws", "LB-14", "fail")])
        self.assertEqual(r.returncode, 1, r.stdout)

    def test_a_flaky_pass_counts_for_the_ratio(self):
        ref = [("aws", "NI-01", "pass"), ("aws", "NI-02", "pass")]
        up = [("aws", "NI-01", "pass"), ("aws", "NI-02", "fail")]
        r = self.run_check(up, "", ref=ref, retry=[("aws", "NI-02", "pass")], min_ratio="0.9")
        self.assertEqual(r.returncode, 0, r.stdout)

    def test_ratio_below_the_minimum_fails(self):
        ref = [("aws", "NI-01", "pass"), ("aws", "NI-02", "pass")]
        listed = "aws\tNI-02\tfail\tupstream-bug\tcited\n"
        up = [("aws", "NI-01", "pass"), ("aws", "NI-02", "fail")]
        self.assertEqual(self.run_check(up, listed, ref=ref, min_ratio="0.5").returncode, 0)
        self.assertEqual(self.run_check(up, listed, ref=ref, min_ratio="0.9").returncode, 1)

    def test_the_ratio_counts_only_cases_the_upstream_run_has(self):
        ref = [("aws", "NI-01", "pass"), ("aws", "LB-01", "pass"), ("aws", "LB-02", "pass")]
        r = self.run_check([("aws", "NI-01", "pass")], "", ref=ref, min_ratio="0.9")
        self.assertEqual(r.returncode, 0, r.stdout)
        self.assertIn("reference 1 (100%)", r.stdout)

    def test_the_ratio_leaves_the_chaos_suite_out(self):
        ref = [("gcp", "NI-01", "pass"), ("gcp", "CH-01", "pass"), ("gcp", "CH-02", "pass")]
        up = [("gcp", "NI-01", "pass"), ("gcp", "CH-01", "fail"), ("gcp", "CH-02", "fail")]
        listed = "gcp\tCH-01\tfail\tupstream-old\tcited\ngcp\tCH-02\tfail\tupstream-old\tcited\n"
        r = self.run_check(up, listed, ref=ref, min_ratio="0.9")
        self.assertEqual(r.returncode, 0, r.stdout)
        self.assertIn("reference 1 (100%)", r.stdout)
        # ... but its failures are still held to the list.
        self.assertEqual(self.run_check(up, "", ref=ref, min_ratio="0.9").returncode, 1)

    def test_a_provider_can_have_its_own_minimum(self):
        ref = [("aws", "NI-01", "pass"), ("aws", "NI-02", "pass"),
               ("azure", "NI-01", "pass"), ("azure", "NI-02", "pass")]
        listed = "azure\tNI-02\tfail\tupstream-design\tcited\n"
        up = [("aws", "NI-01", "pass"), ("aws", "NI-02", "pass"),
              ("azure", "NI-01", "pass"), ("azure", "NI-02", "fail")]
        self.assertEqual(self.run_check(up, listed, ref=ref, min_ratio="0.9").returncode, 1)
        r = self.run_check(up, listed, ref=ref, min_ratio="0.9", extra=["--min-ratio", "azure=0.5"])
        self.assertEqual(r.returncode, 0, r.stdout)
        # The per-provider floor does not lower the others'.
        up_aws = [("aws", "NI-01", "pass"), ("aws", "NI-02", "fail")] + up[2:]
        listed_aws = listed + "aws\tNI-02\tfail\tupstream-bug\tcited\n"
        r = self.run_check(up_aws, listed_aws, ref=ref, min_ratio="0.9", extra=["--min-ratio", "azure=0.5"])
        self.assertEqual(r.returncode, 1, r.stdout)
        self.assertNotEqual(self.run_check(up, listed, ref=ref, extra=["--min-ratio", "azure=x"]).returncode, 0)

    def test_an_entry_without_a_reason_is_refused(self):
        r = self.run_check([("aws", "NI-01", "fail")], "aws\tNI-01\tfail\tupstream-bug\t \n")
        self.assertNotEqual(r.returncode, 0)


class CheckSameVerdicts(unittest.TestCase):
    def run_check(self, embedded, real, retry=None, embedded_retry=None, extra=()):
        d = tempfile.mkdtemp()
        files = {}
        for name, cases in [("embedded.xml", embedded), ("real.xml", real)] + (
                [("retry.xml", retry)] if retry else []) + (
                [("eretry.xml", embedded_retry)] if embedded_retry else []):
            files[name] = os.path.join(d, name)
            with open(files[name], "w") as f:
                f.write(junit(cases))
        args = [sys.executable, os.path.join(HERE, "check_same_verdicts.py"),
                files["embedded.xml"], files["real.xml"]]
        if retry:
            args += ["--retry", files["retry.xml"]]
        if embedded_retry:
            args += ["--embedded-retry", files["eretry.xml"]]
        args += list(extra)
        return subprocess.run(args, capture_output=True, text=True)

    def test_the_same_verdicts_pass_a_different_one_fails(self):
        embedded = [("openstack", "NI-01", "pass"), ("openstack", "LB-19", "skip"), ("openstack", "LB-03", "fail")]
        self.assertEqual(self.run_check(embedded, embedded[:2]).returncode, 0)
        r = self.run_check(embedded, [("openstack", "NI-01", "fail")])
        self.assertEqual(r.returncode, 1, r.stdout)
        self.assertIn("fail on the real run, pass on the embedded one", r.stdout)
        # A pass on the real server where the embedded one failed is a difference too.
        self.assertEqual(self.run_check(embedded, [("openstack", "LB-03", "pass")]).returncode, 1)

    def test_a_case_missing_on_one_side_or_an_empty_run_fails(self):
        self.assertEqual(self.run_check([("aws", "NI-01", "pass")], [("openstack", "NI-01", "pass")]).returncode, 1)
        self.assertEqual(self.run_check([("aws", "NI-01", "pass")], []).returncode, 1)

    def test_exact_wants_every_case_of_the_providers_on_both_sides(self):
        whole = [("vsphere", "NI-01", "pass"), ("vsphere", "NI-02", "skip"), ("aws", "NI-01", "pass")]
        merged = [("vsphere", "NI-01", "pass"), ("vsphere", "NI-02", "skip")]
        exact = ["--exact", "--labels", "unsharded,merged"]
        r = self.run_check(whole, merged, extra=exact)
        self.assertEqual(r.returncode, 0, r.stdout)
        self.assertIn("unsharded and the merged run", r.stdout)
        r = self.run_check(whole, merged[:1], extra=exact)
        self.assertEqual(r.returncode, 1, r.stdout)
        self.assertIn("vsphere NI-02", r.stdout)
        # Without --exact a case only the first run has is not looked at.
        self.assertEqual(self.run_check(whole, merged[:1]).returncode, 0)

    def test_a_failure_that_passes_on_the_rerun_is_flaky(self):
        embedded = [("openstack", "NI-01", "pass")]
        r = self.run_check(embedded, [("openstack", "NI-01", "fail")], retry=[("openstack", "NI-01", "pass")])
        self.assertEqual(r.returncode, 0, r.stdout)
        self.assertIn("FLAKY: openstack NI-01", r.stdout)
        r = self.run_check([("openstack", "NI-01", "fail")], [("openstack", "NI-01", "pass")],
                           embedded_retry=[("openstack", "NI-01", "pass")])
        self.assertEqual(r.returncode, 0, r.stdout)
        r = self.run_check(embedded, [("openstack", "NI-01", "fail")], retry=[("openstack", "NI-01", "fail")])
        self.assertEqual(r.returncode, 1, r.stdout)



class CheckReferenceVerdicts(unittest.TestCase):
    TSV = "# comment\nopenstack\tNI-03\twhy\naws\tNI-03\twhy\n"

    def run_check(self, cases, tsv=TSV):
        d = tempfile.mkdtemp()
        run, exp = os.path.join(d, "run.xml"), os.path.join(d, "skips.tsv")
        with open(run, "w") as f:
            f.write(junit(cases))
        with open(exp, "w") as f:
            f.write(tsv)
        return subprocess.run(
            [sys.executable, os.path.join(HERE, "check_reference_verdicts.py"), run,
             "--expected", exp], capture_output=True, text=True)

    def test_recorded_verdicts_pass(self):
        r = self.run_check([("openstack", "NI-01", "pass"), ("openstack", "NI-03", "skip")])
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)

    def test_a_new_skip_fails(self):
        r = self.run_check([("openstack", "NI-01", "skip"), ("openstack", "NI-03", "skip")])
        self.assertEqual(r.returncode, 1, r.stdout)
        self.assertIn("openstack NI-01: skip, recorded pass", r.stdout)

    def test_a_listed_skip_that_runs_fails(self):
        r = self.run_check([("openstack", "NI-03", "pass")])
        self.assertEqual(r.returncode, 1, r.stdout)

    def test_a_failure_fails(self):
        r = self.run_check([("openstack", "NI-01", "fail"), ("openstack", "NI-03", "skip")])
        self.assertEqual(r.returncode, 1, r.stdout)

    def test_a_listed_case_missing_from_a_run_of_its_provider_fails(self):
        r = self.run_check([("openstack", "NI-01", "pass")])
        self.assertEqual(r.returncode, 1, r.stdout)
        self.assertIn("not in the run", r.stdout)

    def test_providers_not_run_are_not_looked_for(self):
        # aws NI-03 is listed, but this run has no aws cases.
        r = self.run_check([("openstack", "NI-03", "skip")])
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)


if __name__ == "__main__":
    unittest.main()
