#!/usr/bin/env python3
"""Tests of ci/check_cloud_names.py's reading of Rust: what counts as code that names a
cloud, and what is left out (comments, #[cfg(test)] modules, mod lines, strings' `//`)."""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_cloud_names as c  # noqa: E402


def named(text):
    return [n for n, code in c.code_lines(text)
            if not c.MOD_DECLARATION.match(code) and (c.WORD.search(code) or c.IDENT.search(code))]


class CodeLines(unittest.TestCase):
    def test_names_in_code_are_found(self):
        self.assertEqual(named('let p = "aws";\nlet x = Provider::Gcp;\nlet y = 1;\n'), [1, 2])

    def test_comments_and_test_modules_are_left_out(self):
        text = (
            "// cloud-provider-aws does this\n"
            "/// vSphere too\n"
            "let url = format!(\"openstack:///{}\", id); // a comment\n"
            "#[cfg(test)]\n"
            "mod tests {\n"
            "    fn t() { let _ = \"azure\"; }\n"
            "}\n"
            "let after = \"gce\";\n"
        )
        self.assertEqual(named(text), [3, 8])

    def test_a_double_slash_in_a_string_is_not_a_comment(self):
        self.assertEqual(named('let u = "http://x/" ; let p = "aws";\n'), [1])

    def test_mod_declarations_are_not_names(self):
        self.assertEqual(named("mod aws;\npub mod gcp;\npub(crate) mod azure;\n"), [])

    def test_an_identifier_that_starts_with_a_cloud_counts(self):
        self.assertEqual(named("fn f(e: OpenStackError) {}\nlet awsome = 1;\n"), [1])


if __name__ == "__main__":
    unittest.main()
