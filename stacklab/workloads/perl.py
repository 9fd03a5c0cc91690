"""Perl pages (the S2 study's Perl CGI case)."""

from __future__ import annotations

from ..measure.verify import Expect
from .files import File

MARKER = b"<!-- stacklab perl-page ok -->"

# Works unchanged as plain CGI and under ModPerl::Registry / ModPerl::PerlRun.
PAGE = b"""#!/usr/bin/perl
use strict;
use warnings;
my @words = qw(lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor);
print "Content-Type: text/html\\r\\n\\r\\n";
print "<!DOCTYPE html>\\n<html><head><title>stacklab perl page</title></head><body><table>\\n";
for my $i (0 .. 99) {
    my $w = join ' ', map { $words[($i * 7 + $_) % @words] } 0 .. 5;
    printf "<tr><td>%d</td><td>%s</td><td>%.3f</td></tr>\\n", $i, ucfirst($w), sqrt($i + 1);
}
print "</table><!-- stacklab perl-page ok --></body></html>\\n";
"""


def perl_page(seed: int):
    return [File("/index.pl", PAGE, Expect(contains=MARKER), mode=0o755)]
