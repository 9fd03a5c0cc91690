"""Perl pages (the S2 study's Perl CGI case) and stacklab's Perl probe."""

from __future__ import annotations

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

# Reports how Perl really runs: mod_perl or not, the process, and whether the compiled
# script survives between requests (ModPerl::Registry keeps it; PerlRun and CGI do not).
PROBE = b"""#!/usr/bin/perl
use strict;
use warnings;
our $served;
$served++;
print "Content-Type: application/json\\r\\nCache-Control: no-store\\r\\n\\r\\n";
printf '{"mod_perl":"%s","pid":%d,"served":%d}', ($ENV{MOD_PERL} || ''), $$, $served;
"""


def perl_page(seed: int):
    from . import File
    from ..verify import Expect
    return [File("/index.pl", PAGE, Expect(contains=MARKER), mode=0o755)]
