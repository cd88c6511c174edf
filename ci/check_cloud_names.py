#!/usr/bin/env python3
"""No file outside a cloud's own folders names a specific cloud in non-test Rust code.

A cloud lives in its own folders (ARCHITECTURE.md "Adding a cloud"): its mock crate
(mocks/<cloud>/), the reference CCM's provider (reference-ccm/src/providers/<cloud>/) and
the harness backend with its registry descriptor (harness/src/cloud/<cloud>.rs or
harness/src/cloud/<cloud>/). Each registry, the one list of clouds, names them too:
harness/src/cloud/registry.rs and reference-ccm/src/providers/registry.rs, and so does a `mod`
line that declares a cloud's module. Everything else reads
the registry. This check reads every tracked .rs file outside those places, drops comments,
test files and `#[cfg(test)]` modules, and prints each line that still names a cloud.

Usage: check_cloud_names.py [--count]   (exit 1 when a line names a cloud)
"""

import re
import subprocess
import sys

CLOUDS = ("openstack", "aws", "vsphere", "azure", "gcp", "gce")
# A cloud as a word (`"aws"`, `cloud-provider-aws`, `aws::`) or at the start of an
# identifier (`OpenStackError`, `Provider::Gcp`, `AwsQuery`).
WORD = re.compile(r"\b(" + "|".join(CLOUDS) + r")\b", re.IGNORECASE)
IDENT = re.compile(r"\b(OpenStack|Aws|VSphere|Vsphere|Azure|Gcp|Gce)(?=[A-Z_]|\b)")

OWN = [
    re.compile(r"^mocks/(" + "|".join(CLOUDS) + r")/"),
    re.compile(r"^reference-ccm/src/providers/(" + "|".join(CLOUDS) + r")/"),
    re.compile(r"^harness/src/cloud/(" + "|".join(CLOUDS) + r")(\.rs|/)"),
]
REGISTRIES = {"harness/src/cloud/registry.rs", "reference-ccm/src/providers/registry.rs"}
# `mod aws;`: how Rust is told a cloud's file exists, next to the registry that lists it.
MOD_DECLARATION = re.compile(r"^\s*(pub(\(crate\))?\s+)?mod\s+\w+;\s*$")


def is_test_file(path):
    parts = path.split("/")
    name = parts[-1]
    return (
        "tests" in parts[:-1]
        or name in ("tests.rs", "proptests.rs", "testing.rs")
        or name.endswith("_tests.rs")
    )


def code_lines(text):
    """(number, line) of the code outside comments and #[cfg(test)] items."""
    skip_depth = None  # brace depth at which a #[cfg(test)] item ends
    pending_test = False
    depth = 0
    in_block_comment = False
    for n, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if in_block_comment:
            if "*/" in stripped:
                in_block_comment = False
            continue
        if stripped.startswith("/*"):
            in_block_comment = "*/" not in stripped
            continue
        if stripped.startswith("#[cfg(test)]"):
            pending_test = True
            continue
        code = strip_comment(line)
        opens, closes = code.count("{"), code.count("}")
        if pending_test and skip_depth is None:
            skip_depth = depth
            pending_test = False
        in_test = skip_depth is not None
        depth += opens - closes
        if in_test:
            if depth <= skip_depth and (closes or code.rstrip().endswith(";")):
                skip_depth = None
            continue
        if code.strip():
            yield n, code


def strip_comment(line):
    """The line without a `//` comment (a `//` inside a string literal stays)."""
    in_str = False
    i = 0
    while i < len(line):
        c = line[i]
        if c == "\\" and in_str:
            i += 2
            continue
        if c == '"':
            in_str = not in_str
        elif not in_str and line.startswith("//", i):
            return line[:i]
        i += 1
    return line


def main():
    files = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard", "*.rs"],
        capture_output=True, text=True, check=True,
    ).stdout.split()
    hits = []
    for path in sorted(set(files)):
        if path.startswith("target/") or is_test_file(path) or path in REGISTRIES:
            continue
        if any(p.match(path) for p in OWN):
            continue
        try:
            text = open(path, encoding="utf-8").read()
        except FileNotFoundError:
            continue
        for n, code in code_lines(text):
            if MOD_DECLARATION.match(code):
                continue
            if WORD.search(code) or IDENT.search(code):
                hits.append(f"{path}:{n}: {code.strip()}")
    if "--count" in sys.argv:
        print(len(hits))
    else:
        for h in hits:
            print(h)
        if hits:
            print(f"{len(hits)} lines outside a cloud's own folders name a cloud", file=sys.stderr)
    return 1 if hits else 0


if __name__ == "__main__":
    sys.exit(main())
