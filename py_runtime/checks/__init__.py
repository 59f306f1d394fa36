"""Workloads the page, the CLI and the tests run through app.run: each returns a JSON-able report
and hands bulk outputs to a sink so the host oracle can check them."""
