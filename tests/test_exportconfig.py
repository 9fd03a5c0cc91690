"""export-config: lab paths become conventional places, wherever the temp dir was."""

import pytest

from stacklab.run.exportconfig import clean


@pytest.mark.parametrize("text, want", [
    ("datadir = /tmp/stacklab-0/s-21709-abcdef12/cache/mariadb-10.11.19-9f8e/data",
     "datadir = /var/lib/stacklab/data/mariadb/data"),
    ("root /var/tmp/x/stacklab-33/s-5-0123abcd/docroot-static-page;", "root /var/www/html;"),
    ("pid /tmp/stacklab-0/s-21709-abcdef12/0123456789ab-r1/nginx/nginx.pid;",
     "pid /var/lib/stacklab/nginx/nginx.pid;"),
    ('SSLCertificateFile "/tmp/stacklab-0/s-1-abcdef12/lab-cert.pem"',
     'SSLCertificateFile "/var/lib/stacklab/../../etc/ssl/stacklab/cert.pem"'.replace(
         "/var/lib/stacklab/../..", "")),
    ("listen 127.0.0.1:45678;", "listen 127.0.0.1:PORT;"),
    ("fastcgi_pass unix:/tmp/stacklab-0/s-1-abcdef12/0123456789ab-r2/php-fpm/php-fpm.sock;",
     "fastcgi_pass unix:/var/lib/stacklab/php-fpm/php-fpm.sock;"),
    # paths as the templates quote them
    ('pid "/tmp/stacklab-0/s-1-abcdef12/0123456789ab-r1/nginx/nginx.pid";',
     'pid "/var/lib/stacklab/nginx/nginx.pid";'),
    ('Mutex "file:/tmp/stacklab-0/s-1-abcdef12/0123456789ab-r1/apache" default',
     'Mutex "file:/var/lib/stacklab/apache" default'),
    ('chdir = "/tmp/stacklab-0/s-1-abcdef12/docroot-static-page"', 'chdir = "/var/www/html"'),
])
def test_lab_paths_are_cleaned(text, want):
    assert clean(text) == want
    assert "stacklab-0/s-" not in clean(text)
